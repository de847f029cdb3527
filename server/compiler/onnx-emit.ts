/**
 * Deterministic ONNX emission: IR nodes → ModelProto bytes (opset 17, IR version 8).
 *
 * Names are stable: graph inputs keep their declared names, outputs the names the caller gives,
 * intermediates are numbered by their position in a topological order that depends only on the
 * graph's structure, and constants become initializers numbered the same way. The same graph
 * therefore always gives the same bytes, and a diff of two emissions is a diff of two graphs.
 */
import { formatShape, type Dim, type Shape } from './dims.ts';
import { float16Bytes } from './float16.ts';
import { GraphError, describe, topoSort, type Node } from './ir.ts';
import { attrInts, normAxis, type DType, type Op } from './ops.ts';
import { ProtoWriter } from './protobuf-writer.ts';
import { verify } from './verify.ts';

export const OPSET = 17;
const IR_VERSION = 8;

const onnxType: Record<DType, number> = { float32: 1, uint8: 2, int32: 6, int64: 7, bool: 9, float16: 10, float64: 11 };
const bytesPer: Record<DType, number> = { float16: 2, float32: 4, uint8: 1, int32: 4, int64: 8, bool: 1, float64: 8 };
/** ONNX Runtime's contrib-op domain (`contrib-ops.ts`), imported at version 1 when used. */
const MS_DOMAIN = 'com.microsoft';

interface OnnxNode {
  opType: string;
  /** Operator set domain; absent: the default ONNX domain. */
  domain?: string;
  inputs: string[];
  outputs: string[];
  attrs: Array<[string, number | number[] | 'ints' | { float: number } | { string: string }]>;
}

interface Initializer {
  name: string;
  dtype: DType;
  dims: number[];
  values: readonly number[];
}

interface Emitter {
  /** Name of an emitted value. */
  name(n: Node): string;
  /** Name of an int64 initializer holding `values` (deduplicated). */
  ints(values: readonly number[], dims?: number[]): string;
  /** Name of Shape(n), emitted once per node. */
  shapeOf(n: Node): string;
  /** Name of the int64 [k] tensor of the refs' last dims (Shape + Concat), emitted once per ref list. */
  lastDimsOf(refs: readonly Node[]): string;
  /** Name of the int64 tensor of n's dims but the last, then `last` (Shape + Concat), emitted once per pair. */
  leadingDimsAnd(n: Node, last: number): string;
  push(node: OnnxNode): void;
}

type Lower = (n: Node, e: Emitter, out: string) => void;

const simple = (opType: string): Lower => (n, e, out) => e.push({ opType, inputs: n.inputs.map((i) => e.name(i)), outputs: [out], attrs: [] });

/** ONNX Reshape target: known sizes, 0 = "same as input dim i", -1 = "the rest" (at most one). */
function reshapeCodes(n: Node): number[] {
  const src = n.inputs[0]!.shape;
  const codes = n.shape.map((d: Dim, i) => (typeof d === 'number' ? d : d === src[i] ? 0 : -1));
  if (codes.filter((c) => c === -1).length > 1 || codes.some((c, i) => c === 0 && n.shape[i] !== src[i])) {
    throw new GraphError(
      `reshape ${describe(n)} from ${formatShape(src)} cannot be expressed statically (several unknown dims); use reshapeLike`,
      'reshape',
      n.id,
    );
  }
  return codes;
}

