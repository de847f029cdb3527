/**
 * One reverse-mode gradient rule per primitive op.
 *
 * A rule receives the forward node, the adjoint `g` of its output (same shape as the output) and
 * the graph, and returns one adjoint per input (null where the input is not differentiable: ids,
 * masks, conditions). Rules only build nodes; they never inspect values. The table is typed
 * `satisfies Record<Op, GradRule>`: an op without a rule does not compile.
 * Broadcasting is undone by `sumTo`, so every rule may compute in the broadcast shape.
 */
import { dimMul as mulDim, formatShape, type Shape } from './dims.ts';
import { GraphError, describe, type Graph, type Node } from './ir.ts';
import { attrInts, floatTypes, normAxis, type Op } from './ops.ts';

export interface GradContext {
  readonly node: Node;
  readonly g: Node;
  readonly b: Graph;
}
export type GradRule = (ctx: GradContext) => ReadonlyArray<Node | null>;

/** Sums a broadcast adjoint back down to `target`'s shape. */
export function sumTo(b: Graph, g: Node, target: Node): Node {
  const ts: Shape = target.shape;
  if (formatShape(g.shape) === formatShape(ts)) return g;
  const lead = g.shape.length - ts.length;
  let x = g;
  if (lead > 0) x = b.reduceSum(x, Array.from({ length: lead }, (_, i) => i), false);
  const axes: number[] = [];
  ts.forEach((d, i) => {
    if (d === 1 && x.shape[i] !== 1) axes.push(i);
  });
  if (axes.length) x = b.reduceSum(x, axes, true);
  if (formatShape(x.shape) !== formatShape(ts)) {
    throw new GraphError(`cannot reduce adjoint ${formatShape(g.shape)} to ${formatShape(ts)} for ${describe(target)}`, 'sumTo', target.id);
  }
  return x;
}

const inferenceOnly: GradRule = ({ node }) => {
  throw new GraphError(`${describe(node)} is an inference-only contrib op and has no gradient`, node.op, node.id);
};

const unary = (f: (ctx: GradContext, x: Node) => Node): GradRule => (ctx) => [f(ctx, ctx.node.inputs[0]!)];

/** Swaps the last two axes. */
function mT(b: Graph, x: Node): Node {
  const r = x.shape.length;
  const perm = Array.from({ length: r }, (_, i) => i);
  perm[r - 2] = r - 1;
  perm[r - 1] = r - 2;
  return b.transpose(x, perm);
}

/** Adjoint of a reduction output, broadcast back over the input's shape. */
function expandReduced(b: Graph, node: Node, v: Node): Node {
  const x = node.inputs[0]!;
  let y = v;
  if (node.attrs['keepdims'] !== 1) {
    const axes = attrInts(node.attrs, 'axes').map((a) => normAxis(a, x.shape.length)).sort((p, q) => p - q);
    y = b.unsqueeze(y, axes);
  }
  return b.expandLike(y, x);
}

