/**
 * The compiled transformer against PyTorch: logits, per-token log-probs, PPO and CE losses with
 * their diagnostics, and gradients, on fixtures made by `reference/make_fixtures.py` (float64
 * PyTorch, stored as float32). Our graphs run in float32 on ONNX Runtime, so tolerances sit a
 * little above the float32 deviation PyTorch itself shows on the same numbers.
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { Graph } from '../compiler/ir.ts';
import { emitOnnx } from '../compiler/onnx-emit.ts';
import { Engine } from '../runtime/engine.ts';
import { f32, i64, type HostTensor } from '../runtime/tensor.ts';
import { buildTrainStep } from './artifacts.ts';
import { causalBias } from './attention-bias.ts';
import { parseModelConfig, type ModelConfig } from './model-config.ts';
import { readSafetensorsFile } from './safetensors.ts';
import { declareModelInputs, forward, type LoraSpec } from './transformer-graph.ts';
import { realRows } from './torch-fixture.ts';

interface Fixture {
  config: ModelConfig;
  loss: 'ppo' | 'ce';
  lora: LoraSpec | null;
  scalars: { temperature: number; clipEps?: number; klCoef?: number; entCoef?: number; tokenWeight: number };
  B: number;
  T: number;
  t: (name: string) => { shape: number[]; data: Float32Array };
  names: (prefix: string) => string[];
}

async function loadFixture(name: string): Promise<Fixture> {
  const path = fileURLToPath(new URL(`./fixtures/${name}.safetensors`, import.meta.url));
  const { tensors, metadata } = await readSafetensorsFile(path);
  const meta = JSON.parse(metadata['case'] ?? 'null') as {
    modelConfig: unknown;
    loss: 'ppo' | 'ce';
    lora: { rank: number; alpha: number; targets: LoraSpec['targets'] } | null;
    scalars: Fixture['scalars'];
    batch: number;
    seqLen: number;
  };
  return {
    config: parseModelConfig(meta.modelConfig),
    loss: meta.loss,
    lora: meta.lora ? { rank: meta.lora.rank, alpha: meta.lora.alpha, targets: meta.lora.targets } : null,
    scalars: meta.scalars,
    B: meta.batch,
    T: meta.seqLen,
    t: (n) => {
      const x = tensors.get(n);
      if (!x) throw new Error(`fixture ${name} has no tensor '${n}'`);
      return x;
    },
    names: (prefix) => [...tensors.keys()].filter((k) => k.startsWith(prefix)).map((k) => k.slice(prefix.length)),
  };
}

/** max |a−b| / max(|b|) over the entries where keep(i). */
function relErr(a: ArrayLike<number>, b: ArrayLike<number>, keep: (i: number) => boolean = () => true): number {
  let num = 0;
  let den = 0;
  for (let i = 0; i < b.length; i++) {
    if (!keep(i)) continue;
    num = Math.max(num, Math.abs(a[i]! - b[i]!));
    den = Math.max(den, Math.abs(b[i]!));
  }
  return num / Math.max(den, 1e-12);
}

function feedsOf(fx: Fixture): Record<string, HostTensor> {
  const { B, T } = fx;
  const mask = fx.t('input.attention_mask').data;
  const feeds: Record<string, HostTensor> = {
    input_ids: i64([B, T], fx.t('input.input_ids').data),
    position_ids: i64([B, T], fx.t('input.position_ids').data),
    targets: i64([B, T], fx.t('input.targets').data),
    attention_bias: f32([B, T, T], causalBias(mask, B, T)),
    loss_mask: f32([B, T], fx.t('input.loss_mask').data),
    // Score every real position (the graphs compute logits only at loss_rows).
    loss_rows: i64([realRows(mask).length], realRows(mask)),
    token_weight: f32([], [fx.scalars.tokenWeight]),
  };
  for (const name of fx.names('param.')) feeds[name] = f32(fx.t(`param.${name}`).shape, fx.t(`param.${name}`).data);
  if (fx.loss === 'ppo') {
    feeds['temperature'] = f32([], [fx.scalars.temperature]);
    feeds['advantages'] = f32([B, T], fx.t('input.advantages').data);
    feeds['old_logp'] = f32([B, T], fx.t('input.old_logp').data);
    feeds['ref_logp'] = f32([B, T], fx.t('input.ref_logp').data);
    feeds['clip_eps'] = f32([], [fx.scalars.clipEps!]);
    feeds['kl_coef'] = f32([], [fx.scalars.klCoef!]);
    feeds['ent_coef'] = f32([], [fx.scalars.entCoef!]);
  }
  return feeds;
}

let engine: Engine;
before(async () => {
  engine = await Engine.start({ log: () => {} });
});
after(async () => {
  await engine.close();
});

for (const name of ['tiny-full-ppo', 'tiny-lora-ppo', 'tiny-full-ce']) {
  describe(`PyTorch fixture ${name}`, () => {
    let fx: Fixture;
    before(async () => {
      fx = await loadFixture(name);
    });

    test('logits match at real positions', async () => {
      const b = new Graph();
      const m = declareModelInputs(b, fx.config, 'float32', fx.lora);
      const ids = b.input('input_ids', 'int64', ['B', 'T']);
      const positions = b.input('position_ids', 'int64', ['B', 'T']);
      const bias = b.input('attention_bias', 'float32', ['B', 'T', 'T']);
      const { logits } = forward(b, fx.config, m, { ids, positions, bias });
      await engine.createSession(`logits-${name}`, emitOnnx([['logits', logits]], { name: 'logits' }));
      const all = feedsOf(fx);
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
        loss: fx.loss,
        trainable: fx.lora ? 'lora' : 'full',
        lora: fx.lora,
        kl: fx.loss === 'ppo',
        entropy: fx.loss === 'ppo',
        perSequenceMask: true,
      });
      await engine.createSession(`train-${name}`, art.bytes);
      const fetches = Object.fromEntries(art.outputs.map((o) => [o, 'return' as const]));
      const out = await engine.run(`train-${name}`, feedsOf(fx), fetches);
      const scalar = (k: string) => (out[k]!.data as Float32Array)[0]!;
      const expectScalar = (k: string) => fx.t(`expect.${k}`).data[0]!;
      assert.ok(Math.abs(scalar('loss') - expectScalar('loss')) <= 1e-5 * Math.max(1, Math.abs(expectScalar('loss'))), `loss ${scalar('loss')} vs ${expectScalar('loss')}`);
      const mask = fx.t('input.attention_mask').data;
      const lerr = relErr(out['logp']!.data as Float32Array, fx.t('expect.logp').data, (i) => mask[i] === 1);
      assert.ok(lerr < 1e-5, `logp relative error ${lerr}`);
      if (fx.loss === 'ppo') {
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
