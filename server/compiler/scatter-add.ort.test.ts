/**
 * The row-gather gradient (embeddings, selected rows) is a ScatterElements(add). ScatterND(add)
 * gave wrong sums with 2 intra-op threads in ORT 1.30 (the project's feasibility probe, 2026-11-21), so this
 * checks, with 2 threads and heavily repeated ids, that the emitted gradient equals a serial
 * float32 sum in index order bit for bit, run after run — and that it never builds an [N, V]
 * one-hot (the graph has no Equal/OneHot and no tensor with the vocabulary as a dimension besides
 * the gradient itself).
 */
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { Engine } from '../runtime/engine.ts';
import { f32, i64 } from '../runtime/tensor.ts';
import { gradients } from './autodiff.ts';
import { Graph, topoSort } from './ir.ts';
import { emitOnnx } from './onnx-emit.ts';

let engine: Engine;
before(async () => {
  engine = await Engine.start({ threads: 2, log: () => {} });
});
after(async () => {
  await engine.close();
});

test('embedding gradient with 2 threads equals the serial float32 sum exactly, every run', async () => {
  const V = 1000;
  const C = 64;
  const N = 4096;
  const b = new Graph();
  const table = b.input('table', 'float32', [V, C]);
  const ids = b.input('ids', 'int64', ['B', 'T']);
  const up = b.input('up', 'float32', ['B', 'T', C]);
  // f = Σ gather(table, ids) ⊙ up, so d f / d table = Σ over occurrences of up's rows.
  const f = b.reduceSum(b.mul(b.gather(table, ids, 0), up), [0, 1, 2]);
  const [g] = gradients(b, f, [table]);
  const ops = new Set(topoSort([g!]).map((n) => n.op));
  assert.ok(!ops.has('equal') && !ops.has('matmul'), `the gradient uses ${[...ops].join(', ')}`);
  await engine.createSession('scatter', emitOnnx([['g', g!]], { name: 'scatter' }));

  let s = 99;
  const next = () => ((s = (Math.imul(s, 1103515245) + 12345) >>> 0), s);
  // 64 distinct ids over 4096 positions: every row is hit ~64 times.
  const idv = Array.from({ length: N }, () => (next() % 64) * 15);
  const upv = Float32Array.from({ length: N * C }, () => (next() / 4294967296) * 2 - 1);
  const want = new Float32Array(V * C);
  for (let i = 0; i < N; i++) for (let c = 0; c < C; c++) want[idv[i]! * C + c] = Math.fround(want[idv[i]! * C + c]! + upv[i * C + c]!);

  for (let run = 0; run < 5; run++) {
    const out = await engine.run('scatter', { table: f32([V, C]), ids: i64([64, 64], idv), up: f32([64, 64, C], upv) }, { g: 'return' });
    const got = out['g']!.data as Float32Array;
    let diffs = 0;
    for (let k = 0; k < got.length; k++) if (got[k] !== want[k]) diffs++;
    assert.equal(diffs, 0, `run ${run}: ${diffs} of ${got.length} gradient entries differ from the serial sum`);
  }
});

test('a gather of rows with a symbolic row count differentiates (selected positions of a batch)', async () => {
  const b = new Graph();
  const x = b.input('x', 'float32', ['B*T', 3]);
  const rows = b.input('rows', 'int64', ['N']);
  const w = b.input('w', 'float32', ['N', 3]);
  const f = b.reduceSum(b.mul(b.gather(x, rows, 0), w), [0, 1]);
  const [g] = gradients(b, f, [x]);
  await engine.createSession('rows', emitOnnx([['g', g!]], { name: 'rows' }));
  const out = await engine.run('rows', { x: f32([4, 3]), rows: i64([2], [3, 1]), w: f32([2, 3], [1, 2, 3, 4, 5, 6]) }, { g: 'return' });
  assert.deepEqual(Array.from(out['g']!.data as Float32Array), [0, 0, 0, 4, 5, 6, 0, 0, 0, 1, 2, 3]);
});
