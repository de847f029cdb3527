/**
 * The tensor IR: immutable, interned nodes built through a `Graph`.
 *
 * Interning means structurally identical expressions are one node (same op, same inputs, same
 * attributes → same object), so common subexpressions are shared for free and the gradient graph
 * reuses forward values instead of recomputing them. Nodes never change after creation; every
 * transformation (autodiff) builds new nodes in the same graph.
 *
 * Shapes may contain symbols (`dims.ts`); inference runs when a node is created, so a malformed
 * graph fails at the line that built it, with an error naming the op, the node and the shapes.
 */
import { formatShape, type Dim, type Shape } from './dims.ts';
import { tupleOps } from './contrib-ops.ts';
import { roundFloat16 } from './float16.ts';
import { opDefs, ShapeError, type AttrValue, type Attrs, type DType, type Inferred, type Op } from './ops.ts';

export interface Node {
  readonly id: number;
  readonly op: Op;
  readonly inputs: readonly Node[];
  readonly attrs: Attrs;
  readonly shape: Shape;
  readonly dtype: DType;
  /** Each output's type, on multi-output (tuple) nodes only; read them with `select`. */
  readonly outputs?: readonly Inferred[];
}

/** Error raised while building or checking a graph; names the failing node. */
export class GraphError extends Error {
  constructor(
    message: string,
    readonly op: string,
    readonly nodeId: number | null,
  ) {
    super(message);
    this.name = 'GraphError';
  }
}

export function describe(n: Node): string {
  const name = n.op === 'input' ? ` '${String(n.attrs['name'])}'` : '';
  return `%${n.id} ${n.op}${name} ${n.dtype}${formatShape(n.shape)}`;
}

function stableKey(v: AttrValue): string {
  return JSON.stringify(v);
}

// Node ids are unique across all graphs, so a walk over nodes that were (wrongly) mixed from two
// graphs still sees them as distinct and the verifier can report the clash.
let nextNodeId = 0;

export class Graph {
  private readonly nodes = new Map<string, Node>();
  private readonly inputsByName = new Map<string, Node>();
  private get nextId(): number {
    return nextNodeId;
  }
  private set nextId(v: number) {
    nextNodeId = v;
  }

  private make(op: Op, inputs: readonly Node[], attrs: Attrs, shape: Shape, dtype: DType, outputs?: readonly Inferred[]): Node {
    const base = { id: this.nextId++, op, inputs: Object.freeze([...inputs]), attrs: Object.freeze({ ...attrs }), shape: Object.freeze([...shape]), dtype };
    return Object.freeze(outputs ? { ...base, outputs: Object.freeze([...outputs]) } : base);
  }

  /** Creates (or returns the existing identical) node; runs shape inference. */
  node(op: Op, inputs: readonly Node[], attrs: Attrs = {}): Node {
    const def = opDefs[op];
    if (def.arity >= 0 && inputs.length !== def.arity) {
      throw new GraphError(`${op}: expected ${def.arity} inputs, got ${inputs.length}`, op, null);
    }
    const tuple = inputs.find((i) => tupleOps.has(i.op));
    if (tuple && op !== 'select') throw new GraphError(`${op}: input ${describe(tuple)} has several outputs; read one with select`, op, null);
    const keys = Object.keys(attrs).sort();
    const key = `${op}(${inputs.map((i) => i.id).join(',')}){${keys.map((k) => `${k}=${stableKey(attrs[k] ?? null)}`).join(';')}}`;
    const hit = this.nodes.get(key);
    if (hit) return hit;
    let inferred: Inferred;
    try {
      inferred = def.infer(inputs, attrs);
    } catch (e) {
      if (!(e instanceof ShapeError)) throw e;
      const operands = inputs.map(describe).join(', ');
      throw new GraphError(`${op} (new node %${this.nextId}) failed: ${e.message}; inputs: ${operands}; attrs: ${JSON.stringify(attrs)}`, op, this.nextId);
    }
    const n = this.make(op, inputs, attrs, inferred.shape, inferred.dtype, inferred.outputs);
    this.nodes.set(key, n);
    return n;
  }

