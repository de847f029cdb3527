/**
 * Every gradient rule against central finite differences, in float64 on ONNX Runtime
 * (optimisation level 'basic': higher levels fold constants into float32 attributes, see the probe).
 * Each case builds f = Σ op(inputs) ⊙ R for a fixed random R, so every output element matters.
 * The list of cases must cover every differentiable op of the table: adding an op without a case
 * fails the coverage test.
 */
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { Engine } from '../runtime/engine.ts';
import { f64, type HostTensor } from '../runtime/tensor.ts';
import { gradients } from './autodiff.ts';
import { inferenceOnlyOps } from './contrib-ops.ts';
import { logSoftmaxReference, rmsNormReference, softmaxReference } from './composite.ts';
import { Graph, type Node } from './ir.ts';
import { emitOnnx } from './onnx-emit.ts';
import { opDefs, type Op } from './ops.ts';

let seed = 12345;
function rand(): number {
  seed = (Math.imul(seed, 1103515245) + 12345) >>> 0;
  return seed / 4294967296;
}
const values = (n: number, lo = -1, hi = 1) => Array.from({ length: n }, () => lo + (hi - lo) * rand());

interface Case {
  readonly name: string;
  readonly ops: readonly Op[];
  /** Differentiable inputs: shape and value range. */
  readonly inputs: ReadonlyArray<{ shape: number[]; lo?: number; hi?: number }>;
  readonly build: (b: Graph, xs: Node[]) => Node;
  readonly tol?: number;
  /** Finite-difference step (larger where float32 rounding sits inside the function). */
  readonly h?: number;
}

