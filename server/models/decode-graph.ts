/**
 * The fused decode graph: the same model and contract as `buildDecode` (artifacts.ts; see
 * runtime/generate.ts), built with ONNX Runtime's contrib kernels so a decode step runs far fewer
 * kernels, optionally with weight-only quantized projections.
 *
 * Shape legend as in transformer-graph.ts. Per layer: RotaryEmbedding on q and k (one kernel each
 * instead of seven), SkipSimplifiedLayerNormalization (each residual add with the RMSNorm after
 * it), attention from primitives over a batch-major cache read in place (`cachedAttention`;
 * GroupQueryAttention was measured slower through onnxruntime-node: see contrib-ops.ts), and the
 * projections as MatMul or, quantized, MatMulNBits (q/k/v and gate/up joined when baked). RoPE's cos/sin tables, quantized weights and (when given)
 * fp32 weights are baked in as initializers; other weights stay inputs named as in checkpoints.
 *
 * Quantized: each projection W [out,in] (and the LM head) is replaced by block-wise codes and
 * scales (quantize.ts), a LoRA adapter merged in first; the graph then has no LoRA inputs.
 */
import { attention, linear, rmsNorm, silu, type LoraPair } from '../compiler/composite.ts';
import { dimMul, type Dim } from '../compiler/dims.ts';
import { Graph, type Node } from '../compiler/ir.ts';
import { toHalfPrecision } from '../compiler/half-precision.ts';
import { emitOnnx, type EmitOptions } from '../compiler/onnx-emit.ts';
import { type ModelConfig, modelDims, parameterShapes, ropeInverseFrequencies } from './model-config.ts';
import type { QuantBits, QuantizedMatrix } from './quantize.ts';
import { SAMPLE_OUTPUTS } from '../runtime/decode-inputs.ts';
import { sampleOnDevice } from './device-sampling.ts';
import { declareModelInputs, type LoraSpec } from './transformer-graph.ts';
import type { RolloutConfig } from '../protocol/experiment-config.ts';

/** fp32, fp16, int8 or int4 (the config's `rollout.weights`). */
export type RolloutWeights = RolloutConfig['weights'];

export interface FusedDecodeOptions {
  /**
   * fp32: MatMul (LoRA applied beside, as inputs); int8/int4: MatMulNBits on merged weights;
   * fp16 (GPU providers): the fp32 graph computed in float16, its baked weights converted from
   * the fp32 masters here (compiler/half-precision.ts; float32 inputs, cache and logits).
   */
  readonly weights: RolloutWeights;
  /** LoRA layout (fp32 only: quantized graphs take the adapter merged into `quantized`). */
  readonly lora: LoraSpec | null;
  /** Quantized projections by weight name (every one `quantizedWeightNames` lists), for int8/int4. */
  readonly quantized?: ReadonlyMap<string, QuantizedMatrix>;
  /** MatMulNBits accuracy level: 4 quantizes activations to int8 per block (fast), 0 keeps fp32 math. */
  readonly accuracyLevel?: number;
  /**
   * fp32 weights to bake in as initializers (LoRA merged; no adapter inputs then). ONNX Runtime
   * prepacks constant MatMul weights: measured 1.2–4x faster than the same MatMul with the weight
   * as an input at decode shapes (64 rows). Weights not given stay inputs.
   */
  readonly baked?: ReadonlyMap<string, Float32Array>;
  /**
   * Join projections that read the same input into one GEMM when their weights are baked or
   * quantized (default true): q/k/v into one [(H+2·Hkv)·D, C] matrix, gate/up into one [2F, C],
   * the product sliced back. The same dot products as separate MatMuls (a quantized row's blocks
   * do not change when rows are stacked), with fewer, larger kernels.
   */
  readonly joinProjections?: boolean;
  /** How products by a transposed weight are emitted (`EmitOptions.transposedMatMul`; artifacts.ts `loweringFor` picks it per provider). */
  readonly transposedMatMul?: EmitOptions['transposedMatMul'];
  /**
   * Where the KV cache lives between steps (runtime/generate.ts `CacheLayout`): 'host' (default;
   * batch-major with capacity, read in place by `cachedAttention`) or 'device' (WebGPU: past
   * [B,Hkv,P,D] joined with the new keys, the joined cache returned as `cache.{i}.*` and fed
   * back; the join that the host layout avoids costs little on a GPU, the copies it saves a lot).
   */
  readonly cache?: 'host' | 'device';
  /**
   * With a 'device' cache, end in the sampling tail (`FusedDecode.sampling`). Default: for
   * vocabularies of `DEVICE_SAMPLING_MIN_VOCAB` ids or more. False keeps every draw on the host:
   * a baseline for benchmarks, and a way to rule the tail out.
   */
  readonly sampleOnDevice?: boolean;
}

