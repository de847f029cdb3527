/**
 * Compact BLOB encodings for per-token arrays: token ids as Int32 little-endian, log-probabilities
 * as Float32 little-endian. A 64-token response costs 256 bytes per array instead of ~700 as JSON,
 * and the bytes are exactly what a typed array holds, so decoding is a copy.
 *
 * The byte order is fixed (little-endian) so a database moves between machines; on a little-endian
 * host (every platform Node ships for today) encode and decode are plain memory copies, and a
 * DataView path keeps big-endian hosts correct.
 */

const littleEndianHost = new Uint8Array(new Uint32Array([1]).buffer)[0] === 1;

/** Encodes token ids (already validated as int32) as Int32 little-endian bytes. */
export function encodeInt32(values: Int32Array | readonly number[]): Buffer {
  if (littleEndianHost) {
    const typed = values instanceof Int32Array ? values : Int32Array.from(values);
    return Buffer.from(typed.buffer, typed.byteOffset, typed.byteLength);
  }
  const out = Buffer.allocUnsafe(values.length * 4);
  for (let i = 0; i < values.length; i++) out.writeInt32LE(values[i] ?? 0, i * 4);
  return out;
}

/** Encodes numbers as Float32 little-endian bytes (rounding each to float32). */
export function encodeFloat32(values: Float32Array | readonly number[]): Buffer {
  if (littleEndianHost) {
    const typed = values instanceof Float32Array ? values : Float32Array.from(values);
    return Buffer.from(typed.buffer, typed.byteOffset, typed.byteLength);
  }
  const out = Buffer.allocUnsafe(values.length * 4);
  for (let i = 0; i < values.length; i++) out.writeFloatLE(values[i] ?? 0, i * 4);
  return out;
}

/**
 * Decodes Int32 little-endian bytes. `what` names the column and row for the error a truncated blob
 * gets (only a damaged or hand-edited database has one).
 */
export function decodeInt32(bytes: Uint8Array, what: string): number[] {
  return decode(bytes, what, (view, offset) => view.getInt32(offset, true), (b, o, n) => new Int32Array(b, o, n));
}

/** Decodes Float32 little-endian bytes; see decodeInt32. */
export function decodeFloat32(bytes: Uint8Array, what: string): number[] {
  return decode(bytes, what, (view, offset) => view.getFloat32(offset, true), (b, o, n) => new Float32Array(b, o, n));
}

function decode(
  bytes: Uint8Array,
  what: string,
  read: (view: DataView, offset: number) => number,
  typedView: (buffer: ArrayBufferLike, byteOffset: number, length: number) => ArrayLike<number>,
): number[] {
  if (bytes.byteLength % 4 !== 0) {
    throw new Error(`${what}: blob of ${bytes.byteLength} bytes is not a whole number of 4-byte values`);
  }
  const n = bytes.byteLength / 4;
  // Buffers from SQLite may start at any offset of a shared pool, where a typed-array view cannot;
  // `new Uint8Array(bytes)` copies into a fresh, aligned buffer (Buffer#slice would not copy).
  if (littleEndianHost) {
    const aligned = bytes.byteOffset % 4 === 0 ? bytes : new Uint8Array(bytes);
    return Array.from(typedView(aligned.buffer, aligned.byteOffset, n));
  }
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const out = new Array<number>(n);
  for (let i = 0; i < n; i++) out[i] = read(view, i * 4);
  return out;
}