const lowerings = {
  input: () => {},
  constant: () => {},
  add: simple('Add'),
  sub: simple('Sub'),
  mul: simple('Mul'),
  div: simple('Div'),
  min: simple('Min'),
  max: simple('Max'),
  neg: simple('Neg'),
  exp: simple('Exp'),
  log: simple('Log'),
  sqrt: simple('Sqrt'),
  reciprocal: simple('Reciprocal'),
  sigmoid: simple('Sigmoid'),
  tanh: simple('Tanh'),
  cos: simple('Cos'),
  sin: simple('Sin'),
  matmul: simple('MatMul'),
  transpose: (n, e, out) => e.push({ opType: 'Transpose', inputs: [e.name(n.inputs[0]!)], outputs: [out], attrs: [['perm', attrInts(n.attrs, 'perm')]] }),
  reshape: (n, e, out) => e.push({ opType: 'Reshape', inputs: [e.name(n.inputs[0]!), e.ints(reshapeCodes(n))], outputs: [out], attrs: [] }),
  reshapeLike: (n, e, out) => e.push({ opType: 'Reshape', inputs: [e.name(n.inputs[0]!), e.shapeOf(n.inputs[1]!)], outputs: [out], attrs: [] }),
  expandLike: (n, e, out) => e.push({ opType: 'Expand', inputs: [e.name(n.inputs[0]!), e.shapeOf(n.inputs[1]!)], outputs: [out], attrs: [] }),
  unsqueeze: (n, e, out) => e.push({ opType: 'Unsqueeze', inputs: [e.name(n.inputs[0]!), e.ints(attrInts(n.attrs, 'axes'))], outputs: [out], attrs: [] }),
  squeeze: (n, e, out) => e.push({ opType: 'Squeeze', inputs: [e.name(n.inputs[0]!), e.ints(attrInts(n.attrs, 'axes'))], outputs: [out], attrs: [] }),
  // ONNX Runtime's fused RMSNorm (an ORT op in the default domain; opset 17 has no RMSNormalization).
  rmsNorm: (n, e, out) =>
    e.push({ opType: 'SimplifiedLayerNormalization', inputs: n.inputs.map((i) => e.name(i)), outputs: [out], attrs: [['axis', -1], ['epsilon', { float: n.attrs['eps'] as number }]] }),
  reduceSum: (n, e, out) =>
    e.push({ opType: 'ReduceSum', inputs: [e.name(n.inputs[0]!), e.ints(attrInts(n.attrs, 'axes'))], outputs: [out], attrs: [['keepdims', n.attrs['keepdims'] as number]] }),
  // Opset 17 ReduceMax still takes axes as an attribute (it moved to an input in opset 18).
  reduceMax: (n, e, out) =>
    e.push({ opType: 'ReduceMax', inputs: [e.name(n.inputs[0]!)], outputs: [out], attrs: [['axes', attrInts(n.attrs, 'axes')], ['keepdims', n.attrs['keepdims'] as number]] }),
  softmax: (n, e, out) => e.push({ opType: 'Softmax', inputs: [e.name(n.inputs[0]!)], outputs: [out], attrs: [['axis', n.attrs['axis'] as number]] }),
  logSoftmax: (n, e, out) => e.push({ opType: 'LogSoftmax', inputs: [e.name(n.inputs[0]!)], outputs: [out], attrs: [['axis', n.attrs['axis'] as number]] }),
  concat: (n, e, out) => e.push({ opType: 'Concat', inputs: n.inputs.map((i) => e.name(i)), outputs: [out], attrs: [['axis', n.attrs['axis'] as number]] }),
  slice: (n, e, out) =>
    e.push({
      opType: 'Slice',
      inputs: [e.name(n.inputs[0]!), e.ints([n.attrs['start'] as number]), e.ints([n.attrs['end'] as number]), e.ints([n.attrs['axis'] as number])],
      outputs: [out],
      attrs: [],
    }),
  pad: (n, e, out) => {
    const rank = n.shape.length;
    const axis = normAxis(n.attrs['axis'] as number, rank);
    const pads = new Array<number>(2 * rank).fill(0);
    pads[axis] = n.attrs['before'] as number;
    pads[rank + axis] = n.attrs['after'] as number;
    e.push({ opType: 'Pad', inputs: [e.name(n.inputs[0]!), e.ints(pads)], outputs: [out], attrs: [] });
  },
  gather: (n, e, out) => e.push({ opType: 'Gather', inputs: n.inputs.map((i) => e.name(i)), outputs: [out], attrs: [['axis', n.attrs['axis'] as number]] }),
  gatherElements: (n, e, out) => e.push({ opType: 'GatherElements', inputs: n.inputs.map((i) => e.name(i)), outputs: [out], attrs: [['axis', n.attrs['axis'] as number]] }),
  scatterAdd: (n, e, out) =>
    e.push({ opType: 'ScatterElements', inputs: n.inputs.map((i) => e.name(i)), outputs: [out], attrs: [['axis', n.attrs['axis'] as number], ['reduction', { string: 'add' }]] }),
  where: simple('Where'),
  equal: simple('Equal'),
  less: simple('Less'),
  greater: simple('Greater'),
  and: simple('And'),
  cast: (n, e, out) => e.push({ opType: 'Cast', inputs: [e.name(n.inputs[0]!)], outputs: [out], attrs: [['to', onnxType[n.dtype]]] }),
  stopGradient: simple('Identity'),
  matMulNBits: (n, e, out) => {
    const [x, q] = n.inputs as [Node, Node];
    const attrs: OnnxNode['attrs'] = [
      ['K', x.shape[x.shape.length - 1] as number],
      ['N', q.shape[0] as number],
      ['bits', n.attrs['bits'] as number],
      ['block_size', n.attrs['blockSize'] as number],
      ['accuracy_level', n.attrs['accuracyLevel'] as number],
    ];
    e.push({ opType: 'MatMulNBits', domain: MS_DOMAIN, inputs: n.inputs.map((i) => e.name(i)), outputs: [out], attrs });
  },
  // Tuple nodes name their outputs `{out}.{i}`, which is what `select` reads (see emitOnnx).
  // SkipSimplifiedLayerNormalization's outputs are (normed, mean, inv_std_var, input+skip).
  skipRmsNorm: (n, e, out) =>
    e.push({ opType: 'SkipSimplifiedLayerNormalization', domain: MS_DOMAIN, inputs: n.inputs.map((i) => e.name(i)), outputs: [`${out}.0`, '', '', `${out}.1`], attrs: [['epsilon', { float: n.attrs['eps'] as number }]] }),
  rotaryEmbedding: (n, e, out) =>
    e.push({ opType: 'RotaryEmbedding', domain: MS_DOMAIN, inputs: n.inputs.map((i) => e.name(i)), outputs: [out], attrs: [['num_heads', n.attrs['numHeads'] as number], ['interleaved', 0]] }),
  splitLike: (n, e, out) =>
    e.push({
      opType: 'Split',
      inputs: [e.name(n.inputs[0]!), e.lastDimsOf(n.inputs.slice(1))],
      outputs: n.inputs.slice(1).map((_, i) => `${out}.${i}`),
      attrs: [['axis', n.attrs['axis'] as number]],
    }),
  select: () => {},
} satisfies Record<Op, Lower>;