export const gradRules = {
  input: () => [],
  constant: () => [],
  add: ({ node, g, b }) => [sumTo(b, g, node.inputs[0]!), sumTo(b, g, node.inputs[1]!)],
  sub: ({ node, g, b }) => [sumTo(b, g, node.inputs[0]!), sumTo(b, b.neg(g), node.inputs[1]!)],
  mul: ({ node, g, b }) => {
    const [x, y] = node.inputs as [Node, Node];
    return [sumTo(b, b.mul(g, y), x), sumTo(b, b.mul(g, x), y)];
  },
  div: ({ node, g, b }) => {
    const [x, y] = node.inputs as [Node, Node];
    return [sumTo(b, b.div(g, y), x), sumTo(b, b.neg(b.div(b.mul(g, node), y)), y)];
  },
  // Ties send the whole adjoint to the first operand, as PyTorch's min/max do not (they split);
  // the difference only matters on a measure-zero set and the PPO objective never hits it exactly.
  min: ({ node, g, b }) => {
    const [x, y] = node.inputs as [Node, Node];
    const toY = b.less(y, x);
    const zero = b.like(g, 0);
    return [sumTo(b, b.where(toY, zero, g), x), sumTo(b, b.where(toY, g, zero), y)];
  },
  max: ({ node, g, b }) => {
    const [x, y] = node.inputs as [Node, Node];
    const toY = b.greater(y, x);
    const zero = b.like(g, 0);
    return [sumTo(b, b.where(toY, zero, g), x), sumTo(b, b.where(toY, g, zero), y)];
  },
  neg: unary(({ g, b }) => b.neg(g)),
  exp: unary(({ node, g, b }) => b.mul(g, node)),
  log: unary(({ g, b }, x) => b.div(g, x)),
  sqrt: unary(({ node, g, b }) => b.div(b.mul(g, b.like(g, 0.5)), node)),
  reciprocal: unary(({ node, g, b }) => b.neg(b.mul(g, b.mul(node, node)))),
  sigmoid: unary(({ node, g, b }) => b.mul(g, b.mul(node, b.sub(b.like(node, 1), node)))),
  tanh: unary(({ node, g, b }) => b.mul(g, b.sub(b.like(node, 1), b.mul(node, node)))),
  cos: unary(({ g, b }, x) => b.neg(b.mul(g, b.sin(x)))),
  sin: unary(({ g, b }, x) => b.mul(g, b.cos(x))),
  matmul: ({ node, g, b }) => {
    const [x, w] = node.inputs as [Node, Node];
    const dx = sumTo(b, b.matmul(g, mT(b, w)), x);
    let dw: Node;
    if (w.shape.length === 2 && x.shape.length > 2) {
      // A weight applied to a batch of rows: flatten the batch so the weight's gradient is one
      // large GEMM instead of a batched product followed by a reduction.
      const k = x.shape[x.shape.length - 1]!;
      const n = g.shape[g.shape.length - 1]!;
      const x2 = b.reshape(x, [flatLead(x.shape), k]);
      const g2 = b.reshape(g, [flatLead(g.shape), n]);
      dw = b.matmul(b.transpose(x2, [1, 0]), g2);
    } else {
      dw = sumTo(b, b.matmul(mT(b, x), g), w);
    }
    return [dx, dw];
  },
  transpose: ({ node, g, b }) => {
    const perm = attrInts(node.attrs, 'perm');
    const inv = new Array<number>(perm.length);
    perm.forEach((p, i) => (inv[p] = i));
    return [b.transpose(g, inv)];
  },
  reshape: ({ node, g, b }) => [b.reshapeLike(g, node.inputs[0]!)],
  reshapeLike: ({ node, g, b }) => [b.reshapeLike(g, node.inputs[0]!), null],
  expandLike: ({ node, g, b }) => [sumTo(b, g, node.inputs[0]!), null],
  unsqueeze: ({ node, g, b }) => [b.squeeze(g, attrInts(node.attrs, 'axes'))],
  squeeze: ({ node, g, b }) => [b.unsqueeze(g, attrInts(node.attrs, 'axes'))],
  rmsNorm: ({ node, g, b }) => {
    // y = x·r·w with r = (mean(x²) + eps)^-1/2 over the last axis (C values):
    //   dw = Σ g·x·r over the leading axes;  dx = r·(g·w) − x·r³·mean((g·w)·x).
    const [x, w] = node.inputs as [Node, Node];
    const C = x.shape[x.shape.length - 1] as number;
    const invC = b.like(x, 1 / C);
    const r = b.reciprocal(b.sqrt(b.add(b.mul(b.reduceSum(b.mul(x, x), [-1], true), invC), b.like(x, node.attrs['eps'] as number)))); // [..., 1]
    const gw = b.mul(g, w);
    const proj = b.mul(b.reduceSum(b.mul(gw, x), [-1], true), invC); // [..., 1]
    const dx = b.sub(b.mul(gw, r), b.mul(x, b.mul(b.mul(r, b.mul(r, r)), proj)));
    return [dx, sumTo(b, b.mul(g, b.mul(x, r)), w)];
  },
  reduceSum: ({ node, g, b }) => [expandReduced(b, node, g)],
  reduceMax: ({ node, g, b }) => {
    // Ties share the adjoint equally, so the rule is a true subgradient and FD-checkable off ties.
    const x = node.inputs[0]!;
    const hit = b.cast(b.equal(x, expandReduced(b, node, node)), x.dtype);
    const count = b.reduceSum(hit, attrInts(node.attrs, 'axes'), true);
    return [b.div(b.mul(hit, expandReduced(b, node, g)), b.expandLike(count, x))];
  },
  softmax: ({ node, g, b }) => {
    const axis = node.attrs['axis'] as number;
    const gy = b.reduceSum(b.mul(g, node), [axis], true);
    return [b.mul(node, b.sub(g, gy))];
  },
  logSoftmax: ({ node, g, b }) => {
    const axis = node.attrs['axis'] as number;
    return [b.sub(g, b.mul(b.exp(node), b.reduceSum(g, [axis], true)))];
  },
  concat: ({ node, g, b }) => {
    const axis = normAxis(node.attrs['axis'] as number, node.shape.length);
    let offset = 0;
    return node.inputs.map((x) => {
      const size = x.shape[axis]!;
      if (typeof size !== 'number') {
        throw new GraphError(`gradient of concat ${describe(node)} needs static sizes on axis ${axis}; input ${describe(x)} has '${size}'`, 'concat', node.id);
      }
      const part = b.slice(g, axis, offset, offset + size);
      offset += size;
      return part;
    });
  },
  slice: ({ node, g, b }) => {
    const x = node.inputs[0]!;
    const axis = normAxis(node.attrs['axis'] as number, x.shape.length);
    const start = node.attrs['start'] as number;
    const end = node.attrs['end'] as number;
    return [b.pad(g, axis, start, (x.shape[axis] as number) - end)];
  },
  pad: ({ node, g, b }) => {
    const x = node.inputs[0]!;
    const axis = normAxis(node.attrs['axis'] as number, x.shape.length);
    const before = node.attrs['before'] as number;
    const size = x.shape[axis]!;
    if (typeof size !== 'number') throw new GraphError(`gradient of pad ${describe(node)} needs a static size on axis ${axis}`, 'pad', node.id);
    return [b.slice(g, axis, before, before + size)];
  },
  gather: ({ node, g, b }) => {
    const [data, ids] = node.inputs as [Node, Node];
    if (node.attrs['axis'] !== 0 || data.shape.length !== 2) {
      throw new GraphError(`gradient of ${describe(node)} is implemented for row lookups (2-D data, axis 0) only`, 'gather', node.id);
    }
    // Row gradient as a scatter-add of g's rows into zeros: O(N·C) work and memory, where the
    // former onehot(ids)ᵀ · g GEMM built an [N, V] one-hot (at V = 151936 and 1k tokens, 600 MB
    // and 0.3 TFLOP). ScatterElements(add) runs serially in ORT (deterministic with any thread
    // count); ScatterND(add) did not (see the probe).
    const C = data.shape[1]!;
    const n = flatLead([...ids.shape, 1]);
    const g2 = b.reshape(g, [n, C]); // [N, C]
    const idx = b.expandLike(b.unsqueeze(b.reshape(ids, [n]), [1]), g2); // [N, C]
    return [b.scatterAdd(zerosLike(b, data), idx, g2, 0), null];
  },
  gatherElements: ({ node, g, b }) => {
    const [data, idx] = node.inputs as [Node, Node];
    return [b.scatterAdd(zerosLike(b, data), idx, g, node.attrs['axis'] as number), null];
  },
  scatterAdd: ({ node, g, b }) => {
    const idx = node.inputs[1]!;
    return [g, null, b.gatherElements(g, idx, node.attrs['axis'] as number)];
  },
  where: ({ node, g, b }) => {
    const [c, x, y] = node.inputs as [Node, Node, Node];
    const zero = b.like(g, 0);
    return [null, sumTo(b, b.where(c, g, zero), x), sumTo(b, b.where(c, zero, g), y)];
  },
  equal: () => [null, null],
  less: () => [null, null],
  greater: () => [null, null],
  and: () => [null, null],
  cast: ({ node, g, b }) => {
    const x = node.inputs[0]!;
    return [floatTypes.has(x.dtype) && floatTypes.has(node.dtype) ? b.cast(g, x.dtype) : null];
  },
  stopGradient: () => [null],
  // Decode-time contrib kernels: nothing trains through them, so differentiating one is a bug.
  matMulNBits: inferenceOnly,
  skipRmsNorm: inferenceOnly,
  rotaryEmbedding: inferenceOnly,
  splitLike: inferenceOnly,
  select: inferenceOnly,
} satisfies Record<Op, GradRule>;

/** Zeros of x's run-time shape and dtype. */
function zerosLike(b: Graph, x: Node): Node {
  return b.expandLike(b.like(x, 0), x);
}

/** Product of all but the last dim (the row count of a flattened matrix). */
function flatLead(shape: Shape): Shape[number] {
  let p: Shape[number] = 1;
  for (const d of shape.slice(0, -1)) p = mulDim(p, d);
  return p;
}
