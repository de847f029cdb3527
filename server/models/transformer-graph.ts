/**
 * The transformer forward pass as an IR graph, and the decode artifact built from it.
 *
 * Shape legend: B batch, T new tokens, P past tokens, S = P+T keys, C width, H query heads,
 * Hkv key/value heads, D head dim, F MLP width, V vocab, L layers, r LoRA rank.
 * Weights are graph inputs named exactly as the checkpoint (`layers.3.attn.q.weight`), so one
 * compiled graph serves any weights, and LoRA tensors are inputs too (`layers.3.attn.q.lora_A`),
 * so one graph serves every agent's adapter.
 */
import { applyRope, attention, geluTanh, layerNorm, linear, rmsNorm, ropeTables, silu, type LoraPair } from '../compiler/composite.ts';
import { dimMul } from '../compiler/dims.ts';
import type { Graph, Node } from '../compiler/ir.ts';
import type { DType } from '../compiler/ops.ts';
import { adaptedTargets, isGpt2, type LoraTarget, type ModelConfig, modelDims, parameterShapes, projectionName, projectionSize, ropeInverseFrequencies } from './model-config.ts';

/** LoRA layout of a compiled graph: which projections carry adapters, rank and scale. */
export interface LoraSpec {
  readonly rank: number;
  readonly alpha: number;
  readonly targets: readonly LoraTarget[];
}

export function loraShapes(c: ModelConfig, spec: LoraSpec): Array<[string, number[]]> {
  const out: Array<[string, number[]]> = [];
  // Canonical target order, whatever order the spec lists them in, so the trainable tensor list
  // (and everything keyed by position, like the optimizer graph) is the same for equal specs.
  const targets = adaptedTargets(c, spec.targets);
  for (let i = 0; i < c.numLayers; i++) {
    for (const t of targets) {
      const { in: n, out: m } = projectionSize(c, t);
      out.push([`${projectionName(i, t)}.lora_A`, [spec.rank, n]]);
      out.push([`${projectionName(i, t)}.lora_B`, [m, spec.rank]]);
    }
  }
  return out;
}

export interface ModelInputs {
  readonly weights: ReadonlyMap<string, Node>;
  readonly lora: ReadonlyMap<string, Node> | null;
  readonly loraScale: number;
}

/** The outputs of a decode graph whose KV cache stays on the device (generate.ts 'device'): the grown cache per layer. */
export function deviceCacheOutputs(c: ModelConfig): string[] {
  return Array.from({ length: c.numLayers }, (_, i) => [`cache.${i}.key`, `cache.${i}.value`]).flat();
}

/** Declares every weight (and LoRA tensor) as a graph input. */
export function declareModelInputs(b: Graph, c: ModelConfig, dtype: DType, lora: LoraSpec | null): ModelInputs {
  const weights = new Map<string, Node>();
  for (const [name, shape] of parameterShapes(c)) weights.set(name, b.input(name, dtype, shape));
  let adapters: Map<string, Node> | null = null;
  if (lora) {
    adapters = new Map();
    for (const [name, shape] of loraShapes(c, lora)) adapters.set(name, b.input(name, dtype, shape));
  }
  return { weights, lora: adapters, loraScale: lora ? lora.alpha / lora.rank : 0 };
}

function w(m: ModelInputs, name: string): Node {
  const n = m.weights.get(name);
  if (!n) throw new Error(`model graph: missing weight '${name}'`);
  return n;
}

function adapter(m: ModelInputs, layer: number, t: LoraTarget): LoraPair | null {
  const p = projectionName(layer, t);
  const a = m.lora?.get(`${p}.lora_A`);
  const bb = m.lora?.get(`${p}.lora_B`);
  return a && bb ? { a, b: bb, scale: m.loraScale } : null;
}

export interface ForwardArgs {
  readonly ids: Node; // [B,T] int64
  readonly positions: Node; // [B,T] int64
  readonly bias: Node; // [B,T,S] (per-sequence padding) or [T,S] (causal only)
  /** Per layer past keys/values, time-major [P,B,Hkv,D] (or as `pastLayout` says); absent for a cache-free pass. */
  readonly past?: ReadonlyArray<{ key: Node; value: Node }>;
  /** 'batch-major': `past` is [B,Hkv,P,D], the layout attention reads, so it is joined to the new keys without a transpose. */
  readonly pastLayout?: 'time-major' | 'batch-major';
  /** Compute logits only for the last position ([B,V] instead of [B,T,V]). */
  readonly lastOnly?: boolean;
  /**
   * Compute logits only at these positions: flat indices b·T + t, [N] int64, giving [N,V]. The
   * final norm, the LM head and everything over V after it then cost N rows, not B·T.
   */
  readonly rows?: Node;
}

