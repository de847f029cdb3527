/**
 * The primitive ops of the tensor IR and their shape/dtype inference.
 *
 * Every op here has exactly one ONNX lowering (`onnx-emit.ts`) and one gradient rule
 * (`grad-rules.ts`); both tables are typed `satisfies Record<Op, …>`, so adding an op here without
 * teaching the other two is a compile error. Composite ops (RMSNorm, RoPE, attention, SwiGLU, …)
 * live in `composite.ts` as functions of these. Softmax and log-softmax are primitives, not
 * composites: ONNX Runtime has fused kernels for them and they sit on the hottest tensors of a
 * transformer (attention scores, logits); `grad-rules.ort.test.ts` checks them against their
 * definition in terms of exp/reduce.
 */
import { contribOpDefs } from './contrib-ops.ts';
import { ShapeError } from './shape-error.ts';
import { broadcastShapes, dimAdd, dimProduct, formatShape, type Dim, type Shape } from './dims.ts';

export type DType = 'float16' | 'float32' | 'float64' | 'int64' | 'int32' | 'uint8' | 'bool';
/** float16 serves inference graphs only (fp16 rollout decode); nothing trains in it. */
export const floatTypes: ReadonlySet<DType> = new Set(['float16', 'float32', 'float64']);

export type AttrValue = number | string | readonly number[] | readonly Dim[] | null;
export type Attrs = Readonly<Record<string, AttrValue>>;

/** What inference needs to know about an operand. */
export interface Operand {
  readonly shape: Shape;
  readonly dtype: DType;
  /** Set on multi-output nodes (contrib ops): each output's type, read with `select`. */
  readonly outputs?: readonly Inferred[];
}

export interface Inferred {
  readonly shape: Shape;
  readonly dtype: DType;
  /** Multi-output ops list every output here; `shape`/`dtype` repeat output 0. */
  readonly outputs?: readonly Inferred[];
}

export { ShapeError } from './shape-error.ts';

export interface OpDef {
  /** Number of inputs, or -1 for variadic (concat). */
  readonly arity: number;
  readonly infer: (inputs: readonly Operand[], attrs: Attrs) => Inferred;
}

const fail = (msg: string): never => {
  throw new ShapeError(msg);
};

function attrNum(attrs: Attrs, key: string): number {
  const v = attrs[key];
  if (typeof v !== 'number') return fail(`attribute '${key}' must be a number, got ${JSON.stringify(v)}`);
  return v;
}

export function attrInts(attrs: Attrs, key: string): number[] {
  const v = attrs[key];
  if (!Array.isArray(v) || !v.every((x) => typeof x === 'number')) {
    return fail(`attribute '${key}' must be a list of integers, got ${JSON.stringify(v)}`);
  }
  return v as number[];
}

function attrDims(attrs: Attrs, key: string): Dim[] {
  const v = attrs[key];
  if (!Array.isArray(v)) return fail(`attribute '${key}' must be a list of dims`);
  return v as Dim[];
}

/** Normalises a possibly negative axis against a rank. */
export function normAxis(axis: number, rank: number): number {
  const a = axis < 0 ? axis + rank : axis;
  if (a < 0 || a >= rank) fail(`axis ${axis} out of range for rank ${rank}`);
  return a;
}

function sameFloat(inputs: readonly Operand[]): DType {
  const d = inputs[0]!.dtype;
  if (!floatTypes.has(d)) fail(`expected a float tensor, got ${d}`);
  for (const x of inputs) if (x.dtype !== d) fail(`dtype mismatch: ${inputs.map((i) => i.dtype).join(' vs ')}`);
  return d;
}

function binary(inputs: readonly Operand[], outType?: DType): Inferred {
  const [a, b] = inputs as [Operand, Operand];
  if (a.dtype !== b.dtype) fail(`dtype mismatch: ${a.dtype} vs ${b.dtype}`);
  const shape = broadcastShapes(a.shape, b.shape);
  if (!shape) fail(`shapes ${formatShape(a.shape)} and ${formatShape(b.shape)} do not broadcast`);
  return { shape: shape!, dtype: outType ?? a.dtype };
}

const floatBinary: OpDef = { arity: 2, infer: (i) => (sameFloat(i), binary(i)) };
const floatUnary: OpDef = { arity: 1, infer: (i) => ({ shape: i[0]!.shape, dtype: sameFloat(i) }) };
const compare: OpDef = { arity: 2, infer: (i) => binary(i, 'bool') };

