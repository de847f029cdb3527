/**
 * The engine's provider choice on a machine where the GPU providers cannot start, made real by
 * hiding every Vulkan driver from the probes (they run in child processes that inherit this
 * process's environment) — so it holds on CI machines that have lavapipe installed too, and on a
 * fresh machine without the Vulkan loader (libvulkan1), where the reason names the loader instead.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { Engine } from './engine.ts';
import { hostDevices } from './host-devices.ts';

process.env['VK_DRIVER_FILES'] = '/nonexistent/troupe-no-driver.json';
process.env['VK_ICD_FILENAMES'] = '/nonexistent/troupe-no-driver.json';

async function start(provider: 'webgpu' | 'auto'): Promise<{ engine: Engine; lines: string[] }> {
  const lines: string[] = [];
  const engine = await Engine.start({ executionProvider: provider, threads: 1, log: (l) => lines.push(l) });
  return { engine, lines };
}

test('webgpu without an adapter falls back to cpu, and the log line says why', async () => {
  const { engine, lines } = await start('webgpu');
  try {
    assert.equal(engine.provider, 'cpu');
    assert.deepEqual(lines, [`[engine] execution provider: cpu (${engine.providerReason})`]);
    const loader = (await hostDevices()).vulkan.loader;
    const why = process.platform === 'linux' && loader === null ? 'no Vulkan loader \\(libvulkan\\.so\\.1' : 'no WebGPU adapter';
    assert.match(engine.providerReason, new RegExp(`^webgpu unavailable, fell back to cpu: (${why}|not among this onnxruntime-node build's backends)`));
    assert.equal(engine.providerReport?.webgpu?.adapter, null);
    // Sessions still work: the fallback is a working engine, not a broken one.
    const info = await engine.createSession('probe', Uint8Array.from(Buffer.from('CAgSBnRyb3VwZRoDMC4xOn8KHwoBeAoHY29uc3QuMRIDdC4yGgduLjAuQWRkIgNBZGQKIAoDdC4yEgF5GgxuLjEuSWRlbnRpdHkiCElkZW50aXR5EgVwcm9iZSoREAFCB2NvbnN0LjFKBAAAgD9aDwoBeBIKCggIARIECgIIAWIPCgF5EgoKCAgBEgQKAggBQgQKABAR', 'base64')));
    assert.equal(info.executionProvider, 'cpu');
  } finally {
    await engine.close();
  }
});

test('auto without a GPU provider chooses cpu, naming what each GPU provider lacks', async () => {
  const { engine } = await start('auto');
  try {
    assert.equal(engine.provider, 'cpu');
    assert.match(engine.providerReason, /^auto chose cpu \(no GPU provider: cuda: .+; webgpu: .+\)$/);
    assert.ok(engine.providerReport?.cuda && engine.providerReport.webgpu, 'auto probes both GPU providers');
  } finally {
    await engine.close();
  }
});