  /** Declares a graph input. Declaring the same name twice must agree on dtype and shape. */
  input(name: string, dtype: DType, shape: Shape): Node {
    const prev = this.inputsByName.get(name);
    if (prev) {
      if (prev.dtype !== dtype || formatShape(prev.shape) !== formatShape(shape)) {
        throw new GraphError(`input '${name}' redeclared as ${dtype}${formatShape(shape)}, was ${prev.dtype}${formatShape(prev.shape)}`, 'input', prev.id);
      }
      return prev;
    }
    const n = this.make('input', [], { name }, shape, dtype);
    this.inputsByName.set(name, n);
    return n;
  }

  /** A constant tensor; values are JS numbers (int64 constants must be safe integers). */
  constant(values: readonly number[] | Float32Array | Float64Array, shape: readonly number[], dtype: DType): Node {
    const count = shape.reduce((a, b) => a * b, 1);
    if (values.length !== count) throw new GraphError(`constant of shape ${formatShape(shape)} needs ${count} values, got ${values.length}`, 'constant', null);
    // Values are stored as the dtype holds them, so interning sees equal constants as equal.
    const arr = Array.from(values, (v) => (dtype === 'float32' ? Math.fround(v) : dtype === 'float16' ? roundFloat16(v) : v));
    const key = `constant:${dtype}:${shape.join('x')}:${arr.join(',')}`;
    const hit = this.nodes.get(key);
    if (hit) return hit;
    const n = this.make('constant', [], { value: arr, shape: [...shape] }, shape, dtype);
    this.nodes.set(key, n);
    return n;
  }

  scalar(v: number, dtype: DType): Node {
    return this.constant([v], [], dtype);
  }

  /** A scalar constant with x's dtype, for mixing numbers into float expressions. */
  like(x: Node, v: number): Node {
    return this.scalar(v, x.dtype);
  }

  // --- primitive builders (thin wrappers: the op table is the source of truth) ---
  add(a: Node, b: Node): Node { return this.node('add', [a, b]); }
  sub(a: Node, b: Node): Node { return this.node('sub', [a, b]); }
  mul(a: Node, b: Node): Node { return this.node('mul', [a, b]); }
  div(a: Node, b: Node): Node { return this.node('div', [a, b]); }
  min(a: Node, b: Node): Node { return this.node('min', [a, b]); }
  max(a: Node, b: Node): Node { return this.node('max', [a, b]); }
  neg(x: Node): Node { return this.node('neg', [x]); }
  exp(x: Node): Node { return this.node('exp', [x]); }
  log(x: Node): Node { return this.node('log', [x]); }
  sqrt(x: Node): Node { return this.node('sqrt', [x]); }
  reciprocal(x: Node): Node { return this.node('reciprocal', [x]); }
  sigmoid(x: Node): Node { return this.node('sigmoid', [x]); }
  tanh(x: Node): Node { return this.node('tanh', [x]); }
  cos(x: Node): Node { return this.node('cos', [x]); }
  sin(x: Node): Node { return this.node('sin', [x]); }
  matmul(a: Node, b: Node): Node { return this.node('matmul', [a, b]); }
  transpose(x: Node, perm: readonly number[]): Node { return this.node('transpose', [x], { perm: [...perm] }); }
  reshape(x: Node, shape: readonly Dim[]): Node {
    if (shape.length === x.shape.length && shape.every((d, i) => d === x.shape[i])) return x;
    return this.node('reshape', [x], { shape: [...shape] });
  }
  reshapeLike(x: Node, ref: Node): Node {
    if (formatShape(x.shape) === formatShape(ref.shape)) return x;
    return this.node('reshapeLike', [x, ref]);
  }
  expandLike(x: Node, ref: Node): Node {
    if (formatShape(x.shape) === formatShape(ref.shape)) return x;
    return this.node('expandLike', [x, ref]);
  }
  unsqueeze(x: Node, axes: readonly number[]): Node { return this.node('unsqueeze', [x], { axes: [...axes] }); }
  squeeze(x: Node, axes: readonly number[]): Node { return this.node('squeeze', [x], { axes: [...axes] }); }
  reduceSum(x: Node, axes: readonly number[], keepdims = false): Node {
    return this.node('reduceSum', [x], { axes: [...axes], keepdims: keepdims ? 1 : 0 });
  }
  reduceMax(x: Node, axes: readonly number[], keepdims = false): Node {
    return this.node('reduceMax', [x], { axes: [...axes], keepdims: keepdims ? 1 : 0 });
  }
  rmsNorm(x: Node, w: Node, eps: number): Node { return this.node('rmsNorm', [x, w], { eps }); }
  softmax(x: Node, axis = -1): Node { return this.node('softmax', [x], { axis }); }
  logSoftmax(x: Node, axis = -1): Node { return this.node('logSoftmax', [x], { axis }); }
  concat(xs: readonly Node[], axis: number): Node { return xs.length === 1 ? xs[0]! : this.node('concat', xs, { axis }); }
  gather(data: Node, indices: Node, axis = 0): Node { return this.node('gather', [data, indices], { axis }); }
  gatherElements(data: Node, indices: Node, axis: number): Node { return this.node('gatherElements', [data, indices], { axis }); }
  scatterAdd(data: Node, indices: Node, updates: Node, axis: number): Node { return this.node('scatterAdd', [data, indices, updates], { axis }); }
  slice(x: Node, axis: number, start: number, end: number): Node { return this.node('slice', [x], { axis, start, end }); }
  pad(x: Node, axis: number, before: number, after: number): Node { return this.node('pad', [x], { axis, before, after }); }
  where(cond: Node, a: Node, b: Node): Node { return this.node('where', [cond, a, b]); }
  equal(a: Node, b: Node): Node { return this.node('equal', [a, b]); }
  less(a: Node, b: Node): Node { return this.node('less', [a, b]); }
  greater(a: Node, b: Node): Node { return this.node('greater', [a, b]); }
  and(a: Node, b: Node): Node { return this.node('and', [a, b]); }
  cast(x: Node, to: DType): Node { return x.dtype === to ? x : this.node('cast', [x], { to }); }
  stopGradient(x: Node): Node { return this.node('stopGradient', [x]); }

