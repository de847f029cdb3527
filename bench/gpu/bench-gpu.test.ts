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
import { matmulWork } from './profile-summary.ts';

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

/**
 * Profile mode's summary, per session: a PPO step's train and AdamW sessions and the decode
 * session each profiled, with kernels counted and node time never above the runs' wall time.
 */
function checkProfile(out: string, model: string, gpu: boolean): void {
  const j = JSON.parse(readFileSync(out.replace(/\.json$/, '-profile.json'), 'utf8')) as { models: Record<string, Record<string, any>> };
  const sessions = j.models[model]!;
  assert.equal(sessions['error'], undefined, String(sessions['error']));
  for (const kind of ['train-ppo', 'adamw', 'decode']) assert.ok(Object.keys(sessions).some((k) => k.includes(kind)), `no ${kind} session in ${Object.keys(sessions).join(', ')}`);
  for (const [name, p] of Object.entries(sessions)) {
    assert.ok(p.runs > 0 && p.medianRunMs > 0, `${name}: ${p.runs} runs, median ${p.medianRunMs} ms`);
    assert.equal(p.unmatchedGpuEvents, 0, `${name}: GPU events no run accounts for`);
    for (const part of ['steady', 'medianRun']) {
      const s = p[part];
      const what = `${name} ${part}`;
      assert.ok(s.runs > 0 && s.nodesPerRun > 0, `${what}: runs ${s.runs}, nodes per run ${s.nodesPerRun}`);
      assert.ok(s.nodeMs > 0 && s.nodeMs <= s.wallMs, `${what}: node time ${s.nodeMs} ms of wall ${s.wallMs} ms`);
      assert.ok(Math.abs(s.hostGapMs - (s.wallMs - s.nodeMs)) < 1e-6 && s.hostGapShare >= 0 && s.hostGapShare <= 1, `${what}: host gap`);
      const classes = Object.values(s.byClass as Record<string, { ms: number }>).reduce((a, c) => a + c.ms, 0);
      assert.ok(Math.abs(classes - s.nodeMs) < 1e-6 * Math.max(1, s.nodeMs), `${what}: classes sum to ${classes}, node time ${s.nodeMs}`);
      assert.ok(s.topOps.length > 0 && s.topOps.length <= 15 && s.topOps.reduce((a: number, o: { ms: number }) => a + o.ms, 0) <= s.nodeMs + 1e-6, `${what}: top ops`);
      if (!gpu) {
        assert.equal(typeof s.gpu, 'string', `${what}: GPU kernel times on the CPU provider`);
        continue;
      }
      assert.equal(typeof s.gpu, 'object', `${what}: no GPU kernel times on WebGPU: ${String(s.gpu)}`);
      assert.ok(s.gpu.kernelsPerRun > 0 && s.gpu.kernelMs > 0 && s.gpu.kernelMs <= s.wallMs, `${what}: GPU ${s.gpu.kernelsPerRun} kernels per run, ${s.gpu.kernelMs} ms of wall ${s.wallMs} ms`);
      if (!name.includes('adamw')) assert.ok(s.gpu.matmul.tflops > 0 && s.gpu.matmul.shapes.length > 0 && s.gpu.matmul.ms <= s.gpu.kernelMs, `${what}: MatMul throughput ${JSON.stringify(s.gpu.matmul).slice(0, 300)}`);
    }
  }
}

test("profile-summary's MatMul work: 2·M·N·K from the node's own shapes", () => {
  const node = { cat: 'Node', name: 'n.1.MatMul_kernel_time', ts: 0, dur: 1, args: { op_name: 'MatMul', input_type_shape: [{ float: [2, 32, 896] }, { float: [896, 128] }], output_type_shape: [{ float: [2, 32, 128] }] } };
  assert.deepEqual(matmulWork(node), { key: '[2,32,896]x[896,128]', flops: 2 * 64 * 128 * 896 });
  assert.equal(matmulWork({ ...node, args: { op_name: 'MatMul' } }), null);
});

test('bench:gpu profile mode (tiny, CPU provider): per-session kernel counts, op times within wall time', () => {
  const out = join(dir, 'gpu-profile-cpu.json');
  run('bench/gpu/bench-gpu.ts', { BENCH_GPU_TINY: '1', BENCH_GPU_PROFILE: '1', BENCH_GPU_PROFILE_TRACES: join(dir, 'traces-cpu'), BENCH_GPU_OUT: out, BENCH_GPU_PHASE_S: '1', BENCH_GPU_SIDES: 'troupe', BENCH_GPU_MODELS: 'tiny-qwen3' });
  checkProfile(out, 'tiny-qwen3', false);
});

test('bench:gpu profile mode (tiny, WebGPU): GPU kernel times split by run', (t) => {
  const out = join(dir, 'gpu-profile-webgpu.json');
  run('bench/gpu/bench-gpu.ts', { BENCH_GPU_TINY: '1', BENCH_GPU_PROFILE: '1', BENCH_GPU_PROVIDER: 'webgpu', BENCH_GPU_PROFILE_TRACES: join(dir, 'traces-webgpu'), BENCH_GPU_OUT: out, BENCH_GPU_PHASE_S: '1', BENCH_GPU_SIDES: 'troupe', BENCH_GPU_MODELS: 'tiny-qwen2.5' });
  const troupe = (JSON.parse(readFileSync(out, 'utf8')) as { models: Array<{ troupe: Record<string, unknown> }> }).models[0]!.troupe;
  if (troupe['provider'] !== 'webgpu') return void t.skip(`no WebGPU adapter here (${String(troupe['error'] ?? troupe['provider'])}); bash test/gpu/setup-webgpu.sh installs lavapipe`);
  checkProfile(out, 'tiny-qwen2.5', true);
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