export interface FusedDecode {
  readonly bytes: Uint8Array;
  /** Graph inputs that are model tensors (fp32 weights, adapters), fed from residents. */
  readonly tensorInputs: readonly string[];
  readonly outputs: readonly string[];
  /** RoPE positions the cos/sin tables cover: a cache may not grow past it. */
  readonly maxPositions: number;
  /**
   * The KV-cache contract (generate.ts): 'batch-major', past [B,Hkv,S,D] of capacity S and present
   * the new [B,Hkv,T,D]; or 'device', the grown cache returned.
   */
  readonly cacheLayout: 'batch-major' | 'device';
  /**
   * The graph also draws each row's next token (device-sampling.ts): a 'device' cache graph in
   * fp32, int8 or int4 (fp16 graphs compute in float16, too narrow for sums over the vocabulary,
   * and sample on the host).
   */
  readonly sampling: 'device' | 'host';
}

/**
 * Smallest vocabulary that samples on the device by default. The tail is ~20 small kernels a step
 * whatever V is; host sampling costs B·V work in JavaScript plus the logits' download. On lavapipe
 * at V = 512 the tail cost 8–17 ms a step against 0.2–0.6 ms on the host (`BENCH_GPU_TINY=1
 * BENCH_GPU_PROVIDER=webgpu BENCH_GPU_DECODE=fused,host-sampling npm run bench:gpu`); at Qwen's
 * 151,936 ids the host spent 60–140 ms a step on 64 rows.
 */
export const DEVICE_SAMPLING_MIN_VOCAB = 8192;

export function quantBits(w: RolloutWeights): QuantBits | null {
  return w === 'int8' ? 8 : w === 'int4' ? 4 : null;
}

/** Weights a quantized decode graph takes as MatMulNBits codes: every projection and the LM head. */
export function quantizedWeightNames(c: ModelConfig): string[] {
  const names = parameterShapes(c)
    .map(([n]) => n)
    .filter((n) => /\.(attn\.(q|k|v|o)|mlp\.(gate|up|down))\.weight$/.test(n));
  names.push(c.tieEmbeddings ? 'embed.weight' : 'lm_head.weight');
  return names;
}

/** The quantized LM head's input names: `head.*` so a tied head does not shadow the embedding. */
const quantName = (weight: string, part: 'packed' | 'scales', head: string) => `${weight === head ? 'head' : weight}.${part}`;