const cases: Case[] = [
  { name: 'add (broadcast)', ops: ['add'], inputs: [{ shape: [2, 3] }, { shape: [3] }], build: (b, [x, y]) => b.add(x!, y!) },
  { name: 'sub (broadcast)', ops: ['sub'], inputs: [{ shape: [2, 1] }, { shape: [2, 3] }], build: (b, [x, y]) => b.sub(x!, y!) },
  { name: 'mul (broadcast)', ops: ['mul'], inputs: [{ shape: [2, 3] }, { shape: [1, 3] }], build: (b, [x, y]) => b.mul(x!, y!) },
  { name: 'div', ops: ['div'], inputs: [{ shape: [2, 3] }, { shape: [3], lo: 0.5, hi: 2 }], build: (b, [x, y]) => b.div(x!, y!) },
  { name: 'min', ops: ['min'], inputs: [{ shape: [2, 3] }, { shape: [2, 3] }], build: (b, [x, y]) => b.min(x!, y!) },
  { name: 'max', ops: ['max'], inputs: [{ shape: [2, 3] }, { shape: [3] }], build: (b, [x, y]) => b.max(x!, y!) },
  { name: 'neg', ops: ['neg'], inputs: [{ shape: [4] }], build: (b, [x]) => b.neg(x!) },
  { name: 'exp', ops: ['exp'], inputs: [{ shape: [4] }], build: (b, [x]) => b.exp(x!) },
  { name: 'log', ops: ['log'], inputs: [{ shape: [4], lo: 0.5, hi: 2 }], build: (b, [x]) => b.log(x!) },
  { name: 'sqrt', ops: ['sqrt'], inputs: [{ shape: [4], lo: 0.5, hi: 2 }], build: (b, [x]) => b.sqrt(x!) },
  { name: 'reciprocal', ops: ['reciprocal'], inputs: [{ shape: [4], lo: 0.5, hi: 2 }], build: (b, [x]) => b.reciprocal(x!) },
  { name: 'sigmoid', ops: ['sigmoid'], inputs: [{ shape: [4] }], build: (b, [x]) => b.sigmoid(x!) },
  { name: 'tanh', ops: ['tanh'], inputs: [{ shape: [4] }], build: (b, [x]) => b.tanh(x!) },
  { name: 'cos', ops: ['cos'], inputs: [{ shape: [4] }], build: (b, [x]) => b.cos(x!) },
  { name: 'sin', ops: ['sin'], inputs: [{ shape: [4] }], build: (b, [x]) => b.sin(x!) },
  { name: 'matmul rows × weight', ops: ['matmul'], inputs: [{ shape: [2, 3, 4] }, { shape: [4, 5] }], build: (b, [x, y]) => b.matmul(x!, y!) },
  { name: 'matmul batched', ops: ['matmul'], inputs: [{ shape: [2, 3, 4] }, { shape: [2, 4, 2] }], build: (b, [x, y]) => b.matmul(x!, y!) },
  { name: 'matmul broadcast batch (GQA)', ops: ['matmul'], inputs: [{ shape: [1, 2, 2, 3, 4] }, { shape: [1, 2, 1, 4, 3] }], build: (b, [x, y]) => b.matmul(x!, y!) },
  { name: 'transpose', ops: ['transpose'], inputs: [{ shape: [2, 3, 4] }], build: (b, [x]) => b.transpose(x!, [2, 0, 1]) },
  { name: 'reshape', ops: ['reshape'], inputs: [{ shape: [2, 3, 4] }], build: (b, [x]) => b.reshape(x!, [6, 4]) },
  { name: 'reshapeLike', ops: ['reshapeLike'], inputs: [{ shape: [6, 4] }, { shape: [2, 3, 4] }], build: (b, [x, y]) => b.add(b.reshapeLike(x!, y!), y!) },
  { name: 'expandLike', ops: ['expandLike'], inputs: [{ shape: [3, 1] }, { shape: [2, 3, 4] }], build: (b, [x, y]) => b.mul(b.expandLike(x!, y!), y!) },
  { name: 'unsqueeze', ops: ['unsqueeze'], inputs: [{ shape: [2, 3] }], build: (b, [x]) => b.unsqueeze(x!, [1]) },
  { name: 'squeeze', ops: ['squeeze'], inputs: [{ shape: [2, 1, 3] }], build: (b, [x]) => b.squeeze(x!, [1]) },
  { name: 'reduceSum', ops: ['reduceSum'], inputs: [{ shape: [2, 3, 4] }], build: (b, [x]) => b.reduceSum(x!, [1]) },
  { name: 'reduceSum keepdims', ops: ['reduceSum'], inputs: [{ shape: [2, 3, 4] }], build: (b, [x]) => b.reduceSum(x!, [0, 2], true) },
  { name: 'reduceMax', ops: ['reduceMax'], inputs: [{ shape: [2, 5] }], build: (b, [x]) => b.reduceMax(x!, [1]) },
  { name: 'rmsNorm', ops: ['rmsNorm'], inputs: [{ shape: [2, 3, 4] }, { shape: [4] }], build: (b, [x, w]) => b.rmsNorm(x!, w!, 1e-3) },
  { name: 'softmax', ops: ['softmax'], inputs: [{ shape: [2, 5] }], build: (b, [x]) => b.softmax(x!, -1) },
  { name: 'softmax axis 0', ops: ['softmax'], inputs: [{ shape: [3, 2] }], build: (b, [x]) => b.softmax(x!, 0) },
  { name: 'logSoftmax', ops: ['logSoftmax'], inputs: [{ shape: [2, 5] }], build: (b, [x]) => b.logSoftmax(x!, -1) },
  { name: 'concat', ops: ['concat'], inputs: [{ shape: [2, 3] }, { shape: [2, 2] }], build: (b, [x, y]) => b.concat([x!, y!], 1) },
  { name: 'slice', ops: ['slice'], inputs: [{ shape: [2, 6] }], build: (b, [x]) => b.slice(x!, 1, 2, 5) },
  { name: 'pad', ops: ['pad'], inputs: [{ shape: [2, 3] }], build: (b, [x]) => b.pad(x!, 0, 1, 2) },
  {
    name: 'gather (embedding, repeated ids)',
    ops: ['gather'],
    inputs: [{ shape: [5, 3] }],
    build: (b, [x]) => b.gather(x!, b.constant([0, 3, 3, 1, 4, 0, 3, 2], [2, 4], 'int64'), 0),
  },
  {
    name: 'gatherElements (one per row: a target log-prob)',
    ops: ['gatherElements'],
    inputs: [{ shape: [3, 5] }],
    build: (b, [x]) => b.gatherElements(x!, b.constant([1, 4, 0], [3, 1], 'int64'), 1),
  },
  {
    name: 'gatherElements (repeated indices)',
    ops: ['gatherElements'],
    inputs: [{ shape: [2, 4] }],
    build: (b, [x]) => b.gatherElements(x!, b.constant([0, 3, 3, 1, 1, 2], [2, 3], 'int64'), 1),
  },
  {
    name: 'scatterAdd (repeated indices, axis 0)',
    ops: ['scatterAdd'],
    inputs: [{ shape: [5, 3] }, { shape: [4, 3] }],
    build: (b, [x, u]) => b.scatterAdd(x!, b.constant([0, 0, 0, 3, 3, 3, 3, 1, 3, 0, 4, 0], [4, 3], 'int64'), u!, 0),
  },
  {
    name: 'where',
    ops: ['where'],
    inputs: [{ shape: [2, 3] }, { shape: [3] }],
    build: (b, [x, y]) => b.where(b.greater(x!, b.like(x!, 0)), b.mul(x!, x!), y!),
  },
  {
    name: 'cast (float64 → float32 → float64)',
    ops: ['cast'],
    inputs: [{ shape: [4] }],
    build: (b, [x]) => b.mul(b.cast(b.cast(x!, 'float32'), 'float64'), x!),
    tol: 1e-3,
    h: 1e-2,
  },
];

