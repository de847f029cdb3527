/**
 * Inference-only ops that lower to ONNX Runtime's contrib kernels (domain `com.microsoft`, in the
 * CPU build of onnxruntime-node): the fused and quantized decode graph is built from them.
 *
 * They have no gradient rules (autodiff refuses them by name) and are spread into `opDefs`, so
 * they get an ONNX lowering like every other op. An op with several outputs
 * (SkipSimplifiedLayerNormalization) is a *tuple* node: its `outputs` list each output's type, and
 * only `select` may consume it (the graph enforces it).
 *
 * GroupQueryAttention (RoPE, mask and an in-place batch-major cache in one kernel) was built and
 * matched the plain graph, but is not used: it returns the whole cache as its present outputs,
 * and onnxruntime-node copies every output on each run (measured: an 8 MB preallocated output
 * costs ~5 ms, an 8 MB input ~0), so a step cost O(cache) — 6.6 ms at 80 positions, 71 ms at 512,
 * against 3.9 ms for the plain step. Attention stays composite over the time-major cache, whose
 * graph returns only the new [T,B,Hkv,D] slice.
 *
 * Specs: ONNX Runtime's docs/ContribOperators.md (github.com/microsoft/onnxruntime); shapes below follow them.
 */
import { dimAdd, formatShape, type Dim, type Shape } from './dims.ts';
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

/** The kernels' type T: float32 or float16, one for every operand given. */
function halfOrFloat(operands: ReadonlyArray<readonly [Operand, string]>): 'float32' | 'float16' {
  const [first, what] = operands[0]!;
  if (first.dtype !== 'float32' && first.dtype !== 'float16') fail(`${what} must be float32 or float16, got ${first.dtype}${formatShape(first.shape)}`);
  for (const [x, w] of operands) if (x.dtype !== first.dtype) fail(`${w} must be ${first.dtype} like the ${what}, got ${x.dtype}${formatShape(x.shape)}`);
  return first.dtype as 'float32' | 'float16';
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
   * one kernel. Inputs x, skip [..., C] (same shape), w [C], all float32 or all float16; attrs
   * eps. A tuple: (RMSNorm(x + skip)·w, x + skip). ONNX Runtime's kernels (CPU, CUDA, WebGPU)
   * accumulate the mean square in float32 for float16 inputs.
   */
  skipRmsNorm: {
    arity: 3,
    infer: (inputs, attrs): Inferred => {
      const [x, skip, w] = inputs as [Operand, Operand, Operand];
      num(attrs, 'eps');
      const dtype = halfOrFloat([[x, 'skipRmsNorm input'], [skip, 'skipRmsNorm skip'], [w, 'skipRmsNorm weight']]);
      if (formatShape(x.shape) !== formatShape(skip.shape)) fail(`skipRmsNorm: input ${formatShape(x.shape)} and skip ${formatShape(skip.shape)} differ`);
      const C = x.shape[x.shape.length - 1];
      if (w.shape.length !== 1 || w.shape[0] !== C) fail(`skipRmsNorm weight must be [${String(C)}], got ${formatShape(w.shape)}`);
      const out = { shape: x.shape, dtype };
      return { ...out, outputs: [out, out] };
    },
  },
  /**
   * com.microsoft RotaryEmbedding (rotate-half, not interleaved): x [B,T,h·D] rotated per head by
   * the angles of positions [B,T] (int64), read from cos/sin caches [maxPositions, D/2] of x's
   * dtype (float32 or float16) — one
   * kernel where the primitive form (composite.ts applyRope) takes seven. attrs numHeads (h).
   */
  rotaryEmbedding: {
    arity: 4,
    infer: (inputs, attrs): Inferred => {
      const [x, pos, cos, sin] = inputs as [Operand, Operand, Operand, Operand];
      const h = num(attrs, 'numHeads');
      const dtype = halfOrFloat([[x, 'rotaryEmbedding input'], [cos, 'rotaryEmbedding cos cache'], [sin, 'rotaryEmbedding sin cache']]);
      const W = x.shape[2];
      if (x.shape.length !== 3 || typeof W !== 'number' || W % h !== 0) return fail(`rotaryEmbedding input must be [B,T,${h}·D], got ${formatShape(x.shape)}`);
      if (pos.dtype !== 'int64' || pos.shape.length !== 2 || pos.shape[0] !== x.shape[0] || pos.shape[1] !== x.shape[1]) {
        fail(`rotaryEmbedding positions must be int64 [B,T] matching ${formatShape(x.shape)}, got ${pos.dtype}${formatShape(pos.shape)}`);
      }
      const D = W / h;
      if (cos.shape.length !== 2 || cos.shape[1] !== D / 2 || formatShape(cos.shape) !== formatShape(sin.shape)) fail(`rotaryEmbedding caches must be [maxPositions, ${D / 2}], got ${formatShape(cos.shape)}, ${formatShape(sin.shape)}`);
      return { shape: x.shape, dtype };
    },
  },
  /**
   * ONNX Split of x [..., A+B+…, ...] along `axis` into parts as long as each ref's last axis (a
   * tuple; read each part with select): the split of a value built by concatenating along a
   * symbolic axis (the fused decode's attention scores over past and new keys), where `slice`
   * needs static bounds. The sizes come from Shape(ref) at run time, once per distinct ref set.
   */
  splitLike: {
    arity: -1,
    infer: (inputs, attrs): Inferred => {
      const [x, ...refs] = inputs as [Operand, ...Operand[]];
      const rank = x.shape.length;
      const a = num(attrs, 'axis');
      const axis = a < 0 ? a + rank : a;
      if (!(axis >= 0 && axis < rank)) return fail(`splitLike: axis ${a} out of range for ${formatShape(x.shape)}`);
      if (refs.length < 2) return fail(`splitLike needs at least two refs, got ${refs.length}`);
      const sizes = refs.map((r) => r.shape[r.shape.length - 1]!);
      const total = sizes.reduce<Dim>((t, d) => dimAdd(t, d), 0);
      if (formatShape([total]) !== formatShape([x.shape[axis]!])) fail(`splitLike: parts ${formatShape(sizes)} do not add up to axis ${axis} of ${formatShape(x.shape)}`);
      const outputs = sizes.map((d) => ({ shape: x.shape.map((e, i) => (i === axis ? d : e)), dtype: x.dtype }));
      return { ...outputs[0]!, outputs };
    },
  },
  /** Output `index` of a multi-output node. */
  select: {
    arity: 1,
    infer: (inputs, attrs): Inferred => {
      const t = inputs[0]!;
      const i = num(attrs, 'index');
      if (!t.outputs) return fail('select reads a multi-output node (skipRmsNorm)');
      const o = t.outputs[i];
      if (!o) return fail(`select index ${i} out of range: the node has ${t.outputs.length} outputs`);
      return { shape: o.shape, dtype: o.dtype };
    },
  },
} as const satisfies Record<string, OpDef>;

/** Ops with several outputs: only `select` may read them. */
export const tupleOps: ReadonlySet<string> = new Set(['skipRmsNorm', 'splitLike']);
/** Ops with no gradient rule: decode-time kernels only. */
export const inferenceOnlyOps = ['matMulNBits', 'skipRmsNorm', 'rotaryEmbedding', 'splitLike', 'select'] as const;
