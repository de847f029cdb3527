/** Thrown by shape inference; the graph wraps it with the node's identity. */
export class ShapeError extends Error {}