function encodeTensorData(dtype: DType, values: readonly number[]): Uint8Array {
  const n = values.length;
  switch (dtype) {
    case 'float16':
      return float16Bytes(values);
    case 'float32':
      return new Uint8Array(Float32Array.from(values).buffer);
    case 'float64':
      return new Uint8Array(Float64Array.from(values).buffer);
    case 'int64':
      return new Uint8Array(BigInt64Array.from(values, (v) => BigInt(v)).buffer);
    case 'int32':
      return new Uint8Array(Int32Array.from(values).buffer);
    case 'uint8':
      return Uint8Array.from(values);
    case 'bool':
      return Uint8Array.from(values, (v) => (v ? 1 : 0)).subarray(0, n);
  }
}

function writeValueInfo(w: ProtoWriter, name: string, dtype: DType, shape: Shape | null): void {
  w.string(1, name);
  w.message(2, (type) =>
    type.message(1, (tensor) => {
      tensor.varint(1, onnxType[dtype]);
      if (shape) {
        tensor.message(2, (s) => {
          for (const d of shape) {
            s.message(1, (dim) => {
              if (typeof d === 'number') dim.varint(1, d);
              // Simple symbols become named dims; derived ones (B*T, P+T) are left unnamed.
              else if (/^[A-Za-z_]\w*$/.test(d)) dim.string(2, d);
            });
          }
        });
      }
    }),
  );
}