/** Ops with no gradient to check: leaves, comparisons, boolean logic, gradient barriers. */
// Contrib ops are checked against their plain equivalents in server/models/decode-graph.ort.test.ts.
const nonDifferentiable: readonly Op[] = ['input', 'constant', 'equal', 'less', 'greater', 'and', 'stopGradient', ...inferenceOnlyOps];

test('every differentiable op has a finite-difference case', () => {
  const covered = new Set<Op>([...cases.flatMap((c) => c.ops), ...nonDifferentiable]);
  const missing = (Object.keys(opDefs) as Op[]).filter((op) => !covered.has(op));
  assert.deepEqual(missing, [], `ops without a gradient check: ${missing.join(', ')}`);
});

let engine: Engine;
before(async () => {
  engine = await Engine.start({ log: () => {} });
});
after(async () => {
  await engine.close();
});

for (const c of cases) {
  test(`gradient of ${c.name} matches finite differences`, async () => {
    const b = new Graph();
    const xs = c.inputs.map((inp, i) => b.input(`x${i}`, 'float64', inp.shape));
    const y = c.build(b, xs);
    const r = b.constant(values(y.shape.reduce<number>((a, d) => a * (d as number), 1)), y.shape as number[], 'float64');
    const f = b.reduceSum(b.mul(y, r), y.shape.map((_, i) => i));
    const grads = gradients(b, f, xs);
    const session = `fd-${c.name}`;
    await engine.createSession(session, emitOnnx([['f', f], ...grads.map((g, i) => [`g${i}`, g] as const)], { name: 'fd' }), { optimization: 'basic' });
    const data = c.inputs.map((inp) => values(inp.shape.reduce((a, d) => a * d, 1), inp.lo ?? -1, inp.hi ?? 1));
    const feeds = (d: number[][]): Record<string, HostTensor> => Object.fromEntries(d.map((v, i) => [`x${i}`, f64(c.inputs[i]!.shape, v)]));
    const fetchAll = Object.fromEntries([['f', 'return' as const], ...grads.map((_, i) => [`g${i}`, 'return' as const])]);
    const out = await engine.run(session, feeds(data), fetchAll);
    const h = c.h ?? 1e-6;
    for (let i = 0; i < data.length; i++) {
      const analytic = out[`g${i}`]!.data as Float64Array;
      let worst = 0;
      let scale = 1e-8;
      for (let k = 0; k < data[i]!.length; k++) {
        const plus = data.map((v) => [...v]);
        const minus = data.map((v) => [...v]);
        plus[i]![k]! += h;
        minus[i]![k]! -= h;
        const fp = ((await engine.run(session, feeds(plus), { f: 'return' }))['f']!.data as Float64Array)[0]!;
        const fm = ((await engine.run(session, feeds(minus), { f: 'return' }))['f']!.data as Float64Array)[0]!;
        const numeric = (fp - fm) / (2 * h);
        worst = Math.max(worst, Math.abs(numeric - analytic[k]!));
        scale = Math.max(scale, Math.abs(numeric));
      }
      const rel = worst / scale;
      assert.ok(rel < (c.tol ?? 1e-6), `${c.name}: input ${i} relative error ${rel.toExponential(2)}`);
    }
  });
}