export function buildFusedDecode(c: ModelConfig, o: FusedDecodeOptions): FusedDecode {
  // Built from RMSNorm and RoPE kernels: GPT-2 (LayerNorm, learned positions) decodes with the
  // plain graph, and the experiment config refuses rollout.fusedDecode and quantized rollouts for it.
  if (c.architecture === 'gpt2') throw new Error('buildFusedDecode: the fused decode graph supports the llama architecture only, not gpt2; decode gpt2 models with the plain graph (rollout.fusedDecode false, rollout.weights "fp32")');
  const { H, Hkv, D, L, V } = modelDims(c);
  const bits = quantBits(o.weights);
  if ((bits || o.baked) && o.lora) throw new Error('buildFusedDecode: a quantized or baked graph takes the LoRA adapter merged into its weights, not as inputs');
  if (bits && !o.quantized) throw new Error(`buildFusedDecode: ${o.weights} weights need the quantized projections`);
  const b = new Graph();
  const m = declareModelInputs(b, c, 'float32', o.lora);
  const headName = c.tieEmbeddings ? 'embed.weight' : 'lm_head.weight';
  const inits = new Map<string, Uint8Array>();
  const used = new Set<string>();
  const w = (name: string): Node => {
    const n = m.weights.get(name);
    if (!n) throw new Error(`fused decode graph: missing weight '${name}'`);
    used.add(name);
    return n;
  };
  const adapter = (p: string): LoraPair | null => {
    const a = m.lora?.get(`${p}.lora_A`);
    const bb = m.lora?.get(`${p}.lora_B`);
    if (a && bb) used.add(`${p}.lora_A`).add(`${p}.lora_B`);
    return a && bb ? { a, b: bb, scale: m.loraScale } : null;
  };
  /** x Wᵀ (+ bias): MatMul with W an input, or MatMulNBits with W's codes baked in. */
  const project = (x: Node, weight: string, bias: string | null, p: string | null): Node => {
    let y: Node;
    if (bits) {
      const q = o.quantized!.get(weight);
      if (!q || q.bits !== bits) throw new Error(`fused decode graph: no ${bits}-bit quantization of '${weight}'`);
      const blocks = Math.ceil(q.cols / q.blockSize);
      const packedName = quantName(weight, 'packed', headName);
      const scalesName = quantName(weight, 'scales', headName);
      const packed = b.input(packedName, 'uint8', [q.rows, blocks, (q.blockSize * bits) / 8]);
      const scales = b.input(scalesName, 'float32', [q.rows * blocks]);
      inits.set(packedName, q.packed).set(scalesName, new Uint8Array(q.scales.buffer, q.scales.byteOffset, q.scales.byteLength));
      y = b.matMulNBits(x, packed, scales, bits, q.blockSize, o.accuracyLevel ?? 4);
      if (bias) y = b.add(y, w(bias));
    } else {
      y = linear(b, x, w(weight), bias ? w(bias) : null, p ? adapter(p) : null);
    }
    return y;
  };

  /**
   * The projections of `parts` from the same x, joined into one MatMul(NBits) over their stacked
   * weights when every weight is baked or quantized (no adapter inputs), else one each.
   */
  const projectAll = (x: Node, joined: string, parts: ReadonlyArray<{ weight: string; bias: string | null; lora: string }>): Node[] => {
    const canJoin = (o.joinProjections ?? true) && !m.lora && parts.every((q) => (bits ? o.quantized?.has(q.weight) : o.baked?.has(q.weight)));
    if (!canJoin) return parts.map((q) => project(x, q.weight, q.bias, q.lora));
    let y: Node;
    const sizes: number[] = [];
    if (bits) {
      const qs = parts.map((q) => o.quantized!.get(q.weight)!);
      const { blockSize, cols } = qs[0]!;
      if (qs.some((q) => q.bits !== bits || q.blockSize !== blockSize || q.cols !== cols)) throw new Error(`fused decode graph: '${joined}' joins projections quantized differently`);
      qs.forEach((q) => sizes.push(q.rows));
      const rows = sizes.reduce((a, n) => a + n, 0);
      const blocks = Math.ceil(cols / blockSize);
      const packed = b.input(`${joined}.packed`, 'uint8', [rows, blocks, (blockSize * bits) / 8]);
      const scales = b.input(`${joined}.scales`, 'float32', [rows * blocks]);
      const scaleData = concatFloats(qs.map((q) => q.scales));
      inits.set(`${joined}.packed`, concatBytes(qs.map((q) => q.packed))).set(`${joined}.scales`, new Uint8Array(scaleData.buffer));
      y = b.matMulNBits(x, packed, scales, bits, blockSize, o.accuracyLevel ?? 4);
    } else {
      // The separate weights are not used: only the stacked initializer is.
      const ws = parts.map((q) => m.weights.get(q.weight)!);
      ws.forEach((n) => sizes.push(n.shape[0] as number));
      const stacked = concatFloats(parts.map((q) => o.baked!.get(q.weight)!));
      const wj = b.input(`${joined}.weight`, 'float32', [sizes.reduce((a, n) => a + n, 0), ws[0]!.shape[1]!]);
      inits.set(`${joined}.weight`, new Uint8Array(stacked.buffer));
      y = b.matmul(x, b.transpose(wj, [1, 0]));
    }
    const axis = y.shape.length - 1;
    let at = 0;
    return parts.map((q, j) => {
      const part = b.slice(y, axis, at, (at += sizes[j]!));
      return q.bias ? b.add(part, w(q.bias)) : part;
    });
  };

  const ids = b.input('input_ids', 'int64', ['B', 'T']);
  const positions = b.input('position_ids', 'int64', ['B', 'T']);
  const onDevice = o.cache === 'device';
  const pastBias = onDevice ? null : b.input('attention_bias_past', 'float32', ['B', 'T', 'S']);
  const newBias = b.input('attention_bias', 'float32', ['B', 'T', onDevice ? '(P+T)' : 'T']);
  const maxPositions = c.maxSequenceLength;
  const invFreq = ropeInverseFrequencies(c);
  const table = (f: (a: number) => number) => Float32Array.from({ length: maxPositions * (D / 2) }, (_, i) => f(Math.floor(i / (D / 2)) * invFreq[i % (D / 2)]!));
  const cos = b.input('rope.cos', 'float32', [maxPositions, D / 2]);
  const sin = b.input('rope.sin', 'float32', [maxPositions, D / 2]);
  inits.set('rope.cos', new Uint8Array(table(Math.cos).buffer)).set('rope.sin', new Uint8Array(table(Math.sin).buffer));

  const outputs: Array<[string, Node]> = [];
  /** Per layer the cache outputs: the new slice (`present.*`, host cache) or the joined cache (`cache.*`, device). */
  const kv: Array<[string, Node]> = [];
  let x = b.gather(w('embed.weight'), ids, 0); // [B,T,C]
  let h = rmsNorm(b, x, w('layers.0.attn_norm.weight'), c.rmsNormEps); // [B,T,C]
  for (let i = 0; i < L; i++) {
    const p = `layers.${i}`;
    const bias = (t: string) => (c.attentionBias ? `${p}.attn.${t}.bias` : null);
    const qkv = projectAll(h, `${p}.attn.qkv`, ['q', 'k', 'v'].map((t) => ({ weight: `${p}.attn.${t}.weight`, bias: bias(t), lora: `${p}.attn.${t}` })));
    let q = qkv[0]!; // [B,T,H·D]
    let k = qkv[1]!; // [B,T,Hkv·D]
    const v = b.reshape(qkv[2]!, ['B', 'T', Hkv, D]); // [B,T,Hkv,D]
    if (c.qkNorm) {
      // Qwen3's per-head RMSNorm before RoPE.
      q = b.reshape(rmsNorm(b, b.reshape(q, ['B', 'T', H, D]), w(`${p}.attn.q_norm.weight`), c.rmsNormEps), ['B', 'T', H * D]);
      k = b.reshape(rmsNorm(b, b.reshape(k, ['B', 'T', Hkv, D]), w(`${p}.attn.k_norm.weight`), c.rmsNormEps), ['B', 'T', Hkv * D]);
    }
    const qr = b.rotaryEmbedding(q, positions, cos, sin, H); // [B,T,H·D]
    const kr = b.reshape(b.rotaryEmbedding(k, positions, cos, sin, Hkv), ['B', 'T', Hkv, D]); // [B,T,Hkv,D]
    const kNew = b.transpose(kr, [0, 2, 1, 3]); // [B,Hkv,T,D]
    const vNew = b.transpose(v, [0, 2, 1, 3]);
    const pastKey = b.input(`past_key_values.${i}.key`, 'float32', ['B', Hkv, onDevice ? 'P' : 'S', D]);
    const pastValue = b.input(`past_key_values.${i}.value`, 'float32', ['B', Hkv, onDevice ? 'P' : 'S', D]);
    let att: Node; // [B,T,H·D]
    if (pastBias) {
      kv.push([`present.${i}.key`, kNew], [`present.${i}.value`, vNew]);
      att = cachedAttention(b, qr, pastKey, pastValue, kNew, vNew, pastBias, newBias);
    } else {
      const keys = b.concat([pastKey, kNew], 2); // [B,Hkv,P+T,D]
      const values = b.concat([pastValue, vNew], 2);
      kv.push([`cache.${i}.key`, keys], [`cache.${i}.value`, values]);
      att = attention(b, b.reshape(qr, ['B', 'T', H, D]), keys, values, newBias);
    }
    const o1 = project(att, `${p}.attn.o.weight`, null, `${p}.attn.o`); // [B,T,C]
    const mid = b.skipRmsNorm(o1, x, w(`${p}.mlp_norm.weight`), c.rmsNormEps);
    x = mid.sum; // [B,T,C]
    const [gate, up] = projectAll(mid.normed, `${p}.mlp.gate_up`, ['gate', 'up'].map((t) => ({ weight: `${p}.mlp.${t}.weight`, bias: null, lora: `${p}.mlp.${t}` }))) as [Node, Node]; // [B,T,F] each
    const down = project(b.mul(silu(b, gate), up), `${p}.mlp.down.weight`, null, `${p}.mlp.down`); // [B,T,C]
    const next = b.skipRmsNorm(down, x, w(i + 1 < L ? `layers.${i + 1}.attn_norm.weight` : 'norm.weight'), c.rmsNormEps);
    x = next.sum;
    h = next.normed; // the next layer's attention input, or (last layer) the final norm's output
  }
  // RMSNorm is per position, so normalising every position and then taking the last is the same.
  const last = b.gather(h, b.scalar(-1, 'int64'), 1); // [B,C]
  const logits = project(last, headName, null, null); // [B,V]
  if (logits.shape[1] !== V) throw new Error(`fused decode graph: logits ${String(logits.shape)} are not [B, ${V}]`);
  outputs.push(['logits', logits], ...kv);
  const sampling = onDevice && o.weights !== 'fp16' && (o.sampleOnDevice ?? V >= DEVICE_SAMPLING_MIN_VOCAB) ? 'device' : 'host';
  if (sampling === 'device') {
    const drawn = sampleOnDevice(b, logits, V);
    outputs.push([SAMPLE_OUTPUTS.token, drawn.token], [SAMPLE_OUTPUTS.logprob, drawn.logprob]);
  }
  for (const name of used) {
    const t = o.baked?.get(name);
    if (t) inits.set(name, new Uint8Array(t.buffer, t.byteOffset, t.byteLength));
  }
  const half = o.weights === 'fp16' ? toHalfPrecision(outputs, inits, { saturate: (n) => n.startsWith('attention_bias') }) : null;
  const bytes = emitOnnx(half?.outputs ?? outputs, { name: `decode-fused-${o.weights}`, doc: JSON.stringify({ model: c, lora: o.lora, weights: o.weights }), initializers: half?.initializers ?? inits, outputsInPlace: true, ...(o.transposedMatMul ? { transposedMatMul: o.transposedMatMul } : {}) });
  const tensorInputs = [...m.weights.keys(), ...(m.lora ? [...m.lora.keys()] : [])].filter((n) => used.has(n) && !inits.has(n));
  return { bytes, tensorInputs, outputs: outputs.map(([n]) => n), maxPositions, cacheLayout: onDevice ? 'device' : 'batch-major', sampling };
}