export interface EmitOptions {
  /** Graph name written into the model. */
  readonly name: string;
  /** Free text stored as the model's doc string (e.g. the model config). */
  readonly doc?: string;
  /**
   * Raw little-endian data of graph inputs to bake in as initializers instead (by input name).
   * ONNX Runtime prepacks constant weights at session creation, which some kernels need for
   * their fast path (MatMulNBits dequantizes a non-constant B on every call). A float16 input
   * takes binary16 bytes (`float16Bytes` in float16.ts).
   */
  readonly initializers?: ReadonlyMap<string, Uint8Array>;
  /**
   * How `logSoftmax` is lowered: 'fused' (default) is ONNX's LogSoftmax; 'primitives' is
   * x − max − log Σ exp(x − max) in six nodes (as `logSoftmaxReference`). ONNX Runtime's WebGPU
   * provider has no LogSoftmax kernel and would run it on the CPU, copying the [N,V] logits to
   * the host and the log-probs back within every call; the primitives all run on the GPU.
   */
  readonly logSoftmax?: 'fused' | 'primitives';
  /**
   * How `scatterAdd` is lowered: 'scatter' (default) is ScatterElements(add). 'select' turns a
   * scatterAdd whose indices have extent 1 along its axis (one position picked per row: the
   * gradient of the log-prob pick, `gatherElements`) into a comparison of the indices with the
   * axis's positions and a Where, and keeps ScatterElements for the rest. ONNX Runtime's WebGPU
   * ScatterElements(add) writes through atomics, which failed on an H100 once the output
   * ([4096, 151936] fp32, 2.5 GB) no longer fit one storage-buffer binding; Equal and Where are
   * plain elementwise kernels that run on tensors of any size.
   */
  readonly scatterAdd?: 'scatter' | 'select';
  /**
   * How a MatMul by a transposed matrix, `matmul(x, transpose(W, [1, 0]))` (every `linear`: W is
   * stored [out, in] as in PyTorch), is lowered: 'transpose' (default) emits the Transpose and the
   * MatMul; ONNX Runtime's CPU provider fuses them (FusedMatMul) or folds the Transpose of a
   * baked weight. 'gemm' emits Gemm(x, W, transB = 1), with x viewed as 2-D ([-1, in], two
   * Reshapes, which alias their input) when its rank is higher, and leaves out the Transpose when
   * nothing else reads it. ONNX Runtime's WebGPU provider does neither fusion: with the weights
   * as graph inputs it transposed every weight on every run (625 Transposes a decode step at
   * Qwen2.5-0.5B's shapes, 18% of the step's GPU time and a third of its host dispatch time on an
   * H200: docs/gpu-vs-pytorch.md).
   */
  readonly transposedMatMul?: 'transpose' | 'gemm';
  /**
   * Give an output computed by a node its public name on that node instead of through an
   * Identity (which copies the value on every run): the first output naming each such value. Off
   * by default; the fused decode graph sets it (2L + 1 fewer kernels a step).
   */
  readonly outputsInPlace?: boolean;
}

/** logSoftmax as ReduceMax, Sub, Exp, ReduceSum, Log, Sub (see EmitOptions.logSoftmax). */
const logSoftmaxFromPrimitives: Lower = (n, e, out) => {
  const x = e.name(n.inputs[0]!);
  const axes = [n.attrs['axis'] as number];
  const t = (s: string) => `${out}.${s}`;
  e.push({ opType: 'ReduceMax', inputs: [x], outputs: [t('max')], attrs: [['axes', axes], ['keepdims', 1]] });
  e.push({ opType: 'Sub', inputs: [x, t('max')], outputs: [t('shifted')], attrs: [] });
  e.push({ opType: 'Exp', inputs: [t('shifted')], outputs: [t('exp')], attrs: [] });
  e.push({ opType: 'ReduceSum', inputs: [t('exp'), e.ints(axes)], outputs: [t('sum')], attrs: [['keepdims', 1]] });
  e.push({ opType: 'Log', inputs: [t('sum')], outputs: [t('logsum')], attrs: [] });
  e.push({ opType: 'Sub', inputs: [t('shifted'), t('logsum')], outputs: [out], attrs: [] });
};

/** True when x is a scalar 0 constant broadcast by expandLike (the zeros a gradient scatters into). */
function isZerosExpand(x: Node): boolean {
  const src = x.op === 'expandLike' ? x.inputs[0]! : x;
  return src.op === 'constant' && (src.attrs['value'] as number[]).every((v) => v === 0);
}

/**
 * scatterAdd as a select (see EmitOptions.scatterAdd): with indices of extent 1 along the axis,
 * out = Where(positions == indices, data + updates, data), the positions an int64 [1…, size, …1]
 * initializer broadcast against the indices. Into zeros (a gradient's adjoint) the Add is
 * skipped: Where(…, updates, data). Anything else is ScatterElements(add).
 */
