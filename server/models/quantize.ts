/**
 * Block-wise symmetric weight quantization in ONNX Runtime's MatMulNBits layout, for rollouts.
 *
 * A weight W [N, K] (PyTorch's [out, in]) is cut along K into blocks of `blockSize`; each block
 * gets one float scale d and integer codes q with W ≈ d·q. The scale maps the block's
 * largest-magnitude value m to the most negative code: d = m / −2^(bits−1), so m is exact and the
 * codes use the whole signed range (llama.cpp's Q4_0 rule). Codes are stored unsigned, q + 2^(bits−1) —
 * the zero point MatMulNBits assumes when none is given — two 4-bit codes per byte, the first in
 * the low nibble. A last partial block is padded with zero codes.
 *
 * Error per element: at most |d|/2, d = max|W_block| / 2^(bits−1); a value of the opposite sign
 * to m within one step of −m clamps to the largest positive code, at most |d| off.
 */

export type QuantBits = 4 | 8;

export interface QuantizedMatrix {
  readonly rows: number; // N
  readonly cols: number; // K
  readonly bits: QuantBits;
  readonly blockSize: number;
  /** [N, ⌈K/blockSize⌉, blockSize·bits/8] */
  readonly packed: Uint8Array;
  /** [N·⌈K/blockSize⌉] */
  readonly scales: Float32Array;
}

export function checkBlockSize(blockSize: number): void {
  if (!(Number.isInteger(blockSize) && blockSize >= 16 && (blockSize & (blockSize - 1)) === 0)) {
    throw new Error(`quantization block size must be a power of two ≥ 16, got ${blockSize}`);
  }
}

/** Quantizes W [rows, cols] (row-major) along its columns. */
export function quantizeBlockwise(w: Float32Array, rows: number, cols: number, bits: QuantBits, blockSize: number): QuantizedMatrix {
  checkBlockSize(blockSize);
  if (w.length !== rows * cols) throw new Error(`quantize: ${w.length} values do not form a [${rows}, ${cols}] matrix`);
  const blocks = Math.ceil(cols / blockSize);
  const blob = (blockSize * bits) / 8;
  const packed = new Uint8Array(rows * blocks * blob);
  const scales = new Float32Array(rows * blocks);
  const lo = -(1 << (bits - 1));
  const hi = (1 << (bits - 1)) - 1;
  const zero = 1 << (bits - 1);
  const codes = new Int32Array(blockSize);
  for (let n = 0; n < rows; n++) {
    for (let blk = 0; blk < blocks; blk++) {
      const start = n * cols + blk * blockSize;
      const len = Math.min(blockSize, cols - blk * blockSize);
      let m = 0;
      for (let j = 0; j < len; j++) {
        const v = w[start + j]!;
        if (Math.abs(v) > Math.abs(m)) m = v;
      }
      const d = m === 0 ? 0 : Math.fround(m / lo);
      scales[n * blocks + blk] = d;
      const inv = d === 0 ? 0 : 1 / d;
      codes.fill(0);
      for (let j = 0; j < len; j++) codes[j] = Math.max(lo, Math.min(hi, Math.round(w[start + j]! * inv)));
      const out = (n * blocks + blk) * blob;
      if (bits === 8) {
        for (let j = 0; j < blockSize; j++) packed[out + j] = codes[j]! + zero;
      } else {
        for (let j = 0; j < blockSize; j += 2) packed[out + j / 2] = (codes[j]! + zero) | ((codes[j + 1]! + zero) << 4);
      }
    }
  }
  return { rows, cols, bits, blockSize, packed, scales };
}

/** The float matrix a quantized one stands for (what MatMulNBits multiplies by). */
export function dequantizeBlockwise(q: QuantizedMatrix): Float32Array {
  const { rows, cols, bits, blockSize } = q;
  const blocks = Math.ceil(cols / blockSize);
  const blob = (blockSize * bits) / 8;
  const zero = 1 << (bits - 1);
  const out = new Float32Array(rows * cols);
  for (let n = 0; n < rows; n++) {
    for (let blk = 0; blk < blocks; blk++) {
      const d = q.scales[n * blocks + blk]!;
      const base = (n * blocks + blk) * blob;
      const len = Math.min(blockSize, cols - blk * blockSize);
      for (let j = 0; j < len; j++) {
        const byte = q.packed[base + (bits === 8 ? j : j >> 1)]!;
        const code = bits === 8 ? byte : j & 1 ? byte >> 4 : byte & 0xf;
        out[n * cols + blk * blockSize + j] = Math.fround(d * (code - zero));
      }
    }
  }
  return out;
}

/** W + scale·(B A): a LoRA adapter merged into its base projection (W [out,in], A [r,in], B [out,r]). */
export function mergeLora(w: Float32Array, a: Float32Array, b: Float32Array, out: number, inDim: number, rank: number, scale: number): Float32Array {
  if (w.length !== out * inDim || a.length !== rank * inDim || b.length !== out * rank) {
    throw new Error(`mergeLora: W ${w.length}, A ${a.length}, B ${b.length} values do not fit [${out}, ${inDim}] with rank ${rank}`);
  }
  const merged = Float32Array.from(w);
  for (let o = 0; o < out; o++) {
    for (let r = 0; r < rank; r++) {
      const s = scale * b[o * rank + r]!;
      if (s === 0) continue;
      const row = o * inDim;
      const ar = r * inDim;
      for (let i = 0; i < inDim; i++) merged[row + i]! += s * a[ar + i]!;
    }
  }
  return merged;
}
