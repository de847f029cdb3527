/**
 * Probes execution providers: a provider counts as available only once a one-node model has
 * run on it, since drivers, adapters and provider libraries fail in ways no listing shows.
 *
 * WebGPU is probed in child processes. Dawn (inside onnxruntime-node) picks its adapter when it
 * first starts in a process and keeps it, and the only way to ask "is there a *hardware*
 * adapter?" is to start it with the software Vulkan drivers hidden (`vulkan-drivers.ts`) — by
 * environment variables the Vulkan loader reads once per process. Two children, one with every
 * driver and one without the software ones, tell hardware from software (lavapipe, SwiftShader)
 * without leaving a Dawn instance in a process that ends up on the CPU.
 */
import { execFile } from 'node:child_process';
import { existsSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import * as ort from 'onnxruntime-node';
import type { ProviderReport, ProviderStatus, WebGpuStatus } from './provider-choice.ts';
import { hardwareOnlyEnv } from './vulkan-drivers.ts';

// A one-node model (y = x + 1, float32 [1]) emitted by the compiler, used to probe providers.
const PROBE_MODEL_BASE64 =
  'CAgSBnRyb3VwZRoDMC4xOn8KHwoBeAoHY29uc3QuMRIDdC4yGgduLjAuQWRkIgNBZGQKIAoDdC4yEgF5GgxuLjEuSWRlbnRpdHkiCElkZW50aXR5EgVwcm9iZSoREAFCB2NvbnN0LjFKBAAAgD9aDwoBeBIKCggIARIECgIIAWIPCgF5EgoKCAgBEgQKAggBQgQKABAR';
const PROBE_MODEL = Uint8Array.from(Buffer.from(PROBE_MODEL_BASE64, 'base64'));
// y = float32(float16(x) · float16(1/3)), emitted by the compiler: x = 3 gives exactly 1 in float16
// (3 · 0.333251953125 = 1 − 2⁻¹² rounds to even, up), 0.99975586 had it run in float32. ONNX
// Runtime's WebGPU kernels need the adapter's shader-f16 feature for it ("requires f16 but the
// device does not support it" otherwise).
const PROBE_F16_MODEL_BASE64 =
  'CAgSBnRyb3VwZRoDMC4xOs8BCiMKAXgSA3QuMRoIbi4wLkNhc3QiBENhc3QqCQoCdG8YCqABAgohCgN0LjEKB2NvbnN0LjISA3QuMxoHbi4xLk11bCIDTXVsCiUKA3QuMxIDdC40GghuLjIuQ2FzdCIEQ2FzdCoJCgJ0bxgBoAECCiAKA3QuNBIBeRoMbi4zLklkZW50aXR5IghJZGVudGl0eRIJcHJvYmUtZjE2Kg8QCkIHY29uc3QuMkoCVTVaDwoBeBIKCggIARIECgIIAWIPCgF5EgoKCAgBEgQKAggBQgQKABAR';

/** A child that exits longer than this after starting counts as failed (a hung driver). */
const CHILD_TIMEOUT_MS = 60_000;

/** The line of an ONNX Runtime error that says what failed (its messages carry source paths first). */
export function firstLine(e: unknown): string {
  const s = e instanceof Error ? e.message : String(e);
  const lines = s.split('\n').filter((l) => l.trim());
  return (lines.find((l) => /adapter|load|fail|error/i.test(l)) ?? lines[0] ?? s).trim().slice(0, 300);
}

export function ortBackends(): string[] {
  return ort.listSupportedBackends().map((b) => b.name);
}

const ortDir = (): string => dirname(createRequire(import.meta.url).resolve('onnxruntime-node/package.json'));

/** Where onnxruntime-node looks for its CUDA provider library (absent unless installed; docs/gpu.md). */
export function cudaProviderLibrary(): string {
  return join(ortDir(), 'bin', 'napi-v6', process.platform, process.arch, 'libonnxruntime_providers_cuda.so');
}

/** Creates a session on `provider` and runs the one-node model; resolves with why not, or null. */
export async function runProbeModel(provider: 'cuda' | 'webgpu'): Promise<string | null> {
  try {
    const s = await ort.InferenceSession.create(PROBE_MODEL, { executionProviders: [provider], logSeverityLevel: 3 });
    try {
      const r = await s.run({ x: new ort.Tensor('float32', Float32Array.from([2]), [1]) });
      const y = (r['y']?.data as Float32Array | undefined)?.[0];
      return y === 3 ? null : `the probe model computed ${String(y)} instead of 3`;
    } finally {
      await s.release();
    }
  } catch (e) {
    return firstLine(e);
  }
}

async function probeCuda(backends: readonly string[]): Promise<ProviderStatus> {
  if (!backends.includes('cuda')) return { available: false, detail: `not among this onnxruntime-node build's backends (${backends.join(', ')})` };
  // Without the provider libraries ORT prints a native error before failing; say how to install them instead.
  if (process.platform === 'linux' && !existsSync(cudaProviderLibrary())) {
    return { available: false, detail: 'cuda provider libraries are not installed (ONNXRUNTIME_NODE_INSTALL=cuda12 node node_modules/onnxruntime-node/script/install.js)' };
  }
  const why = await runProbeModel('cuda');
  return why === null ? { available: true, detail: 'CUDA device 0' } : { available: false, detail: `cuda failed to start: ${why}` };
}

interface ChildProbe {
  readonly ok: boolean;
  readonly error: string;
  /** The float16 probe gave the float16 result (null: not run, the float32 probe failed). */
  readonly f16: boolean | null;
  /** What the child printed on stderr (Dawn's and the Vulkan loader's warnings). */
  readonly stderr: string;
}

// Runs in a fresh `node -e`, so it must be plain CommonJS; argv: onnxruntime-node's path, the
// model, the float16 model (run once the first works; its failure only clears f16).
const CHILD_SCRIPT = `
const [ortPath, model, f16Model] = process.argv.slice(1);
const ort = require(ortPath);
const run = async (m, x) => {
  const s = await ort.InferenceSession.create(Buffer.from(m, 'base64'), { executionProviders: ['webgpu'], logSeverityLevel: 3 });
  return (await s.run({ x: new ort.Tensor('float32', Float32Array.from([x]), [1]) })).y.data[0];
};
(async () => {
  const y = await run(model, 2);
  if (y !== 3) return process.stdout.write(JSON.stringify({ ok: false, error: 'the probe model computed ' + y + ' instead of 3' }));
  const f16 = await run(f16Model, 3).then((v) => v === 1, () => false);
  process.stdout.write(JSON.stringify({ ok: true, f16 }));
})().catch((e) => process.stdout.write(JSON.stringify({ ok: false, error: String((e && e.message) || e) })));
`;

function parseChild(stdout: string): { ok: boolean; error: string; f16: boolean | null } | null {
  try {
    const v: unknown = JSON.parse(stdout);
    if (typeof v !== 'object' || v === null || !('ok' in v) || typeof v.ok !== 'boolean') return null;
    return { ok: v.ok, error: 'error' in v && typeof v.error === 'string' ? v.error : '', f16: 'f16' in v && typeof v.f16 === 'boolean' ? v.f16 : null };
  } catch {
    return null;
  }
}

function webgpuChild(env: NodeJS.ProcessEnv): Promise<ChildProbe> {
  const entry = createRequire(import.meta.url).resolve('onnxruntime-node');
  return new Promise((resolve) => {
    execFile(process.execPath, ['-e', CHILD_SCRIPT, entry, PROBE_MODEL_BASE64, PROBE_F16_MODEL_BASE64], { env, timeout: CHILD_TIMEOUT_MS, maxBuffer: 1 << 20 }, (err, stdout, stderr) => {
      const parsed = parseChild(stdout);
      if (parsed) resolve({ ...parsed, stderr });
      else resolve({ ok: false, error: err ? `probe process failed: ${err.killed ? `no answer in ${CHILD_TIMEOUT_MS / 1000} s` : err.message}` : 'probe process printed no result', f16: null, stderr });
    });
  });
}

/** Why a WebGPU child found no adapter, in the words most useful to someone fixing it. */
function webgpuFailure(c: ChildProbe): string {
  if (/libvulkan\.so\.1/.test(c.stderr)) return 'no Vulkan loader (libvulkan.so.1; Debian: apt-get install libvulkan1 and a Vulkan driver)';
  if (/Failed to get a WebGPU adapter/i.test(c.error)) {
    const dawn = c.stderr.split('\n').find((l) => /required|not supported|Failed to detect/i.test(l));
    return `no WebGPU adapter (${dawn ? `${dawn.trim().slice(0, 160)}; ` : ''}test/gpu/setup-webgpu.sh installs Mesa's lavapipe for tests)`;
  }
  return `webgpu failed to start: ${firstLine(c.error)}`;
}

async function probeWebGpu(backends: readonly string[]): Promise<WebGpuStatus> {
  if (!backends.includes('webgpu')) return { available: false, detail: `not among this onnxruntime-node build's backends (${backends.join(', ')})`, adapter: null };
  const linux = process.platform === 'linux';
  const hardwareEnv = linux ? hardwareOnlyEnv(process.env) : null;
  const [any, hidden] = await Promise.all([webgpuChild(process.env), hardwareEnv ? webgpuChild(hardwareEnv) : null]);
  // Elsewhere Dawn uses D3D12 or Metal, whose adapters are the machine's GPUs.
  const hardware = linux ? hidden : any;
  const float16 = (c: ChildProbe) => (c.f16 === null ? {} : { float16: c.f16 });
  if (hardware?.ok) return { available: true, detail: 'hardware adapter (found with the software Vulkan drivers hidden)', adapter: 'hardware', ...float16(hardware) };
  if (any.ok) return { available: true, detail: 'software adapter only (lavapipe or SwiftShader: Vulkan on the CPU)', adapter: 'software', ...float16(any) };
  return { available: false, detail: webgpuFailure(any), adapter: null };
}

/** Probes the named providers (the others stay absent from the report). */
export async function probeProviders(which: ReadonlyArray<'cuda' | 'webgpu'>): Promise<ProviderReport> {
  const backends = ortBackends();
  const [cuda, webgpu] = await Promise.all([
    which.includes('cuda') ? probeCuda(backends) : undefined,
    which.includes('webgpu') ? probeWebGpu(backends) : undefined,
  ]);
  return { ortVersion: ort.env.versions.node ?? ort.env.versions.common, backends, ...(cuda ? { cuda } : {}), ...(webgpu ? { webgpu } : {}) };
}
