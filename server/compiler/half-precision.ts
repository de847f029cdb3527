/**
 * A float32 inference graph rebuilt to compute in float16, for GPU execution providers (the fp16
 * rollout decoder, decode-graph.ts).
 *
 * The rewrite is structural, so it follows whatever graph it is given: every node is rebuilt
 * with its float32 operands replaced by float16 ones, and inference gives each node its new
 * dtype. At the edges:
 * - float32 inputs with baked data (weights, RoPE tables) become float16 initializers, their
 *   bytes converted here (round to nearest even); the caller's float32 data is not touched.
 * - other float32 inputs (the KV cache, attention biases, weights fed at run time) stay float32
 *   in the graph's signature and are cast to float16 where they enter, so the runtime feeds the
 *   same tensors as for the float32 graph. Inputs named by `saturate` (additive masks) are first
 *   clamped to ±30000: −1e9 would become −Infinity, and a row masked entirely (a padding
 *   position's query) would then give −∞ − (−∞) = NaN in a softmax, and that row's NaN value
 *   reaches every other row as 0·NaN. exp(−30000) is still an exact 0, and the margin to
 *   float16's 65504 leaves room for the scores added to the mask.
 * - float32 outputs are cast back, so logits reach the sampler in float32 and new keys/values
 *   land in a float32 cache (exactly: they are float16 values).
 * - sums over many terms run in float32: Softmax, LogSoftmax and ReduceSum take their input cast
 *   up and their result is cast down. ONNX Runtime's WebGPU Softmax accumulates in the element
 *   type, so this is the only way to get float32 sums there. RMSNorm (SimplifiedLayerNormalization,
 *   SkipSimplifiedLayerNormalization) stays float16 in and out: those kernels accumulate the mean
 *   square in float32 themselves (stash_type 1 on CPU and CUDA; f32 workgroup sums on WebGPU).
 *   MatMul accumulates as the provider's kernel does (float32 in cuBLAS on CUDA; float16 in ONNX
 *   Runtime's WebGPU shaders). That is most of the float16 error on WebGPU: on the default model
 *   (lavapipe), running the MatMuls in float32 took the rollouts' mean |Δ log p| against the fp32
 *   policy from 0.029 to 0.008 nats (float16-rounded weights alone: 0.004), but casting every
 *   weight up on every step would cost more than fp32 weights, so MatMul stays float16.
 *
 * Ops without a float16 form (MatMulNBits here) fail inference, naming the node.
 */
import { topoSort, Graph, type Node } from './ir.ts';
import { float16Bytes } from './float16.ts';
import type { Op } from './ops.ts';

/** Ops computed in float32 inside a float16 graph: reductions whose sums need the range and bits. */
const float32Ops: ReadonlySet<Op> = new Set(['softmax', 'logSoftmax', 'reduceSum']);

/** Magnitude `saturate` clamps inputs to (see the file comment). */
export const FLOAT16_MASK_LIMIT = 30000;

export interface HalfPrecisionOptions {
  /** float32 inputs (by name) to clamp to ±FLOAT16_MASK_LIMIT before the cast: additive masks. */
  readonly saturate?: (name: string) => boolean;
}

export interface HalfPrecisionGraph {
  readonly outputs: Array<[string, Node]>;
  /** The initializers, float32 ones converted to float16 bytes (others as given). */
  readonly initializers: Map<string, Uint8Array>;
}

/**
 * `outputs` computed in float16 (see the file comment). `initializers` are the raw bytes of baked
 * inputs, as for `emitOnnx`.
 */
export function toHalfPrecision(outputs: ReadonlyArray<readonly [string, Node]>, initializers: ReadonlyMap<string, Uint8Array>, options: HalfPrecisionOptions = {}): HalfPrecisionGraph {
  const h = new Graph();
  const map = new Map<number, Node>();
  const inits = new Map<string, Uint8Array>();
  const get = (n: Node): Node => map.get(n.id)!;
  const up = (n: Node): Node => (n.dtype === 'float16' ? h.cast(n, 'float32') : n);
  for (const n of topoSort(outputs.map(([, o]) => o))) {
    let out: Node;
    if (n.op === 'input') {
      const name = String(n.attrs['name']);
      const data = initializers.get(name);
      if (n.dtype !== 'float32') {
        out = h.input(name, n.dtype, n.shape);
        if (data) inits.set(name, data);
      } else if (data) {
        out = h.input(name, 'float16', n.shape);
        inits.set(name, float16Bytes(float32View(data, name)));
      } else {
        let x = h.input(name, 'float32', n.shape);
        if (options.saturate?.(name)) x = h.min(h.max(x, h.scalar(-FLOAT16_MASK_LIMIT, 'float32')), h.scalar(FLOAT16_MASK_LIMIT, 'float32'));
        out = h.cast(x, 'float16');
      }
    } else if (n.op === 'constant') {
      out = h.constant(n.attrs['value'] as number[], n.attrs['shape'] as number[], n.dtype === 'float32' ? 'float16' : n.dtype);
    } else if (n.op === 'cast') {
      out = h.cast(get(n.inputs[0]!), n.dtype === 'float32' ? 'float16' : n.dtype);
    } else if (float32Ops.has(n.op)) {
      const r = h.node(n.op, n.inputs.map((i) => up(get(i))), n.attrs);
      out = n.dtype === 'float32' ? h.cast(r, 'float16') : r;
    } else {
      out = h.node(n.op, n.inputs.map(get), n.attrs);
    }
    map.set(n.id, out);
  }
  // Initializers of inputs the graph does not reach: passed on for emitOnnx to refuse by name.
  for (const [name, data] of initializers) if (!inits.has(name)) inits.set(name, data);
  return {
    outputs: outputs.map(([name, n]) => [name, n.dtype === 'float32' ? up(get(n)) : get(n)]),
    initializers: inits,
  };
}

/** A float32 view of raw little-endian bytes (copied when the bytes are not 4-byte aligned). */
function float32View(data: Uint8Array, name: string): Float32Array {
  if (data.length % 4) throw new Error(`initializer '${name}': ${data.length} bytes is not a whole number of float32 values`);
  const aligned = data.byteOffset % 4 === 0 ? data : data.slice();
  return new Float32Array(aligned.buffer, aligned.byteOffset, aligned.length / 4);
}
