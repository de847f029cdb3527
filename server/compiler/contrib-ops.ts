/**
 * Inference-only ops that lower to ONNX Runtime's contrib kernels (domain `com.microsoft`, in the
 * CPU build of onnxruntime-node): the fused and quantized decode graph is built from them.
 *
 * They have no gradient rules (autodiff refuses them by name) and are spread into `opDefs`, so
 * they get an ONNX lowering like every other op. Ops with several outputs (SkipSimplified-
 * LayerNormalization, GroupQueryAttention) are *tuple* nodes: their `outputs` list each output's
 * type, and only `select` may consume them (the graph enforces it).
 *
 * Specs: onnxruntime docs/ContribOperators.md; shapes below follow them.
 */
import { formatShape, type Shape } from './dims.ts';
import type { Attrs, Inferred, OpDef, Operand } from './ops.ts';
import { ShapeError } from './shape-error.ts';

const fail = (msg: string): never => {
  throw new ShapeError(msg);
};

function num(attrs: Attrs, key: string): number {
  const v = attrs[key];
  if (typeof v !== 'number') return fail(`attribute '${key}' must be a number, got ${JSON.stringify(v)}`);
  return v;
}

function f32(x: Operand, what: string): void {
  if (x.dtype !== 'float32') fail(`${what} must be float32, got ${x.dtype}${formatShape(x.shape)}`);
}

/** Bytes of one quantized block of `blockSize` values at `bits` bits. */
export function blobSize(blockSize: number, bits: number): number {
  return (blockSize * bits) / 8;
}

