/**
 * `troupe doctor` end to end: the real CLI in a child process, checked against the engine's own
 * provider choice and against what the system shows. Holds on any machine: with or without
 * lavapipe, CUDA libraries or a GPU (the assertions follow from the report, not from a machine).
 */
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { z } from 'zod';
import { Engine } from '../../server/runtime/engine.ts';
import { hostDevices } from '../../server/runtime/host-devices.ts';
import { chooseProvider } from '../../server/runtime/provider-choice.ts';
import { vulkanDriverManifests } from '../../server/runtime/vulkan-drivers.ts';

const cli = fileURLToPath(new URL('../../server/cli/troupe.mjs', import.meta.url));

function doctor(args: readonly string[], env: NodeJS.ProcessEnv = process.env): Promise<{ code: number; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    execFile(process.execPath, [cli, 'doctor', ...args], { env, timeout: 120_000 }, (err, stdout, stderr) => {
      const code = err === null ? 0 : typeof err.code === 'number' ? err.code : -1;
      resolve({ code, stdout, stderr });
    });
  });
}

const status = z.object({ available: z.boolean(), detail: z.string().min(1) });
const reportSchema = z.strictObject({
  onnxruntime: z.object({ version: z.string(), backends: z.array(z.string()) }),
  cpu: z.object({ available: z.literal(true), cores: z.number().int().positive() }),
  cuda: status.extend({
    providerLibrary: z.object({ path: z.string(), installed: z.boolean() }),
    nvidiaDriver: z.string().nullable(),
    libraries: z.record(z.string(), z.string().nullable()),
  }),
  webgpu: status.extend({
    adapter: z.enum(['hardware', 'software']).nullable(),
    float16: z.boolean().optional(),
    vulkan: z.object({
      loader: z.string().nullable(),
      devices: z.array(z.object({ name: z.string(), type: z.string(), driver: z.string() })).nullable(),
    }),
  }),
  auto: z.object({ provider: z.enum(['cpu', 'cuda', 'webgpu']), reason: z.string().min(1) }),
  sandbox: z.strictObject({ available: z.boolean(), detail: z.string().min(1), remedy: z.string().min(1).optional(), bubblewrapVersion: z.string().optional() }),
});

