/**
 * The decode graph's sampling tail (device-sampling.ts) draws what the host sampler draws: given
 * the same uniform, the same token as `sampleToken` on the masked logits, and its log-prob to
 * float32 accuracy; masked ids (weight 0) are never drawn, also at u = 0 and u → 1 where the
 * running sums meet the edges; the last block's padding is never drawn.
 */
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { Graph } from '../compiler/ir.ts';
import { emitOnnx } from '../compiler/onnx-emit.ts';
import { Engine } from '../runtime/engine.ts';
import { Rng, maskLogits, sampleToken } from '../runtime/sampler.ts';
import { f32 } from '../runtime/tensor.ts';
import { SAMPLE_INPUTS, SAMPLE_OUTPUTS } from '../runtime/decode-inputs.ts';
import { sampleOnDevice } from './device-sampling.ts';

let engine: Engine;
before(async () => {
  engine = await Engine.start({ threads: 1, log: () => {} });
});
after(async () => {
  await engine.close();
});

const V = 1000;
const BLOCK = 64; // 16 blocks, the last padded by 24 ids
const created = new Set<string>();

async function deviceDraw(logits: Float32Array, u: readonly number[], temperature: number, keep: Float32Array): Promise<{ token: number[]; logprob: Float32Array }> {
  const name = 'sample';
  if (!created.has(name)) {
    const b = new Graph();
    const x = b.input('logits', 'float32', ['B', V]);
    const { token, logprob } = sampleOnDevice(b, x, V, BLOCK);
    await engine.createSession(name, emitOnnx([[SAMPLE_OUTPUTS.token, token], [SAMPLE_OUTPUTS.logprob, logprob]], { name }));
    created.add(name);
  }
  const B = u.length;
  const out = await engine.run(
    name,
    { logits: f32([B, V], logits), [SAMPLE_INPUTS.uniform]: f32([B], u), [SAMPLE_INPUTS.inverseTemperature]: f32([1], [1 / temperature]), [SAMPLE_INPUTS.keep]: f32([V], keep) },
    { [SAMPLE_OUTPUTS.token]: 'return', [SAMPLE_OUTPUTS.logprob]: 'return' },
  );
  return { token: Array.from(out[SAMPLE_OUTPUTS.token]!.data as Float32Array), logprob: out[SAMPLE_OUTPUTS.logprob]!.data as Float32Array };
}

function hostDraw(logits: Float32Array, row: number, seed: number, temperature: number, masked: number[]): { token: number; logprob: number } {
  const copy = logits.slice(row * V, (row + 1) * V);
  maskLogits(copy, 0, masked);
  return sampleToken(copy, 0, V, { temperature, topP: 1, topK: 0 }, new Rng(seed), new Float64Array(2 * V), new Int32Array(V));
}

function randomLogits(B: number, seed: number, spread: number): Float32Array {
  const r = new Rng(seed);
  return Float32Array.from({ length: B * V }, () => (r.next() - 0.5) * spread + (r.next() < 0.01 ? 8 : 0));
}

test('the same uniform draws the same token as the host sampler, with its log-prob', async () => {
  const B = 64;
  const masked = [0, 1, 2, 500, 999];
  const keep = new Float32Array(V).fill(1);
  for (const m of masked) keep[m] = 0;
  for (const [temperature, spread] of [[1, 6], [0.7, 12], [1.5, 2]] as const) {
    const logits = randomLogits(B, 17 + spread, spread);
    const seeds = Array.from({ length: B }, (_, i) => 1000 * spread + i);
    const u = seeds.map((s) => new Rng(s).next());
    const dev = await deviceDraw(logits, u, temperature, keep);
    for (let row = 0; row < B; row++) {
      const host = hostDraw(logits, row, seeds[row]!, temperature, masked);
      assert.equal(dev.token[row], host.token, `T ${temperature} row ${row} (u ${u[row]})`);
      assert.ok(Math.abs(dev.logprob[row]! - host.logprob) <= 2e-5 * Math.max(1, Math.abs(host.logprob)), `T ${temperature} row ${row}: log-prob ${dev.logprob[row]} vs host ${host.logprob}`);
    }
  }
});

test('edges: u = 0 draws the first kept id, u just below 1 the last; masked and padded ids never', async () => {
  const flat = new Float32Array(5 * V); // uniform distribution
  const keep = new Float32Array(V).fill(1);
  for (let i = 0; i < 70; i++) keep[i] = 0; // the whole first block and part of the second
  for (let i = 990; i < V; i++) keep[i] = 0; // the tail of the padded last block
  const below1 = Math.fround(1 - 2 ** -24);
  // Rounding can leave u·total at the total itself: u = 1 stands in for that.
  const dev = await deviceDraw(flat, [0, below1, 0.5, 1e-9, 1], 1, keep);
  assert.equal(dev.token[0], 70, 'u = 0');
  assert.equal(dev.token[1], 989, 'u → 1');
  assert.equal(dev.token[4], 989, 'u·total at the total');
  assert.ok(dev.token.every((t) => keep[t] === 1), `drew a masked id: ${dev.token.join(', ')}`);
  assert.ok(Math.abs(dev.logprob[2]! + Math.log(920)) < 1e-5, `uniform over 920 kept ids: log-prob ${dev.logprob[2]}`);
});