function reduce(inputs: readonly Operand[], attrs: Attrs): Inferred {
  const x = inputs[0]!;
  const axes = attrInts(attrs, 'axes').map((a) => normAxis(a, x.shape.length));
  const keep = attrNum(attrs, 'keepdims') === 1;
  const shape: Dim[] = [];
  x.shape.forEach((d, i) => {
    if (!axes.includes(i)) shape.push(d);
    else if (keep) shape.push(1);
  });
  return { shape, dtype: x.dtype };
}

export const opDefs = {
  /** A graph input (attrs.name). */
  input: { arity: 0, infer: () => fail('input nodes are created by Graph.input') },
  /** A constant tensor (attrs.value, attrs.shape). */
  constant: { arity: 0, infer: () => fail('constants are created by Graph.constant') },

  add: floatBinary,
  sub: floatBinary,
  mul: floatBinary,
  div: floatBinary,
  min: floatBinary,
  max: floatBinary,
  neg: floatUnary,
  exp: floatUnary,
  log: floatUnary,
  sqrt: floatUnary,
  reciprocal: floatUnary,
  sigmoid: floatUnary,
  tanh: floatUnary,
  cos: floatUnary,
  sin: floatUnary,

  /** ONNX MatMul semantics: batched over leading dims with broadcasting; both ranks ≥ 2. */
  matmul: {
    arity: 2,
    infer: (inputs) => {
      const dtype = sameFloat(inputs);
      const [a, b] = inputs as [Operand, Operand];
      if (a.shape.length < 2 || b.shape.length < 2) fail(`matmul needs rank ≥ 2, got ${formatShape(a.shape)} @ ${formatShape(b.shape)}`);
      const m = a.shape[a.shape.length - 2]!;
      const k1 = a.shape[a.shape.length - 1]!;
      const k2 = b.shape[b.shape.length - 2]!;
      const n = b.shape[b.shape.length - 1]!;
      if (k1 !== k2) fail(`matmul inner dims differ: ${formatShape(a.shape)} @ ${formatShape(b.shape)}`);
      const batch = broadcastShapes(a.shape.slice(0, -2), b.shape.slice(0, -2));
      if (!batch) fail(`matmul batch dims do not broadcast: ${formatShape(a.shape)} @ ${formatShape(b.shape)}`);
      return { shape: [...batch!, m, n], dtype };
    },
  },

  transpose: {
    arity: 1,
    infer: (inputs, attrs) => {
      const x = inputs[0]!;
      const perm = attrInts(attrs, 'perm');
      if (perm.length !== x.shape.length || [...perm].sort().some((p, i) => p !== i)) {
        fail(`perm ${JSON.stringify(perm)} is not a permutation of rank ${x.shape.length}`);
      }
      return { shape: perm.map((p) => x.shape[p]!), dtype: x.dtype };
    },
  },

  /** Reshape to a target whose element count must provably equal the input's. */
  reshape: {
    arity: 1,
    infer: (inputs, attrs) => {
      const x = inputs[0]!;
      const target = attrDims(attrs, 'shape');
      const a = dimProduct(x.shape);
      const b = dimProduct(target);
      if (a !== b) fail(`cannot reshape ${formatShape(x.shape)} (${a} elements) to ${formatShape(target)} (${b} elements)`);
      return { shape: target, dtype: x.dtype };
    },
  },
  /** Reshape x to the run-time shape of ref (used by gradients of reshapes with symbolic dims). */
  reshapeLike: {
    arity: 2,
    infer: (inputs) => {
      const [x, ref] = inputs as [Operand, Operand];
      if (dimProduct(x.shape) !== dimProduct(ref.shape)) fail(`cannot reshape ${formatShape(x.shape)} like ${formatShape(ref.shape)}`);
      return { shape: ref.shape, dtype: x.dtype };
    },
  },
  /** Broadcast x to the run-time shape of ref. */
  expandLike: {
    arity: 2,
    infer: (inputs) => {
      const [x, ref] = inputs as [Operand, Operand];
      const s = broadcastShapes(x.shape, ref.shape);
      if (!s || s.length !== ref.shape.length || s.some((d, i) => d !== ref.shape[i])) {
        fail(`cannot expand ${formatShape(x.shape)} to ${formatShape(ref.shape)}`);
      }
      return { shape: ref.shape, dtype: x.dtype };
    },
  },
  unsqueeze: {
    arity: 1,
    infer: (inputs, attrs) => {
      const x = inputs[0]!;
      const rank = x.shape.length + attrInts(attrs, 'axes').length;
      const axes = attrInts(attrs, 'axes').map((a) => normAxis(a, rank));
      const shape: Dim[] = [];
      let j = 0;
      for (let i = 0; i < rank; i++) shape.push(axes.includes(i) ? 1 : x.shape[j++]!);
      return { shape, dtype: x.dtype };
    },
  },
  squeeze: {
    arity: 1,
    infer: (inputs, attrs) => {
      const x = inputs[0]!;
      const axes = attrInts(attrs, 'axes').map((a) => normAxis(a, x.shape.length));
      for (const a of axes) if (x.shape[a] !== 1) fail(`cannot squeeze axis ${a} of size ${x.shape[a]} in ${formatShape(x.shape)}`);
      return { shape: x.shape.filter((_, i) => !axes.includes(i)), dtype: x.dtype };
    },
  },
  /**
   * RMSNorm over the last axis, `x / sqrt(mean(x², -1) + eps) * w` (attrs.eps). A primitive, like
   * softmax, because ONNX Runtime runs it as one fused kernel (SimplifiedLayerNormalization) where
   * the decomposition costs seven; its definition from primitives is `rmsNormReference` in
   * composite.ts, and its gradient rule is written from primitives.
   */
  rmsNorm: {
    arity: 2,
    infer: (i, a) => {
      const [x, w] = i as [Operand, Operand];
      const dtype = sameFloat(i);
      attrNum(a, 'eps');
      const C = x.shape[x.shape.length - 1];
      if (w.shape.length !== 1 || w.shape[0] !== C) fail(`rmsNorm weight must be [${String(C)}] for input ${formatShape(x.shape)}, got ${formatShape(w.shape)}`);
      return { shape: x.shape, dtype };
    },
  },
  reduceSum: { arity: 1, infer: (i, a) => (sameFloat(i), reduce(i, a)) },
  reduceMax: { arity: 1, infer: (i, a) => (sameFloat(i), reduce(i, a)) },
  softmax: {
    arity: 1,
    infer: (i, a) => (normAxis(attrNum(a, 'axis'), i[0]!.shape.length), { shape: i[0]!.shape, dtype: sameFloat(i) }),
  },
  logSoftmax: {
    arity: 1,
    infer: (i, a) => (normAxis(attrNum(a, 'axis'), i[0]!.shape.length), { shape: i[0]!.shape, dtype: sameFloat(i) }),
  },
  concat: {
    arity: -1,
    infer: (inputs, attrs) => {
      const first = inputs[0];
      if (!first) return fail('concat needs at least one input');
      const axis = normAxis(attrNum(attrs, 'axis'), first.shape.length);
      let total: Dim = 0;
      for (const x of inputs) {
        if (x.dtype !== first.dtype) fail(`concat dtype mismatch: ${x.dtype} vs ${first.dtype}`);
        if (x.shape.length !== first.shape.length || x.shape.some((d, i) => i !== axis && d !== first.shape[i])) {
          fail(`concat shapes differ off axis ${axis}: ${inputs.map((i) => formatShape(i.shape)).join(', ')}`);
        }
        total = dimAdd(total, x.shape[axis]!);
      }
      return { shape: first.shape.map((d, i) => (i === axis ? total : d)), dtype: first.dtype };
    },
  },
  /** ONNX Gather: out = data indexed along axis by indices (int64); shape = data[:axis] + indices + data[axis+1:]. */
  gather: {
    arity: 2,
    infer: (inputs, attrs) => {
      const [data, idx] = inputs as [Operand, Operand];
      if (idx.dtype !== 'int64') fail(`gather indices must be int64, got ${idx.dtype}`);
      const axis = normAxis(attrNum(attrs, 'axis'), data.shape.length);
      return { shape: [...data.shape.slice(0, axis), ...idx.shape, ...data.shape.slice(axis + 1)], dtype: data.dtype };
    },
  },
  /**
   * ONNX GatherElements: out[i][j]… = data[…][indices[i][j]…][…] along `axis`; indices (int64) have
   * data's rank and give the output's shape. Picks one log-prob per row without a one-hot.
   */
  gatherElements: {
    arity: 2,
    infer: (inputs, attrs) => {
      const [data, idx] = inputs as [Operand, Operand];
      if (idx.dtype !== 'int64') fail(`gatherElements indices must be int64, got ${idx.dtype}`);
      if (idx.shape.length !== data.shape.length) fail(`gatherElements indices ${formatShape(idx.shape)} must have the rank of data ${formatShape(data.shape)}`);
      normAxis(attrNum(attrs, 'axis'), data.shape.length);
      return { shape: idx.shape, dtype: data.dtype };
    },
  },
  /**
   * ONNX ScatterElements with reduction 'add': a copy of data with each updates[i][j]… added at
   * the position indices[i][j]… names along `axis` (repeated indices accumulate). Gradient of
   * gather and gatherElements. ONNX Runtime's CPU kernel applies the updates in one serial loop,
   * so repeated indices sum in a fixed order: unlike ScatterND(add), whose threaded kernel gave
   * wrong sums with 2 threads in ORT 1.30 (measured in the project's feasibility probe, 2026-11-21).
   */
  scatterAdd: {
    arity: 3,
    infer: (inputs, attrs) => {
      const [data, idx, upd] = inputs as [Operand, Operand, Operand];
      if (!floatTypes.has(data.dtype) || upd.dtype !== data.dtype) fail(`scatterAdd needs float data and updates of one dtype, got ${data.dtype} and ${upd.dtype}`);
      if (idx.dtype !== 'int64') fail(`scatterAdd indices must be int64, got ${idx.dtype}`);
      if (formatShape(idx.shape) !== formatShape(upd.shape)) fail(`scatterAdd indices ${formatShape(idx.shape)} and updates ${formatShape(upd.shape)} differ`);
      if (idx.shape.length !== data.shape.length) fail(`scatterAdd indices ${formatShape(idx.shape)} must have the rank of data ${formatShape(data.shape)}`);
      normAxis(attrNum(attrs, 'axis'), data.shape.length);
      return { shape: data.shape, dtype: data.dtype };
    },
  },
  /** Static slice along one axis: elements [start, end) (end may exceed the size: clamp, as ONNX). */
  slice: {
    arity: 1,
    infer: (inputs, attrs) => {
      const x = inputs[0]!;
      const axis = normAxis(attrNum(attrs, 'axis'), x.shape.length);
      const size = x.shape[axis]!;
      const start = attrNum(attrs, 'start');
      const end = attrNum(attrs, 'end');
      if (typeof size !== 'number') return fail(`slice needs a static size on axis ${axis}, got '${size}'`);
      if (!(0 <= start && start <= end && end <= size)) fail(`slice [${start}, ${end}) out of range for size ${size}`);
      return { shape: x.shape.map((d, i) => (i === axis ? end - start : d)), dtype: x.dtype };
    },
  },
  /** Zero padding along one axis: `before` zeros, then x, then `after` zeros. */
  pad: {
    arity: 1,
    infer: (inputs, attrs) => {
      const x = inputs[0]!;
      const axis = normAxis(attrNum(attrs, 'axis'), x.shape.length);
      const before = attrNum(attrs, 'before');
      const after = attrNum(attrs, 'after');
      if (before < 0 || after < 0) fail(`negative padding ${before}/${after}`);
      return { shape: x.shape.map((d, i) => (i === axis ? dimAdd(dimAdd(before, d), after) : d)), dtype: x.dtype };
    },
  },
  where: {
    arity: 3,
    infer: (inputs) => {
      const [c, a, b] = inputs as [Operand, Operand, Operand];
      if (c.dtype !== 'bool') fail(`where condition must be bool, got ${c.dtype}`);
      const ab = binary([a, b]);
      const s = broadcastShapes(c.shape, ab.shape);
      if (!s) fail(`where condition ${formatShape(c.shape)} does not broadcast with ${formatShape(ab.shape)}`);
      return { shape: s!, dtype: ab.dtype };
    },
  },
  equal: compare,
  less: compare,
  greater: compare,
  and: {
    arity: 2,
    infer: (i) => (i.some((x) => x.dtype !== 'bool') ? fail('and needs bool inputs') : binary(i, 'bool')),
  },
  cast: {
    arity: 1,
    infer: (inputs, attrs) => {
      const to = attrs['to'];
      if (to !== 'float16' && to !== 'float32' && to !== 'float64' && to !== 'int64' && to !== 'int32' && to !== 'bool') return fail(`cast target ${String(to)} unknown`);
      return { shape: inputs[0]!.shape, dtype: to };
    },
  },
  /** Identity in the forward pass, zero gradient: values treated as constants by autodiff. */
  stopGradient: { arity: 1, infer: (i) => ({ shape: i[0]!.shape, dtype: i[0]!.dtype }) },
  ...contribOpDefs,
} as const satisfies Record<string, OpDef>;

export type Op = keyof typeof opDefs;