test('stopGradient blocks the gradient: d/dx [x · stop(x)] = stop(x)', async () => {
  const b = new Graph();
  const x = b.input('x', 'float64', [3]);
  const f = b.reduceSum(b.mul(x, b.stopGradient(x)), [0]);
  const [g] = gradients(b, f, [x]);
  await engine.createSession('stop', emitOnnx([['g', g!]], { name: 'stop' }));
  const out = await engine.run('stop', { x: f64([3], [1, -2, 3]) }, { g: 'return' });
  assert.deepEqual(Array.from(out['g']!.data as Float64Array), [1, -2, 3]);
});

test('the softmax and log-softmax primitives equal their exp/reduce definitions, values and gradients', async () => {
  const b = new Graph();
  const x = b.input('x', 'float64', [3, 5]);
  const r = b.constant(values(15), [3, 5], 'float64');
  const weigh = (y: Node) => b.reduceSum(b.mul(y, r), [0, 1]);
  const pairs = [
    [b.softmax(x, -1), softmaxReference(b, x, -1)],
    [b.logSoftmax(x, -1), logSoftmaxReference(b, x, -1)],
  ] as const;
  const outputs: Array<[string, Node]> = [];
  pairs.forEach(([fused, ref], i) => {
    outputs.push([`fused${i}`, fused], [`ref${i}`, ref]);
    outputs.push([`gfused${i}`, gradients(b, weigh(fused), [x])[0]!], [`gref${i}`, gradients(b, weigh(ref), [x])[0]!]);
  });
  await engine.createSession('softmax-ref', emitOnnx(outputs, { name: 'softmax-ref' }), { optimization: 'basic' });
  const out = await engine.run('softmax-ref', { x: f64([3, 5], values(15, -3, 3)) }, Object.fromEntries(outputs.map(([n]) => [n, 'return' as const])));
  for (const kind of ['', 'g']) {
    for (const i of [0, 1]) {
      const a = out[`${kind}fused${i}`]!.data as Float64Array;
      const c = out[`${kind}ref${i}`]!.data as Float64Array;
      a.forEach((v, k) => assert.ok(Math.abs(v - c[k]!) < 1e-12, `${kind}${i === 0 ? 'softmax' : 'logSoftmax'}[${k}]: ${v} vs ${c[k]}`));
    }
  }
});

test('the rmsNorm primitive (fused in ONNX Runtime) equals its definition from primitives, values and gradients', async () => {
  const b = new Graph();
  const x = b.input('x', 'float64', [3, 4]);
  const w = b.input('w', 'float64', [4]);
  const r = b.constant(values(12), [3, 4], 'float64');
  const weigh = (y: Node) => b.reduceSum(b.mul(y, r), [0, 1]);
  const fused = b.rmsNorm(x, w, 1e-5);
  const ref = rmsNormReference(b, x, w, 1e-5);
  const [gfx, gfw] = gradients(b, weigh(fused), [x, w]);
  const [grx, grw] = gradients(b, weigh(ref), [x, w]);
  const outputs: Array<[string, Node]> = [['fused', fused], ['ref', ref], ['gfx', gfx!], ['grx', grx!], ['gfw', gfw!], ['grw', grw!]];
  await engine.createSession('rmsnorm-ref', emitOnnx(outputs, { name: 'rmsnorm-ref' }), { optimization: 'basic' });
  const out = await engine.run('rmsnorm-ref', { x: f64([3, 4], values(12, -3, 3)), w: f64([4], values(4, 0.5, 1.5)) }, Object.fromEntries(outputs.map(([n]) => [n, 'return' as const])));
  for (const [a, c] of [['fused', 'ref'], ['gfx', 'grx'], ['gfw', 'grw']] as const) {
    const p = out[a]!.data as Float64Array;
    const q = out[c]!.data as Float64Array;
    p.forEach((v, k) => assert.ok(Math.abs(v - q[k]!) < 1e-10, `${a}[${k}]: ${v} vs ${q[k]}`));
  }
});