function concatFloats(xs: readonly Float32Array[]): Float32Array {
  const out = new Float32Array(xs.reduce((n, x) => n + x.length, 0));
  let at = 0;
  for (const x of xs) out.set(x, (at += x.length) - x.length);
  return out;
}

function concatBytes(xs: readonly Uint8Array[]): Uint8Array {
  const out = new Uint8Array(xs.reduce((n, x) => n + x.length, 0));
  let at = 0;
  for (const x of xs) out.set(x, (at += x.length) - x.length);
  return out;
}

/**
 * Attention of the new positions over a batch-major cache of capacity S (its slots past the
 * filled ones masked by `pastBias`) and over the new keys themselves, without joining the two
 * caches: concatenating past and new keys (or transposing a time-major cache) copies the whole
 * cache in every layer of every step, which the profile showed as ~35–45% of a step at the
 * benchmark's sizes. Only the small score blocks are joined: one Softmax over [past | new]
 * scores, split back at S (`splitLike`: S is symbolic, so `slice` cannot), out = p_past·V_past +
 * p_new·v_new. A masked slot's weight is exp(−1e9 − max) = 0 exactly.
 *
 * q [B,T,H·D], past k/v [B,Hkv,S,D], new k/v [B,Hkv,T,D], biases [B,T,S] and [B,T,T] → [B,T,H·D].
 * Query heads sharing a key head are stacked along the query axis, as in `attention` (composite.ts).
 * The softmax was ReduceMax/Max/Sub/Exp/ReduceSum/Add/Div over the two blocks (11 kernels a
 * layer, now 4: Concat, Add, Softmax, Split). Measured and not taken (profile-decode): queries as
 * [B,T,Hkv,G,D] against keys unsqueezed to [B,1,Hkv,S,D] — ONNX Runtime copies a graph input it
 * unsqueezes, so the whole cache again; the scale folded into the scores (FusedMatMul alpha ≠ 1
 * leaves MLAS's M = 1 GEMV path and packs every key block); the new-key products as Mul +
 * ReduceSum instead of MatMul (8% more CPU time per generation).
 */
