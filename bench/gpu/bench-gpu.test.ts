/**
 * The GPU benchmarks' CI-sized forms run on every machine so they cannot rot between the rare
 * sessions that have a GPU: `bench:gpu` with BENCH_GPU_TINY=1 (tiny models of both architectures,
 * Troupe on the CPU provider; PyTorch fp32 on the CPU where this machine's python3 has torch) and
 * `webgpu-kernels.ts` on the CPU provider. Each writes its JSON with every figure it promises.
 */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { benchPython } from '../engine/bench-util.ts';

const root = fileURLToPath(new URL('../..', import.meta.url));
const dir = mkdtempSync(join(tmpdir(), 'troupe-bench-gpu-'));
after(() => rmSync(dir, { recursive: true, force: true }));
const torch = spawnSync(benchPython(), ['-c', 'import torch'], { encoding: 'utf8' }).status === 0;

function run(script: string, env: Record<string, string>): void {
  const r = spawnSync(process.execPath, ['--import', 'tsx', script], { cwd: root, env: { ...process.env, ...env }, encoding: 'utf8', timeout: 300_000 });
  assert.equal(r.status, 0, `${script} exited ${r.status ?? r.signal}:\n${(r.stderr ?? '').slice(-2000)}`);
}

test(`bench:gpu's tiny form: a PPO step and both decode variants per model${torch ? ', beside PyTorch' : ' (PyTorch side skipped: python3 has no torch)'}`, () => {
  const out = join(dir, 'gpu-tiny.json');
  run('bench/gpu/bench-gpu.ts', { BENCH_GPU_TINY: '1', BENCH_GPU_OUT: out, BENCH_GPU_PHASE_S: '1', BENCH_GPU_SIDES: torch ? 'pytorch,troupe' : 'troupe', BENCH_GPU_DECODE: 'fused,host-sampling' });
  const j = JSON.parse(readFileSync(out, 'utf8')) as { models: Array<{ name: string; troupe: Record<string, any>; pytorch?: Record<string, any> }> };
  assert.deepEqual(j.models.map((m) => m.name), ['tiny-qwen2.5', 'tiny-qwen3']);
  for (const m of j.models) {
    assert.equal(m.troupe['ppo'].error, undefined, `${m.name} PPO: ${m.troupe['ppo'].error}`);
    assert.ok(m.troupe['ppo'].tokPerSec > 0 && Number.isFinite(m.troupe['ppo'].loss[0]), `${m.name} PPO figures`);
    for (const variant of ['fused-fp32', 'fused-fp32-host-sampling']) {
      const d = m.troupe['decode'][variant];
      assert.ok(d && d.error === undefined && d.tokPerSec > 0, `${m.name} ${variant}: ${JSON.stringify(d)}`);
      assert.ok(d.lastRound.steps > 0 && d.lastRound.runMsPerStep > 0, `${m.name} ${variant}: where the time went`);
    }
    if (torch) assert.ok(m.pytorch?.['ppo']?.tokPerSec > 0 && m.pytorch?.['decode']?.tokPerSec > 0, `${m.name} PyTorch: ${JSON.stringify(m.pytorch)}`);
  }
});

test(`webgpu-kernels.ts on the CPU provider: GEMM throughput and a small kernel's cost${torch ? ', beside PyTorch' : ''}`, () => {
  const out = join(dir, 'kernels.json');
  run('bench/gpu/webgpu-kernels.ts', { KERNELS_PROVIDER: 'cpu', KERNELS_TORCH_DEVICE: 'cpu', KERNELS_GEMMS: '64x32x4', KERNELS_ADDS: '8x32x20', KERNELS_REPS: '2', KERNELS_OUT: out });
  const j = JSON.parse(readFileSync(out, 'utf8')) as Record<string, any>;
  assert.equal(j['error'], undefined, String(j['error']));
  assert.deepEqual(j['gemm'].map((g: Record<string, unknown>) => g['dtype']), ['float32', 'float16']);
  assert.ok(j['gemm'].every((g: Record<string, unknown>) => typeof g['ms'] === 'number' && (g['ms'] as number) > 0), JSON.stringify(j['gemm']));
  assert.ok(j['adds'].ms > 0);
  if (torch) assert.ok(j['pytorch'].gemm.length === 1 && j['pytorch'].adds.usPerKernel > 0, JSON.stringify(j['pytorch']));
});
