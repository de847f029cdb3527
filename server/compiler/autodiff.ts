/**
 * Reverse-mode automatic differentiation over the IR.
 *
 * Walks the forward graph from the loss back to the requested inputs in reverse topological
 * order, applying one rule per node (`grad-rules.ts`) and summing adjoints where a value has
 * several users. Only nodes on a path to a requested input are differentiated. Every adjoint a
 * rule returns is checked against the shape of the value it belongs to, so a wrong rule fails at
 * build time with the node named, not at run time with a kernel error.
 */
import { formatShape } from './dims.ts';
import { gradRules } from './grad-rules.ts';
import { GraphError, describe, topoSort, type Graph, type Node } from './ir.ts';
import { floatTypes } from './ops.ts';

/**
 * Gradients of `output` with respect to each of `wrt`. `seed` is the adjoint of the output
 * (default: 1, which requires a scalar output). Inputs that do not influence the output get
 * zeros of their shape.
 */
export function gradients(b: Graph, output: Node, wrt: readonly Node[], seed?: Node): Node[] {
  if (!floatTypes.has(output.dtype)) throw new GraphError(`cannot differentiate ${describe(output)}: not a float tensor`, output.op, output.id);
  const start = seed ?? (output.shape.length === 0 ? b.like(output, 1) : null);
  if (!start) throw new GraphError(`differentiating non-scalar ${describe(output)} needs an explicit seed`, output.op, output.id);

  const order = topoSort([output]);
  const targets = new Set(wrt.map((w) => w.id));
  // A node needs an adjoint if a requested input is among its ancestors (or it is one).
  const needed = new Set<number>();
  for (const n of order) {
    if (targets.has(n.id) || n.inputs.some((i) => needed.has(i.id))) needed.add(n.id);
  }

  // Contributions to each adjoint are collected and summed when the node is reached (reverse
  // topological order guarantees all of them are in by then), so the sum can be built well.
  const contributions = new Map<number, Node[]>();
  contributions.set(output.id, [start]);
  const adjoint = new Map<number, Node>();
  for (let k = order.length - 1; k >= 0; k--) {
    const n = order[k]!;
    const parts = contributions.get(n.id);
    if (!parts) continue;
    const g = sumAdjoints(b, parts);
    adjoint.set(n.id, g);
    if (n.inputs.length === 0 || !n.inputs.some((i) => needed.has(i.id))) continue;
    const grads = gradRules[n.op]({ node: n, g, b });
    if (grads.length !== n.inputs.length) {
      throw new GraphError(`gradient rule of ${n.op} returned ${grads.length} adjoints for ${n.inputs.length} inputs at ${describe(n)}`, n.op, n.id);
    }
    n.inputs.forEach((x, i) => {
      const gx = grads[i];
      if (!gx || !needed.has(x.id)) return;
      if (formatShape(gx.shape) !== formatShape(x.shape) || gx.dtype !== x.dtype) {
        throw new GraphError(
          `gradient rule of ${n.op} at ${describe(n)} gave ${gx.dtype}${formatShape(gx.shape)} for input ${i} ${describe(x)}`,
          n.op,
          n.id,
        );
      }
      const list = contributions.get(x.id);
      if (list) list.push(gx);
      else contributions.set(x.id, [gx]);
    });
  }
  return wrt.map((w) => adjoint.get(w.id) ?? b.expandLike(b.like(w, 0), w));
}

/**
 * Sums adjoint contributions. When they are zero-paddings of disjoint pieces that tile one axis
 * (the gradients of slices that split a tensor, e.g. q|k|v out of one fused projection), the sum
 * is their concatenation: one copy instead of padded copies and additions.
 */
function sumAdjoints(b: Graph, parts: readonly Node[]): Node {
  if (parts.length === 1) return parts[0]!;
  const tiled = asTiling(parts);
  if (tiled) return b.concat(tiled.pieces, tiled.axis);
  return parts.slice(1).reduce((acc, p) => b.add(acc, p), parts[0]!);
}

function asTiling(parts: readonly Node[]): { axis: number; pieces: Node[] } | null {
  if (!parts.every((p) => p.op === 'pad')) return null;
  const rank = parts[0]!.shape.length;
  const axisOf = (p: Node) => {
    const a = p.attrs['axis'] as number;
    return a < 0 ? a + rank : a;
  };
  const axis = axisOf(parts[0]!);
  if (!parts.every((p) => axisOf(p) === axis)) return null;
  const total = parts[0]!.shape[axis];
  if (typeof total !== 'number') return null;
  const sorted = [...parts].sort((p, q) => (p.attrs['before'] as number) - (q.attrs['before'] as number));
  let offset = 0;
  for (const p of sorted) {
    const inner = p.inputs[0]!.shape[axis];
    if (typeof inner !== 'number' || p.attrs['before'] !== offset) return null;
    offset += inner;
  }
  if (offset !== total) return null;
  return { axis, pieces: sorted.map((p) => p.inputs[0]!) };
}