function cachedAttention(b: Graph, q: Node, pastK: Node, pastV: Node, newK: Node, newV: Node, pastBias: Node, newBias: Node): Node {
  const [B, T, HD] = q.shape as [Dim, Dim, number];
  const [, Hkv, , D] = pastK.shape as [Dim, number, Dim, number];
  const G = HD / D / Hkv;
  const qs = b.mul(q, b.like(q, 1 / Math.sqrt(D)));
  const qg = b.reshape(b.transpose(b.reshape(qs, [B, T, Hkv * G, D]), [0, 2, 1, 3]), [B, Hkv, dimMul(G, T), D]); // [B,Hkv,G·T,D]
  const sPast = b.matmul(qg, b.transpose(pastK, [0, 1, 3, 2])); // [B,Hkv,G·T,S]
  const sNew = b.matmul(qg, b.transpose(newK, [0, 1, 3, 2])); // [B,Hkv,G·T,T]
  const m = b.unsqueeze(b.concat([pastBias, newBias], 2), [1]); // [B,1,T,S+T], one per graph
  const bias = G > 1 ? b.concat(Array.from({ length: G }, () => m), 2) : m; // [B,1,G·T,S+T]
  const p = b.softmax(b.add(b.concat([sPast, sNew], 3), bias), -1); // [B,Hkv,G·T,S+T]
  const [pPast, pNew] = b.splitLike(p, 3, [pastBias, newBias]) as [Node, Node];
  const oNew = b.matmul(pNew, newV); // [B,Hkv,G·T,D]
  const out = b.add(b.matmul(pPast, pastV), oNew); // [B,Hkv,G·T,D]
  const heads = b.reshape(out, [B, Hkv * G, T, D]); // [B,H,T,D]
  return b.reshape(b.transpose(heads, [0, 2, 1, 3]), [B, T, HD]); // [B,T,H·D]
}