function scatterAddLowering(n: Node): Lower {
  const [data, idx] = n.inputs as [Node, Node];
  const rank = data.shape.length;
  const axis = normAxis(n.attrs['axis'] as number, rank);
  const size = data.shape[axis];
  if (idx.shape[axis] !== 1 || typeof size !== 'number') return lowerings.scatterAdd;
  return (_, e, out) => {
    const dims = data.shape.map((_, i) => (i === axis ? size : 1));
    const positions = e.ints(Array.from({ length: size }, (_, i) => i), dims);
    const [d, i, u] = n.inputs.map((x) => e.name(x)) as [string, string, string];
    e.push({ opType: 'Equal', inputs: [positions, i], outputs: [`${out}.hit`], attrs: [] });
    if (isZerosExpand(data)) {
      e.push({ opType: 'Where', inputs: [`${out}.hit`, u, d], outputs: [out], attrs: [] });
      return;
    }
    e.push({ opType: 'Add', inputs: [d, u], outputs: [`${out}.sum`], attrs: [] });
    e.push({ opType: 'Where', inputs: [`${out}.hit`, `${out}.sum`, d], outputs: [out], attrs: [] });
  };
}

/** W of `transpose(W, [1, 0])` with W of rank 2, else null. */
function transposedMatrix(t: Node): Node | null {
  if (t.op !== 'transpose' || t.inputs[0]!.shape.length !== 2) return null;
  const perm = attrInts(t.attrs, 'perm');
  return perm[0] === 1 && perm[1] === 0 ? t.inputs[0]! : null;
}

/**
 * For `transposedMatMul: 'gemm'`: the MatMuls to lower as Gemm (their right operand the transpose
 * of a matrix of known size) and the Transposes no other node or output reads.
 */
function gemmPlan(order: readonly Node[], outputs: ReadonlyArray<readonly [string, Node]>): { matmuls: Set<number>; skipped: Set<number> } {
  const matmuls = new Set<number>();
  const readers = new Map<number, number>();
  const gemmReaders = new Map<number, number>();
  for (const n of order) {
    for (const i of n.inputs) readers.set(i.id, (readers.get(i.id) ?? 0) + 1);
    const t = n.op === 'matmul' ? n.inputs[1]! : null;
    const w = t ? transposedMatrix(t) : null;
    if (t && w && typeof w.shape[0] === 'number' && typeof w.shape[1] === 'number' && n.inputs[0]!.shape.length >= 2) {
      matmuls.add(n.id);
      gemmReaders.set(t.id, (gemmReaders.get(t.id) ?? 0) + 1);
    }
  }
  for (const [, n] of outputs) readers.set(n.id, (readers.get(n.id) ?? 0) + 1);
  const skipped = new Set([...gemmReaders].filter(([id, k]) => readers.get(id) === k).map(([id]) => id));
  return { matmuls, skipped };
}

/** matmul(x, transpose(W)) as Gemm(x, W, transB = 1) on x viewed as [-1, in]. */
const gemmLowering: Lower = (n, e, out) => {
  const [x, t] = n.inputs as [Node, Node];
  const w = transposedMatrix(t)!;
  const [rows, cols] = w.shape as [number, number];
  const gemm = (a: string, y: string) => e.push({ opType: 'Gemm', inputs: [a, e.name(w)], outputs: [y], attrs: [['transB', 1]] });
  if (x.shape.length === 2) return gemm(e.name(x), out);
  e.push({ opType: 'Reshape', inputs: [e.name(x), e.ints([-1, cols])], outputs: [`${out}.x2`], attrs: [] });
  gemm(`${out}.x2`, `${out}.y2`);
  // Back to x's leading dims and W's rows: static where known, else from x's shape at run time.
  const target = n.shape.every((d) => typeof d === 'number') ? e.ints(n.shape as number[]) : e.leadingDimsAnd(x, rows);
  e.push({ opType: 'Reshape', inputs: [`${out}.y2`, target], outputs: [out], attrs: [] });
};

