/**
 * Host tensors: what crosses between the main thread and the engine worker.
 * Data is a plain typed array; when sent to the worker its buffer is transferred (moved, not
 * copied). onnxruntime-node rejects SharedArrayBuffer-backed arrays, so sharing is not an option:
 * instead the worker keeps long-lived tensors (weights, optimizer state, gradients) resident and
 * only batches and results travel.
 */
export type TensorDType = 'float32' | 'float64' | 'int64' | 'bool';

export type TensorData = Float32Array | Float64Array | BigInt64Array | Uint8Array;

export interface HostTensor {
  readonly dtype: TensorDType;
  readonly dims: readonly number[];
  readonly data: TensorData;
}

export function elementCount(dims: readonly number[]): number {
  return dims.reduce((a, b) => a * b, 1);
}

export function allocate(dtype: TensorDType, dims: readonly number[]): TensorData {
  const n = elementCount(dims);
  switch (dtype) {
    case 'float32': return new Float32Array(n);
    case 'float64': return new Float64Array(n);
    case 'int64': return new BigInt64Array(n);
    case 'bool': return new Uint8Array(n);
  }
}

export function f32(dims: readonly number[], data?: ArrayLike<number>): HostTensor {
  const arr = data ? Float32Array.from(data) : new Float32Array(elementCount(dims));
  if (arr.length !== elementCount(dims)) throw new Error(`f32 tensor [${dims.join(', ')}] needs ${elementCount(dims)} values, got ${arr.length}`);
  return { dtype: 'float32', dims, data: arr };
}

export function f64(dims: readonly number[], data?: ArrayLike<number>): HostTensor {
  const arr = data ? Float64Array.from(data) : new Float64Array(elementCount(dims));
  if (arr.length !== elementCount(dims)) throw new Error(`f64 tensor [${dims.join(', ')}] needs ${elementCount(dims)} values, got ${arr.length}`);
  return { dtype: 'float64', dims, data: arr };
}

export function i64(dims: readonly number[], data: ArrayLike<number>): HostTensor {
  const arr = BigInt64Array.from(Array.from(data), (v) => BigInt(v));
  if (arr.length !== elementCount(dims)) throw new Error(`i64 tensor [${dims.join(', ')}] needs ${elementCount(dims)} values, got ${arr.length}`);
  return { dtype: 'int64', dims, data: arr };
}