describe('troupe doctor', () => {
  test('--json: the report, whose auto pick is the choice rule applied to it and agrees with the engine', async () => {
    const r = await doctor(['--json']);
    assert.equal(r.code, 0, r.stderr);
    const d = reportSchema.parse(JSON.parse(r.stdout));
    assert.ok(d.onnxruntime.backends.includes('cpu'));
    const { available, detail, adapter } = d.webgpu;
    const expected = chooseProvider('auto', { ortVersion: d.onnxruntime.version, backends: d.onnxruntime.backends, cuda: { available: d.cuda.available, detail: d.cuda.detail }, webgpu: { available, detail, adapter } });
    assert.deepEqual(d.auto, expected);
    // A software adapter is never auto's pick; an adapter is reported exactly when webgpu works.
    if (adapter === 'software') assert.notEqual(d.auto.provider, 'webgpu');
    assert.equal(adapter !== null, available);
    // Whether the adapter runs float16 (shader-f16) is known exactly when there is one.
    assert.equal(d.webgpu.float16 !== undefined, available);
    if (!d.cuda.providerLibrary.installed) assert.match(d.cuda.detail, /ONNXRUNTIME_NODE_INSTALL=cuda12/);
    // vulkaninfo (when installed) sees the devices Dawn can use: with only CPU-type devices the
    // adapter cannot be hardware.
    const devices = d.webgpu.vulkan.devices;
    if (devices !== null && devices.every((v) => v.type === 'CPU')) assert.notEqual(adapter, 'hardware');
    // The engine, asked for webgpu by name, gets it exactly when doctor says it works.
    const e = await Engine.start({ executionProvider: 'webgpu', threads: 1, log: () => {} });
    try {
      assert.equal(e.provider === 'webgpu', available, e.providerReason);
    } finally {
      await e.close();
    }
  });

  test('text: one line per provider and the auto pick with its reason', async () => {
    const [text, json] = await Promise.all([doctor([]), doctor(['--json'])]);
    assert.equal(text.code, 0, text.stderr);
    const d = reportSchema.parse(JSON.parse(json.stdout));
    for (const p of ['cpu', 'cuda', 'webgpu']) assert.match(text.stdout, new RegExp(`^${p} +(works|no) +\\S`, 'm'));
    assert.ok(text.stdout.includes(`auto picks ${d.auto.provider}: ${d.auto.reason}\n`), text.stdout);
    if (d.webgpu.float16 !== undefined) assert.match(text.stdout, new RegExp(`float16 \\(shader-f16, for rollout\\.weights "fp16"\\): ${d.webgpu.float16 ? 'yes' : 'no'}\n`));    // The sandbox line agrees with the probe; where it cannot run, the remedy is printed beside it.
    assert.match(text.stdout, new RegExp(`^sandbox +${d.sandbox.available ? 'works' : 'no'} +\\S`, 'm'));
    assert.equal(d.sandbox.available, d.sandbox.remedy === undefined);
    if (d.sandbox.remedy) assert.ok(text.stdout.includes(`to fix: ${d.sandbox.remedy}`), text.stdout);
  });

  test('with no Vulkan driver WebGPU has no adapter, and doctor says so', async () => {
    // The Vulkan loader takes its driver list from VK_ICD_FILENAMES; a file that does not exist
    // leaves it with none, as on a machine without a Vulkan driver.
    const r = await doctor(['--json'], { ...process.env, VK_ICD_FILENAMES: '/nonexistent/troupe-no-driver.json', VK_DRIVER_FILES: '/nonexistent/troupe-no-driver.json' });
    assert.equal(r.code, 0, r.stderr);
    const d = reportSchema.parse(JSON.parse(r.stdout));
    if (!d.onnxruntime.backends.includes('webgpu')) return;
    assert.equal(d.webgpu.available, false);
    assert.equal(d.webgpu.adapter, null);
    // Without the loader itself (a fresh machine without libvulkan1) there is no driver list to
    // empty, and the detail names the missing loader instead, with its remedy.
    if (d.webgpu.vulkan.loader === null) assert.match(d.webgpu.detail, /^no Vulkan loader \(libvulkan\.so\.1; Debian: apt-get install libvulkan1/);
    else assert.match(d.webgpu.detail, /^no WebGPU adapter \(.*test\/gpu\/setup-webgpu\.sh/);
    assert.notEqual(d.auto.provider, 'webgpu');
  });

  test('lavapipe beside a hardware driver that finds no GPU is still a software adapter', async (t) => {
    const lvp = vulkanDriverManifests(process.env).find((m) => m.software && existsSync(m.path));
    if (!lvp) return t.skip('no lavapipe manifest installed (bash test/gpu/setup-webgpu.sh)');
    if ((await hostDevices()).vulkan.loader === null) return t.skip('no Vulkan loader (libvulkan.so.1), so no driver can load (bash test/gpu/setup-webgpu.sh)');
    // Beside lavapipe: the machine's hardware drivers (Mesa installs several; without their GPU
    // they report no device) and one whose library is missing, standing for a broken install.
    const dir = mkdtempSync(join(tmpdir(), 'troupe-icd-'));
    try {
      const fake = join(dir, 'vendor_icd.json');
      writeFileSync(fake, JSON.stringify({ file_format_version: '1.0.0', ICD: { library_path: join(dir, 'libvulkan_missing.so'), api_version: '1.3.0' } }));
      const others = vulkanDriverManifests(process.env).filter((m) => !m.software).map((m) => m.path);
      const files = [lvp.path, fake, ...others].join(':');
      const r = await doctor(['--json'], { ...process.env, VK_DRIVER_FILES: files, VK_ICD_FILENAMES: files });
      assert.equal(r.code, 0, r.stderr);
      const d = reportSchema.parse(JSON.parse(r.stdout));
      if (d.webgpu.vulkan.devices?.some((v) => v.type !== 'CPU')) return t.skip('this machine has a hardware Vulkan device');
      assert.equal(d.webgpu.adapter, 'software', d.webgpu.detail);
      assert.equal(d.auto.provider === 'webgpu', false);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  test('an argument or unknown flag is a usage error (exit 2)', async () => {
    for (const args of [['extra'], ['--bogus']]) {
      const r = await doctor(args);
      assert.equal(r.code, 2, args.join(' '));
      assert.match(r.stderr, /usage: troupe doctor \[--json\]/);
    }
  });
});