/** Emits an ONNX model computing `outputs` (pairs of output name and node). */
export function emitOnnx(outputs: ReadonlyArray<readonly [string, Node]>, options: EmitOptions): Uint8Array {
  verify(outputs);
  const order = topoSort(outputs.map(([, n]) => n));
  const names = new Map<number, string>();
  const nodes: OnnxNode[] = [];
  const inits: Initializer[] = [];
  const intsCache = new Map<string, string>();
  const shapeCache = new Map<number, string>();
  const lastDimsCache = new Map<string, string>();

  const baked = options.initializers ?? new Map<string, Uint8Array>();
  const declared = order.filter((n) => n.op === 'input').sort((a, b) => String(a.attrs['name']).localeCompare(String(b.attrs['name'])));
  for (const n of declared) names.set(n.id, String(n.attrs['name']));
  const inputs = declared.filter((n) => !baked.has(String(n.attrs['name'])));
  const rawInits: Array<{ node: Node; data: Uint8Array }> = [];
  for (const [name, data] of baked) {
    const node = declared.find((n) => n.attrs['name'] === name);
    if (!node) throw new GraphError(`initializer '${name}' is not an input of the graph`, 'input', null);
    if (!node.shape.every((d) => typeof d === 'number')) throw new GraphError(`initializer '${name}' needs a static shape, got ${formatShape(node.shape)}`, 'input', node.id);
    const want = (node.shape as number[]).reduce((a, b) => a * b, 1) * bytesPer[node.dtype];
    if (data.length !== want) throw new GraphError(`initializer '${name}' ${node.dtype}${formatShape(node.shape)} needs ${want} bytes, got ${data.length}`, 'input', node.id);
    rawInits.push({ node, data });
  }
  order.forEach((n, i) => {
    if (n.op === 'select') {
      // A tuple's outputs are named by its lowering; select only refers to them.
      names.set(n.id, `${names.get(n.inputs[0]!.id)!}.${n.attrs['index'] as number}`);
    } else if (n.op === 'constant') {
      const name = `const.${i}`;
      names.set(n.id, name);
      inits.push({ name, dtype: n.dtype, dims: n.shape as number[], values: n.attrs['value'] as number[] });
    } else if (n.op !== 'input') {
      names.set(n.id, `t.${i}`);
    }
  });

  const e: Emitter = {
    name: (n) => {
      const s = names.get(n.id);
      if (s === undefined) throw new GraphError(`emission reached unnamed ${describe(n)}`, n.op, n.id);
      return s;
    },
    ints: (values, dims) => {
      const key = `${(dims ?? [values.length]).join('x')}:${values.join(',')}`;
      let name = intsCache.get(key);
      if (!name) {
        name = `ints.${intsCache.size}`;
        intsCache.set(key, name);
        inits.push({ name, dtype: 'int64', dims: dims ?? [values.length], values });
      }
      return name;
    },
    shapeOf: (n) => {
      let name = shapeCache.get(n.id);
      if (!name) {
        name = `shape.${e.name(n)}`;
        shapeCache.set(n.id, name);
        nodes.push({ opType: 'Shape', inputs: [e.name(n)], outputs: [name], attrs: [] });
      }
      return name;
    },
    lastDimsOf: (refs) => {
      const key = `lastdims.${refs.map((r) => e.name(r)).join('|')}`;
      let name = lastDimsCache.get(key);
      if (!name) {
        const dims = refs.map((r) => {
          const d = `lastdim.${e.name(r)}`;
          if (!lastDimsCache.has(d)) {
            lastDimsCache.set(d, d);
            nodes.push({ opType: 'Shape', inputs: [e.name(r)], outputs: [d], attrs: [['start', -1]] });
          }
          return d;
        });
        name = key;
        lastDimsCache.set(key, name);
        nodes.push({ opType: 'Concat', inputs: dims, outputs: [name], attrs: [['axis', 0]] });
      }
      return name;
    },
    leadingDimsAnd: (n, last) => {
      const key = `leading.${e.name(n)}.${last}`;
      let name = lastDimsCache.get(key);
      if (!name) {
        const lead = `leadingdims.${e.name(n)}`;
        if (!lastDimsCache.has(lead)) {
          lastDimsCache.set(lead, lead);
          nodes.push({ opType: 'Shape', inputs: [e.name(n)], outputs: [lead], attrs: [['end', -1]] });
        }
        name = key;
        lastDimsCache.set(key, name);
        nodes.push({ opType: 'Concat', inputs: [lead, e.ints([last])], outputs: [name], attrs: [['axis', 0]] });
      }
      return name;
    },
    push: (node) => nodes.push(node),
  };

  const gemms = options.transposedMatMul === 'gemm' ? gemmPlan(order, outputs) : { matmuls: new Set<number>(), skipped: new Set<number>() };
  for (const n of order) {
    if (n.op === 'input' || n.op === 'constant' || n.op === 'select' || gemms.skipped.has(n.id)) continue;
    const lower: Lower = gemms.matmuls.has(n.id)
      ? gemmLowering
      : n.op === 'logSoftmax' && options.logSoftmax === 'primitives'
        ? logSoftmaxFromPrimitives
        : n.op === 'scatterAdd' && options.scatterAdd === 'select'
          ? scatterAddLowering(n)
          : lowerings[n.op];
    lower(n, e, e.name(n));
  }
  // Outputs get their public names through Identity nodes: a value may be exposed under several
  // names, or be an input or constant itself, and internal names must stay structural.
  const seen = new Set<string>();
  const renamed = new Map<string, string>();
  for (const [name, n] of outputs) {
    if (seen.has(name)) throw new GraphError(`duplicate output name '${name}'`, n.op, n.id);
    seen.add(name);
    const value = e.name(n);
    if (options.outputsInPlace && n.op !== 'input' && n.op !== 'constant' && !renamed.has(value)) renamed.set(value, name);
    else nodes.push({ opType: 'Identity', inputs: [renamed.get(value) ?? value], outputs: [name], attrs: [] });
  }
  if (renamed.size) {
    const rename = (x: string) => renamed.get(x) ?? x;
    nodes.forEach((node, i) => (nodes[i] = { ...node, inputs: node.inputs.map(rename), outputs: node.outputs.map(rename) }));
  }

  const w = new ProtoWriter();
  w.varint(1, IR_VERSION);
  w.string(2, 'troupe');
  w.string(3, '0.1');
  w.message(7, (g) => {
    nodes.forEach((node, i) => {
      g.message(1, (nw) => {
        for (const x of node.inputs) nw.string(1, x);
        for (const x of node.outputs) nw.string(2, x);
        nw.string(3, `n.${i}.${node.opType}`);
        nw.string(4, node.opType);
        if (node.domain) nw.string(7, node.domain);
        for (const [an, av] of node.attrs) {
          nw.message(5, (a) => {
            a.string(1, an);
            if (Array.isArray(av)) {
              for (const v of av) a.varint(8, v);
              a.varint(20, 7); // INTS
            } else if (typeof av === 'object' && 'string' in av) {
              a.string(4, av.string);
              a.varint(20, 3); // STRING
            } else if (typeof av === 'object') {
              a.float(2, av.float);
              a.varint(20, 1); // FLOAT
            } else {
              a.varint(3, av as number);
              a.varint(20, 2); // INT
            }
          });
        }
      });
    });
    g.string(2, options.name);
    for (const init of inits) {
      g.message(5, (t) => {
        for (const d of init.dims) t.varint(1, d);
        t.varint(2, onnxType[init.dtype]);
        t.string(8, init.name);
        t.bytes(9, encodeTensorData(init.dtype, init.values));
      });
    }
    for (const { node, data } of rawInits) {
      g.message(5, (t) => {
        for (const d of node.shape as number[]) t.varint(1, d);
        t.varint(2, onnxType[node.dtype]);
        t.string(8, String(node.attrs['name']));
        t.bytes(9, data);
      });
    }
    if (options.doc) g.string(10, options.doc);
    for (const n of inputs) g.message(11, (vi) => writeValueInfo(vi, String(n.attrs['name']), n.dtype, n.shape));
    for (const [name, n] of outputs) g.message(12, (vi) => writeValueInfo(vi, name, n.dtype, n.shape));
  });
  w.message(8, (o) => {
    o.string(1, '');
    o.varint(2, OPSET);
  });
  if (nodes.some((n) => n.domain === MS_DOMAIN)) {
    w.message(8, (o) => {
      o.string(1, MS_DOMAIN);
      o.varint(2, 1);
    });
  }
  return w.finish();
}
