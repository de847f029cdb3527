/**
 * `emitOnnx(…, { transposedMatMul: 'gemm' })`, the WebGPU lowering of products by a transposed
 * weight: `matmul(x, transpose(W))` becomes Gemm(x, W, transB = 1) on x viewed as 2-D, the
 * Transpose is left out when nothing else reads it, and the graph computes what the Transpose +
 * MatMul graph computes: forward (rank 2 and 3, symbolic leading dims, LoRA) and gradients.
 */
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { Engine } from '../runtime/engine.ts';
import { f32 } from '../runtime/tensor.ts';
import { gradients } from './autodiff.ts';
import { linear } from './composite.ts';
import { Graph, type Node } from './ir.ts';
import { emitOnnx } from './onnx-emit.ts';

let engine: Engine;
before(async () => {
  engine = await Engine.start({ threads: 1, log: () => {} });
});
after(async () => {
  await engine.close();
});

const C = 6;
const OUT = 5;
const R = 2;
const values = (n: number, k: number) => Array.from({ length: n }, (_, i) => Math.sin(i * k + 0.3) * 1.5);
/** How many nodes of `op` the model holds (node op types are written as `n.<i>.<op>` names). */
const count = (bytes: Uint8Array, op: string) => Buffer.from(bytes).toString('latin1').split(`.${op}`).length - 1;

type Mode = 'transpose' | 'gemm';

/** y = linear(x, W, bias, LoRA) for x [B, T, C] (B and T symbolic), and optionally x W's transpose too. */
function linearGraph(mode: Mode, opts: { rank2?: boolean; alsoTranspose?: boolean } = {}): Uint8Array {
  const b = new Graph();
  const x = b.input('x', 'float32', opts.rank2 ? ['N', C] : ['B', 'T', C]);
  const w = b.input('w', 'float32', [OUT, C]);
  const bias = b.input('bias', 'float32', [OUT]);
  const a = b.input('a', 'float32', [R, C]);
  const lb = b.input('lb', 'float32', [OUT, R]);
  const outputs: Array<[string, Node]> = [['y', linear(b, x, w, bias, { a, b: lb, scale: 2 })]];
  if (opts.alsoTranspose) outputs.push(['wt', b.transpose(w, [1, 0])]);
  return emitOnnx(outputs, { name: 'linear', transposedMatMul: mode });
}

async function run(name: string, bytes: Uint8Array, feeds: Parameters<Engine['run']>[1], outs: string[]): Promise<Float32Array[]> {
  await engine.createSession(name, bytes, { optimization: 'basic' });
  const r = await engine.run(name, feeds, Object.fromEntries(outs.map((o) => [o, 'return' as const])));
  return outs.map((o) => r[o]!.data as Float32Array);
}

const weights = () => ({ w: f32([OUT, C], values(OUT * C, 0.7)), bias: f32([OUT], values(OUT, 1.3)), a: f32([R, C], values(R * C, 2.1)), lb: f32([OUT, R], values(OUT * R, 0.4)) });

function close(actual: Float32Array, expected: Float32Array, what: string): void {
  assert.equal(actual.length, expected.length, `${what}: length`);
  for (let i = 0; i < expected.length; i++) assert.ok(Math.abs(actual[i]! - expected[i]!) <= 1e-5 * (1 + Math.abs(expected[i]!)), `${what}[${i}]: ${actual[i]} vs ${expected[i]}`);
}

test('a LoRA linear on [B, T, C] as Gemms: no Transpose left, the same values', async () => {
  const plain = linearGraph('transpose');
  const gemm = linearGraph('gemm');
  assert.equal(count(plain, 'Transpose'), 3, 'the reference graph transposes W, A and B');
  assert.equal(count(gemm, 'Transpose'), 0, 'the gemm lowering left a Transpose');
  assert.equal(count(gemm, 'Gemm'), 3);
  for (const [B, T] of [[2, 3], [1, 1], [3, 4]] as const) {
    const feeds = () => ({ x: f32([B, T, C], values(B * T * C, 0.37)), ...weights() });
    const [want] = await run(`plain-${B}x${T}`, plain, feeds(), ['y']);
    const [got] = await run(`gemm-${B}x${T}`, gemm, feeds(), ['y']);
    close(got!, want!, `y at B=${B} T=${T}`);
  }
});

test('a rank-2 input needs no Reshape, and a Transpose another output reads is kept', async () => {
  const gemm = linearGraph('gemm', { rank2: true });
  assert.equal(count(gemm, 'Reshape'), 0);
  const feeds = () => ({ x: f32([4, C], values(4 * C, 0.51)), ...weights() });
  const [want] = await run('plain-r2', linearGraph('transpose', { rank2: true }), feeds(), ['y']);
  const [got] = await run('gemm-r2', gemm, feeds(), ['y']);
  close(got!, want!, 'rank-2 y');

  const shared = linearGraph('gemm', { alsoTranspose: true });
  assert.equal(count(shared, 'Transpose'), 1, "W's Transpose is an output too, so it stays");
  const f3 = () => ({ x: f32([2, 2, C], values(4 * C, 0.29)), ...weights() });
  const [y, wt] = await run('gemm-shared', shared, f3(), ['y', 'wt']);
  const [y0, wt0] = await run('plain-shared', linearGraph('transpose', { alsoTranspose: true }), f3(), ['y', 'wt']);
  close(y!, y0!, 'y');
  assert.deepEqual([...wt!], [...wt0!]);
});

test('gradients through the Gemm lowering equal those through Transpose + MatMul', async () => {
  const build = (mode: Mode) => {
    const b = new Graph();
    const x = b.input('x', 'float32', ['B', 'T', C]);
    const w = b.input('w', 'float32', [OUT, C]);
    const bias = b.input('bias', 'float32', [OUT]);
    const a = b.input('a', 'float32', [R, C]);
    const lb = b.input('lb', 'float32', [OUT, R]);
    const y = linear(b, x, w, bias, { a, b: lb, scale: 2 });
    const loss = b.reduceSum(b.mul(y, y), [0, 1, 2]);
    const [gx, ga, gb] = gradients(b, loss, [x, a, lb]);
    return emitOnnx([['gx', gx!], ['ga', ga!], ['gb', gb!]], { name: 'grad', transposedMatMul: mode });
  };
  const gemm = build('gemm');
  assert.ok(count(gemm, 'Gemm') > 0);
  assert.ok(count(gemm, 'Transpose') < count(build('transpose'), 'Transpose'));
  const feeds = () => ({ x: f32([2, 3, C], values(6 * C, 0.61)), ...weights() });
  const want = await run('grad-plain', build('transpose'), feeds(), ['gx', 'ga', 'gb']);
  const got = await run('grad-gemm', gemm, feeds(), ['gx', 'ga', 'gb']);
  ['gx', 'ga', 'gb'].forEach((n, i) => close(got[i]!, want[i]!, n));
});
