/**
 * Reading the PyTorch fixtures (`reference/make_fixtures.py`, `reference/make_hf_fixtures.py`) for
 * tests: tensors by name, the case metadata parsed with zod, and the feeds of a train-step graph.
 * Test support only; nothing in the server imports it.
 */
import { fileURLToPath } from 'node:url';
import { z } from 'zod';
import { f32, i64, type HostTensor } from '../runtime/tensor.ts';
import { causalBias } from './attention-bias.ts';
import { loraTargets, parseModelConfig, type ModelConfig } from './model-config.ts';
import { readSafetensorsFile } from './safetensors.ts';
import type { LoraSpec } from './transformer-graph.ts';

const caseSchema = z.looseObject({
  modelConfig: z.unknown(),
  loss: z.enum(['ppo', 'ce']),
  lora: z.object({ rank: z.int().positive(), alpha: z.number().positive(), targets: z.array(z.enum(loraTargets)) }).nullable(),
  scalars: z.object({
    temperature: z.number(),
    clipEps: z.number().optional(),
    klCoef: z.number().optional(),
    entCoef: z.number().optional(),
    tokenWeight: z.number(),
  }),
  batch: z.int().positive(),
  seqLen: z.int().positive(),
  /** Hugging Face fixtures: the folders (relative to fixtures/) holding the base weights. */
  folders: z.array(z.string()).optional(),
  /** Hugging Face fixtures: the reference's RoPE inverse frequencies. */
  ropeInvFreq: z.array(z.number()).optional(),
});

export interface TorchFixture {
  readonly config: ModelConfig;
  readonly meta: z.output<typeof caseSchema>;
  readonly lora: LoraSpec | null;
  readonly B: number;
  readonly T: number;
  /** A tensor of the fixture; throws naming the fixture when it is absent. */
  t(name: string): { shape: number[]; data: Float32Array };
  /** Names after `prefix` of the tensors that start with it (`param.`, `grad.`). */
  names(prefix: string): string[];
}

/** The absolute path of a file or folder under `fixtures/`. */
export const fixturePath = (rel: string): string => fileURLToPath(new URL(`./fixtures/${rel}`, import.meta.url));

export async function loadTorchFixture(name: string): Promise<TorchFixture> {
  const { tensors, metadata } = await readSafetensorsFile(fixturePath(`${name}.safetensors`));
  const meta = caseSchema.parse(JSON.parse(metadata['case'] ?? 'null'));
  return {
    config: parseModelConfig(meta.modelConfig, `fixture ${name} modelConfig`),
    meta,
    lora: meta.lora ? { rank: meta.lora.rank, alpha: meta.lora.alpha, targets: meta.lora.targets } : null,
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

/** Flat indices of the real (attention-mask 1) positions: the rows a fixture's graphs score. */
export function realRows(mask: ArrayLike<number>): number[] {
  const rows: number[] = [];
  for (let i = 0; i < mask.length; i++) if (mask[i] === 1) rows.push(i);
  return rows;
}

/** max |a−b| / max(|b|) over the entries where keep(i). */
export function relErr(a: ArrayLike<number>, b: ArrayLike<number>, keep: (i: number) => boolean = () => true): number {
  let num = 0;
  let den = 0;
  for (let i = 0; i < b.length; i++) {
    if (!keep(i)) continue;
    num = Math.max(num, Math.abs(a[i]! - b[i]!));
    den = Math.max(den, Math.abs(b[i]!));
  }
  return num / Math.max(den, 1e-12);
}

/**
 * Feeds of a train-step (or forward) graph: the fixture's inputs and `param.*` tensors, plus
 * `weights` (base weights loaded from elsewhere, e.g. a Hugging Face folder).
 */
export function fixtureFeeds(fx: TorchFixture, weights: ReadonlyMap<string, { shape: readonly number[]; data: Float32Array }> = new Map()): Record<string, HostTensor> {
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
    token_weight: f32([], [fx.meta.scalars.tokenWeight]),
  };
  for (const [name, w] of weights) feeds[name] = f32(w.shape, w.data);
  for (const name of fx.names('param.')) feeds[name] = f32(fx.t(`param.${name}`).shape, fx.t(`param.${name}`).data);
  if (fx.meta.loss === 'ppo') {
    const s = fx.meta.scalars;
    feeds['temperature'] = f32([], [s.temperature]);
    feeds['advantages'] = f32([B, T], fx.t('input.advantages').data);
    feeds['old_logp'] = f32([B, T], fx.t('input.old_logp').data);
    feeds['ref_logp'] = f32([B, T], fx.t('input.ref_logp').data);
    feeds['clip_eps'] = f32([], [s.clipEps ?? 0.2]);
    feeds['kl_coef'] = f32([], [s.klCoef ?? 0]);
    feeds['ent_coef'] = f32([], [s.entCoef ?? 0]);
  }
  return feeds;
}