export interface ForwardResult {
  readonly logits: Node; // [B,T,V] or [B,V]
  /** The final-normed hidden state the LM head reads, [B,T,C], [B,C] or [N,C] as `logits` (the value head's features). */
  readonly hidden: Node;
  /** Per layer new keys/values, time-major [T,B,Hkv,D]. */
  readonly present: Array<{ key: Node; value: Node }>;
  /** Per layer every key/value attention read, past and new: [B,Hkv,P+T,D]. */
  readonly cache: Array<{ key: Node; value: Node }>;
}

export function forward(b: Graph, c: ModelConfig, m: ModelInputs, args: ForwardArgs): ForwardResult {
  if (isGpt2(c)) return forwardGpt2(b, c, m, args);
  const { H, Hkv, D, L } = modelDims(c);
  const [B, T] = args.ids.shape as [string | number, string | number];
  const embed = w(m, 'embed.weight');
  let x = b.gather(embed, args.ids, 0); // [B,T,C]
  const { cos, sin } = ropeTables(b, args.positions, ropeInverseFrequencies(c), embed.dtype); // [B,T,1,D]
  const present: Array<{ key: Node; value: Node }> = [];
  const cache: Array<{ key: Node; value: Node }> = [];
  const bias = (name: string) => (c.attentionBias ? w(m, name) : null);
  for (let i = 0; i < L; i++) {
    const p = `layers.${i}`;
    const h = rmsNorm(b, x, w(m, `${p}.attn_norm.weight`), c.rmsNormEps);
    // Separate GEMMs per projection: one GEMM against concatenated q|k|v (and gate|up) weights
    // was measured slower end to end on CPU (the split copies cost more than the bigger GEMM saves).
    const q0 = linear(b, h, w(m, `${p}.attn.q.weight`), bias(`${p}.attn.q.bias`), adapter(m, i, 'q'));
    const k0 = linear(b, h, w(m, `${p}.attn.k.weight`), bias(`${p}.attn.k.bias`), adapter(m, i, 'k'));
    const v0 = linear(b, h, w(m, `${p}.attn.v.weight`), bias(`${p}.attn.v.bias`), adapter(m, i, 'v'));
    // Qwen3 normalises each head of q and k (over D) before RoPE.
    const qkNorm = (x: Node, which: 'q' | 'k') => (c.qkNorm ? rmsNorm(b, x, w(m, `${p}.attn.${which}_norm.weight`), c.rmsNormEps) : x);
    const q = applyRope(b, qkNorm(b.reshape(q0, [B, T, H, D]), 'q'), cos, sin); // [B,T,H,D]
    const k = applyRope(b, qkNorm(b.reshape(k0, [B, T, Hkv, D]), 'k'), cos, sin); // [B,T,Hkv,D]
    const v = b.reshape(v0, [B, T, Hkv, D]);
    const { keys, vals } = joinPast(b, args, i, k, v, present, cache);
    const att = attention(b, q, keys, vals, args.bias); // [B,T,H·D]
    x = b.add(x, linear(b, att, w(m, `${p}.attn.o.weight`), null, adapter(m, i, 'o')));
    const h2 = rmsNorm(b, x, w(m, `${p}.mlp_norm.weight`), c.rmsNormEps);
    const gate = linear(b, h2, w(m, `${p}.mlp.gate.weight`), null, adapter(m, i, 'gate'));
    const up = linear(b, h2, w(m, `${p}.mlp.up.weight`), null, adapter(m, i, 'up'));
    x = b.add(x, linear(b, b.mul(silu(b, gate), up), w(m, `${p}.mlp.down.weight`), null, adapter(m, i, 'down')));
  }
  if (args.lastOnly) x = b.gather(x, b.scalar(-1, 'int64'), 1); // [B,C]
  else if (args.rows) x = b.gather(b.reshape(x, [dimMul(B, T), c.hiddenSize]), args.rows, 0); // [N,C]
  const head = c.tieEmbeddings ? embed : w(m, 'lm_head.weight');
  const hidden = rmsNorm(b, x, w(m, 'norm.weight'), c.rmsNormEps);
  const logits = linear(b, hidden, head);
  return { logits, hidden, present, cache };
}

