/**
 * `troupe doctor`: which execution providers work here and which one `"executionProvider":
 * "auto"` picks, and why. The pick is the engine's own (an engine is started with `auto`, so
 * it probes exactly as a training run does); beside it come what the system shows for each GPU
 * provider (CUDA libraries, NVIDIA driver, Vulkan loader and devices), so a provider that does
 * not work comes with the missing piece named. It also says whether model-written code can run
 * sandboxed here (bubblewrap, probed by running a trivial program through the whole sandbox).
 */
import { availableParallelism } from 'node:os';
import { Engine, type ExecutionProviderName, type ProviderReport } from '../runtime/engine.ts';
import { hostDevices, type HostDevices } from '../runtime/host-devices.ts';
import { probeSandbox, type SandboxProbe } from '../sandbox/probe.ts';
import { expectPositionals, parseCommandLine, printUsage, type Command } from './command.ts';

const usage = `usage: troupe doctor [--json]

Says which ONNX Runtime execution providers work on this machine and which one an experiment
with "engine": { "executionProvider": "auto" } would use, and why. Each GPU provider is probed
by running a one-node model on it; auto takes CUDA, then WebGPU on a hardware adapter, else the
CPU (a software WebGPU adapter such as Mesa's lavapipe is slower than the CPU and only used when
named). Also lists the CUDA libraries and Vulkan devices the system has, and whether
model-written code (code environments) can run in the bubblewrap sandbox here, or what to fix.

options:
  --json       print one JSON object
  -h, --help   this text
`;

export interface DoctorReport {
  readonly onnxruntime: { readonly version: string; readonly backends: readonly string[] };
  readonly cpu: { readonly available: true; readonly cores: number };
  readonly cuda: NonNullable<ProviderReport['cuda']> & HostDevices['cuda'];
  readonly webgpu: NonNullable<ProviderReport['webgpu']> & { readonly vulkan: HostDevices['vulkan'] };
  readonly auto: { readonly provider: ExecutionProviderName; readonly reason: string };
  /** Whether model-written code can run sandboxed here (sandbox.mode "bubblewrap"), and the remedy if not. */
  readonly sandbox: SandboxProbe;
}

async function diagnose(): Promise<DoctorReport> {
  const [engine, host, sandbox] = await Promise.all([Engine.start({ executionProvider: 'auto', threads: 1, log: () => {} }), hostDevices(), probeSandbox()]);
  try {
    const r = engine.providerReport;
    // 'auto' probes both GPU providers; a report without them means the engine changed, not the machine.
    if (!r?.cuda || !r.webgpu) throw new Error('the engine did not report probing cuda and webgpu for auto');
    return {
      onnxruntime: { version: r.ortVersion, backends: r.backends },
      cpu: { available: true, cores: availableParallelism() },
      cuda: { ...r.cuda, ...host.cuda },
      webgpu: { ...r.webgpu, vulkan: host.vulkan },
      auto: { provider: engine.provider, reason: engine.providerReason },
      sandbox,
    };
  } finally {
    await engine.close();
  }
}

function formatReport(d: DoctorReport): string {
  const out: string[] = [`onnxruntime-node ${d.onnxruntime.version} (backends in this build: ${d.onnxruntime.backends.join(', ')})`, ''];
  const row = (name: string, ok: boolean, detail: string) => out.push(`${name.padEnd(7)} ${(ok ? 'works' : 'no').padEnd(6)} ${detail}`);
  const more = (line: string) => out.push(`${''.padEnd(14)} ${line}`);
  row('cpu', true, `${d.cpu.cores} cores`);
  row('cuda', d.cuda.available, d.cuda.detail);
  more(`provider library: ${d.cuda.providerLibrary.installed ? d.cuda.providerLibrary.path : 'not installed'}`);
  more(`NVIDIA driver: ${d.cuda.nvidiaDriver ?? 'none (no /proc/driver/nvidia/version)'}`);
  const libs = Object.entries(d.cuda.libraries);
  const missing = libs.filter(([, p]) => p === null).map(([l]) => l);
  more(`CUDA libraries: ${missing.length === 0 ? 'all found' : `${libs.length - missing.length} of ${libs.length} found; missing ${missing.join(', ')}`}`);
  row('webgpu', d.webgpu.available, d.webgpu.detail);
  if (d.webgpu.float16 !== undefined) more(`float16 (shader-f16, for rollout.weights "fp16"): ${d.webgpu.float16 ? 'yes' : 'no'}`);
  more(`Vulkan loader: ${d.webgpu.vulkan.loader ?? 'not found (libvulkan.so.1)'}`);
  const devices = d.webgpu.vulkan.devices;
  if (devices === null) more('Vulkan devices: vulkaninfo not installed (Debian: apt-get install vulkan-tools)');
  else if (devices.length === 0) more('Vulkan devices: none');
  else for (const v of devices) more(`Vulkan device: ${v.name} [${v.type}]${v.driver ? ` ${v.driver}` : ''}`);
  out.push('', `auto picks ${d.auto.provider}: ${d.auto.reason}`, '');
  row('sandbox', d.sandbox.available, d.sandbox.available ? `model-written code runs sandboxed: ${d.sandbox.detail}` : `model-written code cannot run sandboxed: ${d.sandbox.detail}`);
  if (d.sandbox.remedy) more(`to fix: ${d.sandbox.remedy}`);
  return `${out.join('\n')}\n`;
}

export const doctorCommand: Command = {
  synopsis: ['doctor [--json]'],
  summary: 'which execution providers (cpu, cuda, webgpu) work here, which one auto picks and why, and whether the code sandbox works',
  usage,
  async run(args) {
    const { values, positionals } = parseCommandLine(usage, {
      args: [...args],
      options: {
        json: { type: 'boolean', default: false },
        help: { type: 'boolean', short: 'h', default: false },
      },
      allowPositionals: true,
      strict: true,
    });
    if (values.help) return printUsage(usage);
    expectPositionals(positionals, [], usage);
    const report = await diagnose();
    process.stdout.write(values.json ? `${JSON.stringify(report)}\n` : formatReport(report));
    return 0;
  },
};
