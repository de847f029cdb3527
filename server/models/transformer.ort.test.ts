/**
 * The compiled transformer against PyTorch: logits, per-token log-probs, PPO and CE losses with
 * their diagnostics, and gradients, on fixtures made by `reference/make_fixtures.py` (float64
 * PyTorch, stored as float32). Our graphs run in float32 on ONNX Runtime, so tolerances sit a
 * little above the float32 deviation PyTorch itself shows on the same numbers.
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { Graph } from '../compiler/ir.ts';
import { emitOnnx } from '../compiler/onnx-emit.ts';
import { Engine } from '../runtime/engine.ts';
import type { HostTensor } from '../runtime/tensor.ts';
import { buildTrainStep } from './artifacts.ts';
import { declareModelInputs, forward } from './transformer-graph.ts';
import { fixtureFeeds, loadTorchFixture, relErr, type TorchFixture } from './torch-fixture.ts';

let engine: Engine;
before(async () => {
  engine = await Engine.start({ log: () => {} });
});
after(async () => {
  await engine.close();
});

for (const name of ['tiny-full-ppo', 'tiny-lora-ppo', 'tiny-full-ce']) {
  describe(`PyTorch fixture ${name}`, () => {
    let fx: TorchFixture;
    before(async () => {
      fx = await loadTorchFixture(name);
    });

    test('logits match at real positions', async () => {
      const b = new Graph();
      const m = declareModelInputs(b, fx.config, 'float32', fx.lora);
      const ids = b.input('input_ids', 'int64', ['B', 'T']);
      const positions = b.input('position_ids', 'int64', ['B', 'T']);
      const bias = b.input('attention_bias', 'float32', ['B', 'T', 'T']);
      const { logits } = forward(b, fx.config, m, { ids, positions, bias });
      await engine.createSession(`logits-${name}`, emitOnnx([['logits', logits]], { name: 'logits' }));
      const all = fixtureFeeds(fx);
      const feeds: Record<string, HostTensor> = {};
      for (const k of [...m.weights.keys(), ...(m.lora?.keys() ?? []), 'input_ids', 'position_ids', 'attention_bias']) feeds[k] = all[k]!;
      const out = await engine.run(`logits-${name}`, feeds, { logits: 'return' });
      const mask = fx.t('input.attention_mask').data;
      const V = fx.config.vocabSize;
      const err = relErr(out['logits']!.data as Float32Array, fx.t('expect.logits').data, (i) => mask[Math.floor(i / V)] === 1);
      assert.ok(err < 1e-5, `logits relative error ${err}`);
    });

    test('loss, log-probs, diagnostics and gradients match', async () => {
      const art = buildTrainStep(fx.config, {
        loss: fx.meta.loss,
        trainable: fx.lora ? 'lora' : 'full',
        lora: fx.lora,
        kl: fx.meta.loss === 'ppo',
        entropy: fx.meta.loss === 'ppo',
        perSequenceMask: true,
      });
      await engine.createSession(`train-${name}`, art.bytes);
      const fetches = Object.fromEntries(art.outputs.map((o) => [o, 'return' as const]));
      const out = await engine.run(`train-${name}`, fixtureFeeds(fx), fetches);
      const scalar = (k: string) => (out[k]!.data as Float32Array)[0]!;
      const expectScalar = (k: string) => fx.t(`expect.${k}`).data[0]!;
      assert.ok(Math.abs(scalar('loss') - expectScalar('loss')) <= 1e-5 * Math.max(1, Math.abs(expectScalar('loss'))), `loss ${scalar('loss')} vs ${expectScalar('loss')}`);
      const mask = fx.t('input.attention_mask').data;
      const lerr = relErr(out['logp']!.data as Float32Array, fx.t('expect.logp').data, (i) => mask[i] === 1);
      assert.ok(lerr < 1e-5, `logp relative error ${lerr}`);
      if (fx.meta.loss === 'ppo') {
        for (const k of ['clip_frac', 'approx_kl', 'entropy']) {
          assert.ok(Math.abs(scalar(k) - expectScalar(k)) <= 1e-5 * Math.max(1, Math.abs(expectScalar(k))), `${k} ${scalar(k)} vs ${expectScalar(k)}`);
        }
      }
      const gradNames = fx.names('grad.');
      assert.deepEqual([...art.trainable].sort(), [...gradNames].sort(), 'trainable tensors');
      for (const n of gradNames) {
        const err = relErr(out[`${n}_grad`]!.data as Float32Array, fx.t(`grad.${n}`).data);
        assert.ok(err < 2e-4, `gradient of ${n}: relative error ${err}`);
      }
    });
  });
}
