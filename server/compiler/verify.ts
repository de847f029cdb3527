/**
 * The verifier: checks a graph before it is emitted and names the first node that is wrong.
 *
 * Nodes are checked when built, but graphs are also assembled from pieces (gradients, composites,
 * several outputs) and a check of the whole catches what local construction cannot: two different
 * inputs with one name, a recorded shape that no longer matches its op's inference (a node made
 * by hand or corrupted), int64 data flowing into float math.
 */
import { formatShape } from './dims.ts';
import { GraphError, describe, topoSort, type Node } from './ir.ts';
import { opDefs, ShapeError } from './ops.ts';

export function verify(outputs: ReadonlyArray<readonly [string, Node]>): void {
  if (outputs.length === 0) throw new GraphError('graph has no outputs', 'graph', null);
  const order = topoSort(outputs.map(([, n]) => n));
  const inputNames = new Map<string, Node>();
  for (const n of order) {
    if (n.op === 'input') {
      const name = String(n.attrs['name']);
      const prev = inputNames.get(name);
      if (prev && prev !== n) throw new GraphError(`two different inputs named '${name}': ${describe(prev)} and ${describe(n)}`, 'input', n.id);
      inputNames.set(name, n);
      continue;
    }
    if (n.op === 'constant') continue;
    let inferred;
    try {
      inferred = opDefs[n.op].infer(n.inputs, n.attrs);
    } catch (e) {
      if (!(e instanceof ShapeError)) throw e;
      throw new GraphError(`verifier: ${describe(n)} is invalid: ${e.message}; inputs: ${n.inputs.map(describe).join(', ')}`, n.op, n.id);
    }
    if (formatShape(inferred.shape) !== formatShape(n.shape) || inferred.dtype !== n.dtype) {
      throw new GraphError(
        `verifier: ${describe(n)} records ${n.dtype}${formatShape(n.shape)} but its inputs give ${inferred.dtype}${formatShape(inferred.shape)}`,
        n.op,
        n.id,
      );
    }
  }
  for (const [name, n] of outputs) {
    if (inputNames.has(name) && inputNames.get(name) !== n) {
      throw new GraphError(`output name '${name}' collides with an input`, n.op, n.id);
    }
  }
}
