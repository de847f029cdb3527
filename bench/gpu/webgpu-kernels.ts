/**
 * Where the GPU time of Troupe's WebGPU path goes, in two numbers per device, each beside PyTorch
 * on the same device in the same run (bench/gpu/torch_gemm.py): the throughput of ONNX Runtime's
 * WebGPU MatMul (fp32, and fp16 with shader-f16) at the shapes of a PPO micro-batch (M = 4096
 * tokens) and of a decode step (M = 64 rows), and the cost of one small kernel (a chain of Adds on
 * a [64, 896] tensor). Each figure is one session run of a chain of identical ops, so launch and
 * transfer costs outside the chain are amortised; the chain's input is a constant scaled by a fed
 * scalar, so nothing is folded away and only 4 bytes go up per run.
 *
 * Run: node --import tsx bench/gpu/webgpu-kernels.ts (env: KERNELS_PROVIDER webgpu, KERNELS_GEMMS
 * "4096x896x8,64x896x32,4096x2048x8,64x2048x32" as MxNxchain, KERNELS_ADDS "64x896x400",
 * KERNELS_REPS 5, KERNELS_OUT bench/results/webgpu-kernels.json, KERNELS_TORCH_DEVICE cuda).
 * On the lent GPU machine it runs from bench/gpu/run-on-device.sh with GPU_BENCH_KERNELS=1.
 */
import { spawnSync } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { Graph, type Node } from '../../server/compiler/ir.ts';
import { emitOnnx } from '../../server/compiler/onnx-emit.ts';
import type { DType } from '../../server/compiler/ops.ts';
import { Engine } from '../../server/runtime/engine.ts';
import { f32 } from '../../server/runtime/tensor.ts';
import { benchPython } from '../engine/bench-util.ts';
import { median } from '../stats.ts';

const env = process.env;
const provider = (env['KERNELS_PROVIDER'] ?? 'webgpu') as 'webgpu' | 'cpu';
const gemms = (env['KERNELS_GEMMS'] ?? '4096x896x8,64x896x32,4096x2048x8,64x2048x32').split(',').map((s) => s.split('x').map(Number) as [number, number, number]);
const adds = (env['KERNELS_ADDS'] ?? '64x896x400').split('x').map(Number) as [number, number, number];
const reps = Number(env['KERNELS_REPS'] ?? 5);
const OUT = env['KERNELS_OUT'] ?? fileURLToPath(new URL('../results/webgpu-kernels.json', import.meta.url));
const say = (l: string) => process.stderr.write(`[webgpu-kernels] ${l}\n`);

/** Deterministic values in [-0.5, 0.5)·scale. */
const values = (n: number, scale: number) => Array.from({ length: n }, (_, i) => (((i * 2654435761) >>> 0) / 2 ** 32 - 0.5) * scale);

/** x = C · s (s fed), then `chain` times x = op(x): the graph whose one run is timed. */
function chainGraph(rows: number, cols: number, chain: number, dtype: DType, op: (b: Graph, x: Node) => Node): Uint8Array {
  const b = new Graph();
  const s = b.input('s', 'float32', [1]);
  let x = b.cast(b.mul(b.constant(values(rows * cols, 0.2), [rows, cols], 'float32'), s), dtype);
  for (let i = 0; i < chain; i++) x = op(b, x);
  return emitOnnx([['y', b.reduceSum(b.cast(x, 'float32'), [0, 1])]], { name: 'chain' });
}

async function time(engine: Engine, name: string, bytes: Uint8Array): Promise<number> {
  await engine.createSession(name, bytes, { optimization: 'disabled' });
  const run = async () => {
    const t = performance.now();
    await engine.run(name, { s: f32([1], [1]) }, { y: 'return' });
    return performance.now() - t;
  };
  await run();
  const ms: number[] = [];
  for (let i = 0; i < reps; i++) ms.push(await run());
  await engine.releaseSession(name);
  return median(ms);
}

async function main(): Promise<void> {
  const engine = await Engine.start({ executionProvider: provider, log: () => {} });
  const result: Record<string, unknown> = { date: new Date().toISOString(), command: 'node --import tsx bench/gpu/webgpu-kernels.ts', provider: engine.provider, providerReason: engine.providerReason, reps };
  const rows: Array<Record<string, unknown>> = [];
  try {
    if (engine.provider !== provider) throw new Error(`provider ${provider} did not start: ${engine.providerReason}`);
    // Cost of the chain's ends (the constant's scaling, the reduction, the run itself): subtracted.
    const base = await time(engine, 'base', chainGraph(64, 896, 0, 'float32', (_, x) => x));
    result['emptyRunMs'] = base;
    for (const [m, n, chain] of gemms) {
      for (const dtype of ['float32', 'float16'] as const) {
        const w = (b: Graph) => b.cast(b.constant(values(n * n, 2 / Math.sqrt(n)), [n, n], 'float32'), dtype);
        try {
          const ms = await time(engine, `gemm-${m}-${n}-${dtype}`, chainGraph(m, n, chain, dtype, (b, x) => b.matmul(x, w(b))));
          const row = { m, n, chain, dtype, ms, tflops: (2 * m * n * n * chain) / (((ms - base) / 1000) * 1e12) };
          rows.push(row);
          say(JSON.stringify(row));
        } catch (e) {
          rows.push({ m, n, chain, dtype, error: String(e).slice(0, 300) });
        }
      }
    }
    result['gemm'] = rows;
    const [r, c, chain] = adds;
    const ms = await time(engine, 'adds', chainGraph(r, c, chain, 'float32', (b, x) => b.add(x, b.like(x, 1))));
    result['adds'] = { rows: r, cols: c, chain, ms, usPerKernel: ((ms - base) * 1000) / chain };
    say(JSON.stringify(result['adds']));
  } catch (e) {
    result['error'] = String(e).slice(0, 500);
  } finally {
    await engine.close();
  }
  const spec = { gemms, adds, device: env['KERNELS_TORCH_DEVICE'] ?? (provider === 'webgpu' ? 'cuda' : 'cpu'), reps };
  const py = spawnSync(benchPython(), [fileURLToPath(new URL('./torch_gemm.py', import.meta.url)), JSON.stringify(spec)], { encoding: 'utf8', timeout: 300_000 });
  try {
    result['pytorch'] = JSON.parse(py.stdout.trim().split('\n').at(-1) ?? '');
  } catch {
    result['pytorch'] = { error: (py.stderr || String(py.error ?? py.status)).slice(-500) };
  }
  writeFileSync(OUT, JSON.stringify(result, null, 2) + '\n');
  say(`wrote ${OUT}`);
}

await main();