/** Appends this step's keys and values [B,T,H,D] to the past (`ForwardArgs.past`), noting both. */
function joinPast(b: Graph, args: ForwardArgs, i: number, k: Node, v: Node, present: ForwardResult['present'], cache: ForwardResult['cache']): { keys: Node; vals: Node } {
  present.push({ key: b.transpose(k, [1, 0, 2, 3]), value: b.transpose(v, [1, 0, 2, 3]) }); // [T,B,Hkv,D]
  let keys = b.transpose(k, [0, 2, 1, 3]); // [B,Hkv,T,D]
  let vals = b.transpose(v, [0, 2, 1, 3]);
  const past = args.past?.[i];
  if (past) {
    const batchMajor = args.pastLayout === 'batch-major';
    keys = b.concat([batchMajor ? past.key : b.transpose(past.key, [1, 2, 0, 3]), keys], 2); // [B,Hkv,P+T,D]
    vals = b.concat([batchMajor ? past.value : b.transpose(past.value, [1, 2, 0, 3]), vals], 2);
  }
  cache.push({ key: keys, value: vals });
  return { keys, vals };
}

/**
 * GPT-2 (transformers `GPT2LMHeadModel`): token plus learned position embeddings, then per layer
 * x += attn(LN₁(x)); x += c_proj(gelu_tanh(c_fc(LN₂(x)))), and LN_f before the tied head. The
 * cache contract is the Llama forward's: keys and values per layer, `present` time-major.
 */
function forwardGpt2(b: Graph, c: ModelConfig, m: ModelInputs, args: ForwardArgs): ForwardResult {
  const { H, D, L } = modelDims(c);
  const [B, T] = args.ids.shape as [string | number, string | number];
  const embed = w(m, 'embed.weight');
  // Positions index the learned table directly; a position past positionEmbeddings is out of
  // range for Gather, which is why the config bounds maxSequenceLength by it.
  let x = b.add(b.gather(embed, args.ids, 0), b.gather(w(m, 'pos_embed.weight'), args.positions, 0)); // [B,T,C]
  const present: ForwardResult['present'] = [];
  const cache: ForwardResult['cache'] = [];
  const eps = c.rmsNormEps;
  const norm = (x: Node, name: string) => layerNorm(b, x, w(m, `${name}.weight`), w(m, `${name}.bias`), eps);
  const proj = (x: Node, i: number, group: 'attn' | 'mlp', t: LoraTarget) => {
    const p = `layers.${i}.${group}.${t}`;
    return linear(b, x, w(m, `${p}.weight`), w(m, `${p}.bias`), adapter(m, i, t));
  };
  for (let i = 0; i < L; i++) {
    const h = norm(x, `layers.${i}.attn_norm`);
    const q = b.reshape(proj(h, i, 'attn', 'q'), [B, T, H, D]); // [B,T,H,D]
    const k = b.reshape(proj(h, i, 'attn', 'k'), [B, T, H, D]);
    const v = b.reshape(proj(h, i, 'attn', 'v'), [B, T, H, D]);
    const { keys, vals } = joinPast(b, args, i, k, v, present, cache);
    const att = attention(b, q, keys, vals, args.bias); // [B,T,H·D]
    x = b.add(x, proj(att, i, 'attn', 'o'));
    const h2 = norm(x, `layers.${i}.mlp_norm`);
    x = b.add(x, proj(geluTanh(b, proj(h2, i, 'mlp', 'up')), i, 'mlp', 'down'));
  }
  if (args.lastOnly) x = b.gather(x, b.scalar(-1, 'int64'), 1); // [B,C]
  else if (args.rows) x = b.gather(b.reshape(x, [dimMul(B, T), c.hiddenSize]), args.rows, 0); // [N,C]
  const head = c.tieEmbeddings ? embed : w(m, 'lm_head.weight');
  const hidden = norm(x, 'norm');
  return { logits: linear(b, hidden, head), hidden, present, cache };
}
