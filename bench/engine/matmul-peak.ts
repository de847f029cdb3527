/** MatMul throughput of ONNX Runtime on this machine: the ceiling the engine's GFLOP/s are read against. */
import { Graph } from '../../server/compiler/ir.ts';
import { emitOnnx } from '../../server/compiler/onnx-emit.ts';
import type { Engine } from '../../server/runtime/engine.ts';
import { f32 } from '../../server/runtime/tensor.ts';

export async function measureMatmulPeak(engine: Engine, n: number, reps: number): Promise<number> {
  const session = `matmul-peak-${n}`;
  const g = new Graph();
  const a = g.input('a', 'float32', [n, n]);
  const b = g.input('b', 'float32', [n, n]);
  await engine.createSession(session, emitOnnx([['c', g.matmul(a, b)]], { name: 'matmul-peak' }));
  await engine.upload(`${session}:a`, f32([n, n], Float32Array.from({ length: n * n }, (_, i) => (i % 7) / 7)));
  await engine.upload(`${session}:b`, f32([n, n], Float32Array.from({ length: n * n }, (_, i) => (i % 5) / 5)));
  const feeds = { a: { resident: `${session}:a` }, b: { resident: `${session}:b` } };
  const fetch = { c: { into: `${session}:c`, dtype: 'float32' as const, dims: [n, n] } };
  for (let i = 0; i < 3; i++) await engine.run(session, feeds, fetch);
  const t0 = performance.now();
  for (let i = 0; i < reps; i++) await engine.run(session, feeds, fetch);
  const sec = (performance.now() - t0) / 1000;
  return (2 * n * n * n * reps) / sec / 1e9;
}