  // --- contrib ops (inference only; contrib-ops.ts) ---
  matMulNBits(x: Node, packed: Node, scales: Node, bits: 4 | 8, blockSize: number, accuracyLevel: number): Node {
    return this.node('matMulNBits', [x, packed, scales], { bits, blockSize, accuracyLevel });
  }
  /** (RMSNorm(x + skip)·w, x + skip). */
  skipRmsNorm(x: Node, skip: Node, w: Node, eps: number): { normed: Node; sum: Node } {
    const t = this.node('skipRmsNorm', [x, skip, w], { eps });
    return { normed: this.select(t, 0), sum: this.select(t, 1) };
  }
  /** RoPE on x [B,T,h·D] at positions [B,T] from cos/sin caches [maxPositions, D/2]. */
  rotaryEmbedding(x: Node, positions: Node, cos: Node, sin: Node, numHeads: number): Node {
    return this.node('rotaryEmbedding', [x, positions, cos, sin], { numHeads });
  }
  /** x split along `axis` into parts as long as each ref's last axis (see contrib-ops.ts). */
  splitLike(x: Node, axis: number, refs: readonly Node[]): Node[] {
    const t = this.node('splitLike', [x, ...refs], { axis });
    return refs.map((_, i) => this.select(t, i));
  }
  select(tuple: Node, index: number): Node { return this.node('select', [tuple], { index }); }
}

/** Nodes reachable from `outputs`, inputs before users (a topological order). */
export function topoSort(outputs: readonly Node[]): Node[] {
  const seen = new Set<number>();
  const order: Node[] = [];
  // Iterative DFS: transformer graphs are deep enough to make recursion risky.
  const stack: Array<[Node, number]> = [];
  for (const out of outputs) {
    if (seen.has(out.id)) continue;
    stack.push([out, 0]);
    while (stack.length) {
      const top = stack[stack.length - 1]!;
      const [n, i] = top;
      if (seen.has(n.id) && i === 0) {
        stack.pop();
        continue;
      }
      if (i < n.inputs.length) {
        top[1] = i + 1;
        const child = n.inputs[i]!;
        if (!seen.has(child.id)) stack.push([child, 0]);
      } else {
        stack.pop();
        if (!seen.has(n.id)) {
          seen.add(n.id);
          order.push(n);
        }
      }
    }
  }
  return order;
}