export const contribOpDefs = {
  /**
   * com.microsoft MatMulNBits: y [..., N] = x [..., K] · dequant(W)ᵀ for W [N, K] quantized
   * block-wise along K. Inputs: x float32; packed uint8 [N, ⌈K/blockSize⌉, blockSize·bits/8]
   * (element j of a block in the low bits of byte j·bits/8 first); scales float32
   * [N·⌈K/blockSize⌉]. No zero points: the kernel's default, 2^(bits−1), makes it symmetric.
   * attrs: bits (4 or 8), blockSize (a power of two ≥ 16), accuracyLevel (0 exact fp32 math;
   * 4 quantizes x to int8 per block and multiplies in integers).
   */
  matMulNBits: {
    arity: 3,
    infer: (inputs, attrs): Inferred => {
      const [x, q, s] = inputs as [Operand, Operand, Operand];
      const bits = num(attrs, 'bits');
      const bs = num(attrs, 'blockSize');
      num(attrs, 'accuracyLevel');
      if (bits !== 4 && bits !== 8) fail(`matMulNBits: bits must be 4 or 8, got ${bits}`);
      if (!(bs >= 16 && (bs & (bs - 1)) === 0)) fail(`matMulNBits: blockSize must be a power of two ≥ 16, got ${bs}`);
      f32(x, 'matMulNBits input');
      f32(s, 'matMulNBits scales');
      if (q.dtype !== 'uint8' || q.shape.length !== 3) fail(`matMulNBits weights must be uint8 [N, blocks, bytes], got ${q.dtype}${formatShape(q.shape)}`);
      const K = x.shape[x.shape.length - 1];
      const [N, blocks, bytes] = q.shape as [Shape[number], Shape[number], Shape[number]];
      if (typeof K !== 'number' || typeof N !== 'number') return fail(`matMulNBits needs static K and N, got input ${formatShape(x.shape)}, weights ${formatShape(q.shape)}`);
      if (blocks !== Math.ceil(K / bs) || bytes !== blobSize(bs, bits)) {
        fail(`matMulNBits: weights ${formatShape(q.shape)} do not hold K=${K} in blocks of ${bs} at ${bits} bits (want [${N}, ${Math.ceil(K / bs)}, ${blobSize(bs, bits)}])`);
      }
      if (s.shape.length !== 1 || s.shape[0] !== N * Math.ceil(K / bs)) fail(`matMulNBits scales must be [${N * Math.ceil(K / bs)}], got ${formatShape(s.shape)}`);
      return { shape: [...x.shape.slice(0, -1), N], dtype: 'float32' };
    },
  },
  /**
   * com.microsoft SkipSimplifiedLayerNormalization: the residual add and the RMSNorm after it in
   * one kernel. Inputs x, skip [..., C] (same shape), w [C]; attrs eps. A tuple:
   * (RMSNorm(x + skip)·w, x + skip).
   */
  skipRmsNorm: {
    arity: 3,
    infer: (inputs, attrs): Inferred => {
      const [x, skip, w] = inputs as [Operand, Operand, Operand];
      num(attrs, 'eps');
      for (const [t, what] of [[x, 'input'], [skip, 'skip'], [w, 'weight']] as const) f32(t, `skipRmsNorm ${what}`);
      if (formatShape(x.shape) !== formatShape(skip.shape)) fail(`skipRmsNorm: input ${formatShape(x.shape)} and skip ${formatShape(skip.shape)} differ`);
      const C = x.shape[x.shape.length - 1];
      if (w.shape.length !== 1 || w.shape[0] !== C) fail(`skipRmsNorm weight must be [${String(C)}], got ${formatShape(w.shape)}`);
      const out = { shape: x.shape, dtype: 'float32' as const };
      return { ...out, outputs: [out, out] };
    },
  },
  /**
   * com.microsoft GroupQueryAttention with rotary embedding and a batch-major KV cache that the
   * kernel updates in place (past and present share one buffer of capacity M).
   * Inputs: q [B,S,H·D], k, v [B,S,Hkv·D] (before RoPE), past key/value [B,Hkv,M,D],
   * seqlens_k int32 [B] (each row's total length − 1, past included), total_sequence_length
   * int32 scalar, cos/sin caches [maxPositions, D/2]. attrs numHeads, kvNumHeads, scale.
   * A tuple: (out [B,S,H·D], present key, present value [B,Hkv,M,D]).
   * Each row attends causally to its first seqlens_k+1 positions, and RoPE takes positions from
   * seqlens_k, so ragged rows are right-padded and need no attention bias.
   */
  groupQueryAttention: {
    arity: 9,
    infer: (inputs, attrs): Inferred => {
      const [q, k, v, pk, pv, seqlens, total, cos, sin] = inputs as [Operand, Operand, Operand, Operand, Operand, Operand, Operand, Operand, Operand];
      const H = num(attrs, 'numHeads');
      const Hkv = num(attrs, 'kvNumHeads');
      num(attrs, 'scale');
      for (const [t, what] of [[q, 'query'], [k, 'key'], [v, 'value'], [pk, 'past key'], [pv, 'past value'], [cos, 'cos cache'], [sin, 'sin cache']] as const) f32(t, `groupQueryAttention ${what}`);
      if (q.shape.length !== 3 || pk.shape.length !== 4) fail(`groupQueryAttention: query must be [B,S,H·D] and past [B,Hkv,M,D], got ${formatShape(q.shape)}, ${formatShape(pk.shape)}`);
      const D = pk.shape[3];
      if (typeof D !== 'number' || pk.shape[1] !== Hkv) fail(`groupQueryAttention: past key ${formatShape(pk.shape)} is not [B, ${Hkv}, M, D]`);
      const d = D as number;
      if (q.shape[2] !== H * d || k.shape[2] !== Hkv * d || v.shape[2] !== Hkv * d) {
        fail(`groupQueryAttention: query ${formatShape(q.shape)}, key ${formatShape(k.shape)}, value ${formatShape(v.shape)} do not match H=${H}, Hkv=${Hkv}, D=${d}`);
      }
      if (q.shape[0] !== pk.shape[0] || formatShape(pk.shape) !== formatShape(pv.shape)) fail(`groupQueryAttention: past key ${formatShape(pk.shape)} / value ${formatShape(pv.shape)} do not match the batch of ${formatShape(q.shape)}`);
      if (seqlens.dtype !== 'int32' || seqlens.shape.length !== 1 || total.dtype !== 'int32' || total.shape.length !== 0) {
        fail(`groupQueryAttention: seqlens_k must be int32 [B] and total_sequence_length an int32 scalar, got ${seqlens.dtype}${formatShape(seqlens.shape)}, ${total.dtype}${formatShape(total.shape)}`);
      }
      if (cos.shape.length !== 2 || cos.shape[1] !== d / 2 || formatShape(cos.shape) !== formatShape(sin.shape)) fail(`groupQueryAttention: cos/sin caches must be [maxPositions, ${d / 2}], got ${formatShape(cos.shape)}, ${formatShape(sin.shape)}`);
      const out = { shape: q.shape, dtype: 'float32' as const };
      const cache = { shape: pk.shape, dtype: 'float32' as const };
      return { ...out, outputs: [out, cache, cache] };
    },
  },
  /** Output `index` of a multi-output node. */
  select: {
    arity: 1,
    infer: (inputs, attrs): Inferred => {
      const t = inputs[0]!;
      const i = num(attrs, 'index');
      if (!t.outputs) return fail('select reads a multi-output node (skipRmsNorm, groupQueryAttention)');
      const o = t.outputs[i];
      if (!o) return fail(`select index ${i} out of range: the node has ${t.outputs.length} outputs`);
      return { shape: o.shape, dtype: o.dtype };
    },
  },
} as const satisfies Record<string, OpDef>;

/** Ops with several outputs: only `select` may read them. */
export const tupleOps: ReadonlySet<string> = new Set(['skipRmsNorm', 'groupQueryAttention']);
/** Ops with no gradient rule: decode-time kernels only. */
export const inferenceOnlyOps = ['matMulNBits', 'skipRmsNorm', 'groupQueryAttention', 'select'] as const;
