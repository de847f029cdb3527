/**
 * The safetensors format (https://github.com/huggingface/safetensors, "Format" section):
 *
 *   [u64 little-endian N] [N bytes of UTF-8 JSON header] [data region]
 *   header = { "__metadata__"?: { string: string }, name: { dtype, shape, data_offsets: [begin, end] } }
 *
 * Offsets are relative to the start of the data region. We read F32, F16, BF16 and F64 into
 * Float32Array (the engine computes in float32) and write F32 only.
 *
 * Reading is strict, like the reference Rust implementation: the tensors must tile the data region
 * exactly (no gaps, no overlaps, nothing left over), and every violation is reported with the file
 * and tensor that caused it. Writing is deterministic: tensors sorted by name (UTF-16 code-unit
 * order), metadata keys sorted, header padded with spaces so the data region starts 8-byte aligned;
 * the same tensors give the same bytes.
 *
 * Files written by `writeSafetensorsFile` (every Troupe checkpoint, run checkpoint, LoRA adapter and
 * export) carry the sha256 of their data region in the metadata (`troupe.sha256`), and reading
 * checks it: a zero-filled or bit-flipped tensor fails with a `ChecksumMismatchError` naming the
 * file, instead of loading as other weights. Files without the key (older checkpoints, other
 * tools' files) load unchecked. The key is stripped from the metadata readers return.
 */
import { createHash, type Hash } from 'node:crypto';
import { open } from 'node:fs/promises';
import type { FileHandle } from 'node:fs/promises';
import { z } from 'zod';
import { writeFileAtomic } from './atomic-write.ts';
import { formatIssues } from './json-file.ts';

/** Bytes per element of each readable dtype. */
export const safetensorsDtypeSizes = { F32: 4, F16: 2, BF16: 2, F64: 8 } as const;
export type SafetensorsDtype = keyof typeof safetensorsDtypeSizes;

/** A tensor read from a file, converted to float32. */
export interface SafetensorsTensor {
  /** The dtype stored in the file (the data is float32 regardless). */
  dtype: SafetensorsDtype;
  shape: number[];
  data: Float32Array;
}

export interface SafetensorsContents {
  /** Tensors in file (data offset) order. */
  tensors: Map<string, SafetensorsTensor>;
  metadata: Record<string, string>;
}

/** A tensor to write: row-major float32 data of the given shape. */
export interface SafetensorsInput {
  shape: readonly number[];
  data: Float32Array;
}

export interface SafetensorsReadOptions {
  /**
   * Allocates the float32 array for a tensor of n elements, e.g. on a SharedArrayBuffer so worker
   * threads can share weights. Must return exactly n elements. Defaults to `new Float32Array(n)`.
   */
  alloc?: (n: number) => Float32Array;
}

/** Headers larger than this are refused (same limit as the Rust implementation) to avoid huge allocations. */
const MAX_HEADER_BYTES = 100_000_000;
const METADATA_KEY = '__metadata__';
/** Metadata key of the data region's sha256 (lowercase hex). */
export const CHECKSUM_METADATA_KEY = 'troupe.sha256';

/** A safetensors file whose tensor data does not match the checksum written with it. */
export class ChecksumMismatchError extends Error {
  override readonly name = 'ChecksumMismatchError';
  constructor(readonly path: string) {
    super(`${path}: checksum mismatch: the tensor data does not match the sha256 written with it (${CHECKSUM_METADATA_KEY}); the file is corrupted or was changed after it was written`);
  }
}

/** Checks `hash` (of the whole data region) against the metadata's checksum, if any; returns the metadata without it. */
function verifiedMetadata(metadata: Record<string, string>, hash: Hash | undefined, source: string): Record<string, string> {
  const expected = metadata[CHECKSUM_METADATA_KEY];
  if (expected === undefined) return metadata;
  if (hash === undefined || hash.digest('hex') !== expected) throw new ChecksumMismatchError(source);
  const { [CHECKSUM_METADATA_KEY]: _, ...rest } = metadata;
  return rest;
}
const LITTLE_ENDIAN = new Uint8Array(new Uint32Array([1]).buffer)[0] === 1;

const tensorInfoSchema = z.object({
  dtype: z.string(),
  shape: z.array(z.int().nonnegative()),
  data_offsets: z.tuple([z.int().nonnegative(), z.int().nonnegative()]),
});
const metadataSchema = z.record(z.string(), z.string());
const headerSchema = z.record(z.string(), z.unknown());

/** One validated header entry; begin/end are relative to the data region. */
interface Entry {
  name: string;
  dtype: SafetensorsDtype;
  shape: number[];
  count: number;
  begin: number;
  end: number;
}

interface ParsedHeader {
  entries: Entry[];
  metadata: Record<string, string>;
}

const fmtShape = (s: readonly number[]): string => `[${s.join(', ')}]`;

function elementCount(shape: readonly number[]): number {
  let n = 1;
  for (const d of shape) n *= d;
  return n;
}

/** Reads the u64 header length and checks it fits in a file of `fileSize` bytes. */
function headerLength(prefix: Uint8Array, fileSize: number, source: string): number {
  if (fileSize < 8) {
    throw new Error(`${source}: file is ${fileSize} bytes, shorter than the 8-byte safetensors header length`);
  }
  const dv = new DataView(prefix.buffer, prefix.byteOffset, 8);
  const n = dv.getUint32(0, true) + dv.getUint32(4, true) * 2 ** 32;
  if (n > MAX_HEADER_BYTES) {
    throw new Error(`${source}: header length ${n} exceeds the ${MAX_HEADER_BYTES}-byte limit (not a safetensors file?)`);
  }
  if (8 + n > fileSize) {
    throw new Error(`${source}: header length ${n} runs past the end of the ${fileSize}-byte file (truncated file?)`);
  }
  return n;
}

/** Parses and validates the JSON header against a data region of `dataLength` bytes. */
function parseHeader(headerBytes: Uint8Array, dataLength: number, source: string): ParsedHeader {
  let json: unknown;
  try {
    json = JSON.parse(new TextDecoder('utf-8', { fatal: true }).decode(headerBytes));
  } catch (e) {
    throw new Error(`${source}: header is not valid UTF-8 JSON: ${(e as Error).message}`, { cause: e });
  }
  const top = headerSchema.safeParse(json);
  if (!top.success) throw new Error(`${source}: header is not a JSON object`);

  let metadata: Record<string, string> = {};
  const entries: Entry[] = [];
  for (const [name, raw] of Object.entries(top.data)) {
    if (name === METADATA_KEY) {
      const m = metadataSchema.safeParse(raw);
      if (!m.success) throw new Error(`${source}: header ${METADATA_KEY} must map strings to strings:\n${formatIssues(m.error)}`);
      metadata = m.data;
      continue;
    }
    const info = tensorInfoSchema.safeParse(raw);
    if (!info.success) throw new Error(`${source}: tensor '${name}': invalid header entry:\n${formatIssues(info.error)}`);
    const { dtype, shape, data_offsets: [begin, end] } = info.data;
    if (!Object.hasOwn(safetensorsDtypeSizes, dtype)) {
      throw new Error(`${source}: tensor '${name}': unknown or unsupported dtype '${dtype}' (readable: ${Object.keys(safetensorsDtypeSizes).join(', ')})`);
    }
    const dt = dtype as SafetensorsDtype;
    if (end < begin) throw new Error(`${source}: tensor '${name}': data_offsets [${begin}, ${end}] end before they begin`);
    const count = elementCount(shape);
    const bytes = count * safetensorsDtypeSizes[dt];
    if (!Number.isSafeInteger(bytes) || bytes !== end - begin) {
      throw new Error(
        `${source}: tensor '${name}': shape ${fmtShape(shape)} of ${dt} needs ${bytes} bytes but data_offsets [${begin}, ${end}] span ${end - begin}`,
      );
    }
    entries.push({ name, dtype: dt, shape, count, begin, end });
  }

  // The tensors must tile the data region exactly: sort by offset and walk it.
  entries.sort((a, b) => a.begin - b.begin || a.end - b.end || (a.name < b.name ? -1 : 1));
  let cursor = 0;
  let prev: Entry | undefined;
  for (const e of entries) {
    if (e.end > dataLength) {
      throw new Error(
        `${source}: tensor '${e.name}': data_offsets [${e.begin}, ${e.end}] run past the ${dataLength}-byte data region (truncated file or bad offsets)`,
      );
    }
    if (e.begin < cursor && prev) {
      throw new Error(`${source}: tensors '${prev.name}' [${prev.begin}, ${prev.end}] and '${e.name}' [${e.begin}, ${e.end}] overlap`);
    }
    if (e.begin > cursor) {
      const after = prev ? `after '${prev.name}'` : 'at the start';
      throw new Error(`${source}: data bytes [${cursor}, ${e.begin}) ${after} belong to no tensor (gap before '${e.name}')`);
    }
    cursor = e.end;
    prev = e;
  }
  if (cursor !== dataLength) {
    const after = prev ? `after tensor '${prev.name}'` : 'with no tensors in the header';
    throw new Error(`${source}: data region is ${dataLength} bytes but tensors cover ${cursor}: ${dataLength - cursor} trailing bytes ${after}`);
  }
  return { entries, metadata };
}

let f16Table: Float32Array | undefined;

/** All 65536 half-precision values as float32, built once; conversion is then a table lookup. */
function halfTable(): Float32Array {
  if (f16Table) return f16Table;
  const table = new Float32Array(65536);
  const bits = new Uint32Array(table.buffer);
  for (let h = 0; h < 65536; h++) {
    const sign = h >>> 15;
    const exp = (h >>> 10) & 0x1f;
    const mant = h & 0x3ff;
    if (exp === 0) {
      const v = mant * 2 ** -24; // zero or subnormal, exact in float32
      table[h] = sign ? -v : v;
    } else if (exp === 31) {
      bits[h] = ((sign << 31) | (0xff << 23) | (mant << 13)) >>> 0; // inf / NaN, payload kept
    } else {
      bits[h] = ((sign << 31) | ((exp - 15 + 127) << 23) | (mant << 13)) >>> 0;
    }
  }
  f16Table = table;
  return table;
}

/** Converts `src` (exactly one tensor's bytes) of `dtype` into `out`. */
function decodeInto(dtype: SafetensorsDtype, src: Uint8Array, out: Float32Array): void {
  const n = out.length;
  switch (dtype) {
    case 'F32':
      if (LITTLE_ENDIAN) {
        new Uint8Array(out.buffer, out.byteOffset, n * 4).set(src);
      } else {
        const dv = new DataView(src.buffer, src.byteOffset, src.byteLength);
        for (let i = 0; i < n; i++) out[i] = dv.getFloat32(i * 4, true);
      }
      return;
    case 'F16': {
      const table = halfTable();
      for (let i = 0; i < n; i++) out[i] = table[src[2 * i]! | (src[2 * i + 1]! << 8)]!;
      return;
    }
    case 'BF16': {
      // bfloat16 is the top half of a float32: shift the bits into place.
      const bits = new Uint32Array(out.buffer, out.byteOffset, n);
      for (let i = 0; i < n; i++) bits[i] = ((src[2 * i]! | (src[2 * i + 1]! << 8)) << 16) >>> 0;
      return;
    }
    case 'F64': {
      const dv = new DataView(src.buffer, src.byteOffset, src.byteLength);
      for (let i = 0; i < n; i++) out[i] = dv.getFloat64(i * 8, true);
      return;
    }
  }
}

function allocate(options: SafetensorsReadOptions | undefined, n: number, source: string, name: string): Float32Array {
  const out = options?.alloc ? options.alloc(n) : new Float32Array(n);
  if (out.length !== n) throw new Error(`${source}: tensor '${name}': allocator returned ${out.length} elements, expected ${n}`);
  return out;
}

/** Parses a whole safetensors file held in memory. `source` (usually the path) is named in errors. */
export function readSafetensors(bytes: Uint8Array, source: string, options?: SafetensorsReadOptions): SafetensorsContents {
  const n = headerLength(bytes, bytes.byteLength, source);
  const dataStart = 8 + n;
  const { entries, metadata } = parseHeader(bytes.subarray(8, dataStart), bytes.byteLength - dataStart, source);
  // The tensors tile the data region exactly (parseHeader checks), so this hashes all of it.
  const hash = metadata[CHECKSUM_METADATA_KEY] === undefined ? undefined : createHash('sha256').update(bytes.subarray(dataStart));
  const checked = verifiedMetadata(metadata, hash, source);
  const tensors = new Map<string, SafetensorsTensor>();
  for (const e of entries) {
    const data = allocate(options, e.count, source, e.name);
    decodeInto(e.dtype, bytes.subarray(dataStart + e.begin, dataStart + e.end), data);
    tensors.set(e.name, { dtype: e.dtype, shape: e.shape, data });
  }
  return { tensors, metadata: checked };
}

async function readExactly(fh: FileHandle, into: Uint8Array, position: number, source: string): Promise<void> {
  let done = 0;
  while (done < into.byteLength) {
    const { bytesRead } = await fh.read(into, done, into.byteLength - done, position + done);
    if (bytesRead === 0) throw new Error(`${source}: unexpected end of file at byte ${position + done} (file changed while reading?)`);
    done += bytesRead;
  }
}

/** A tensor's header entry: what the file stores, without the data. */
export interface SafetensorsTensorInfo {
  dtype: SafetensorsDtype;
  shape: number[];
}

/**
 * Reads and validates only a file's header (the same checks as a full read, data excluded), so a
 * multi-gigabyte checkpoint can be described without loading it.
 */
export async function readSafetensorsHeaderFile(path: string): Promise<{ tensors: Map<string, SafetensorsTensorInfo>; metadata: Record<string, string>; bytes: number }> {
  return withHeader(path, ({ entries, metadata, size }) => ({
    tensors: new Map(entries.map((e) => [e.name, { dtype: e.dtype, shape: e.shape }])),
    metadata,
    bytes: size,
  }));
}

/** Opens a safetensors file, reads and validates its header, and hands both to `body`; the file is closed after. */
async function withHeader<R>(
  path: string,
  body: (h: { fh: FileHandle; size: number; dataStart: number } & ParsedHeader) => Promise<R> | R,
): Promise<R> {
  let fh: FileHandle;
  try {
    fh = await open(path, 'r');
  } catch (e) {
    throw new Error(`cannot open ${path}: ${(e as Error).message}`, { cause: e });
  }
  try {
    const { size } = await fh.stat();
    const prefix = new Uint8Array(8);
    if (size >= 8) await readExactly(fh, prefix, 0, path);
    const n = headerLength(prefix, size, path);
    const headerBytes = new Uint8Array(n);
    await readExactly(fh, headerBytes, 8, path);
    const dataStart = 8 + n;
    return await body({ fh, size, dataStart, ...parseHeader(headerBytes, size - dataStart, path) });
  } finally {
    await fh.close();
  }
}

/**
 * Reads a safetensors file tensor by tensor, so files larger than one Node buffer (2 GiB) load and
 * float32 data is read straight into its destination array without an intermediate copy.
 */
export async function readSafetensorsFile(path: string, options?: SafetensorsReadOptions): Promise<SafetensorsContents> {
  return withHeader(path, async ({ fh, dataStart, entries, metadata }) => {
    let scratch = new Uint8Array(0);
    const tensors = new Map<string, SafetensorsTensor>();
    // Entries come sorted by offset and tile the data region, so hashing each span as it is read
    // hashes the region in order, without a second pass over the file.
    const hash = metadata[CHECKSUM_METADATA_KEY] === undefined ? undefined : createHash('sha256');
    for (const e of entries) {
      const data = allocate(options, e.count, path, e.name);
      const span = e.end - e.begin;
      if (e.dtype === 'F32' && LITTLE_ENDIAN) {
        const raw = new Uint8Array(data.buffer, data.byteOffset, span);
        await readExactly(fh, raw, dataStart + e.begin, path);
        hash?.update(raw);
      } else {
        if (scratch.byteLength < span) scratch = new Uint8Array(span);
        const view = scratch.subarray(0, span);
        await readExactly(fh, view, dataStart + e.begin, path);
        hash?.update(view);
        decodeInto(e.dtype, view, data);
      }
      tensors.set(e.name, { dtype: e.dtype, shape: e.shape, data });
    }
    return { tensors, metadata: verifiedMetadata(metadata, hash, path) };
  });
}

interface Layout {
  /** The 8-byte length prefix followed by the padded header. */
  head: Uint8Array;
  order: Array<[string, SafetensorsInput]>;
  dataLength: number;
}

/** Validates the tensors to write and lays out the header deterministically. */
function layout(tensors: ReadonlyMap<string, SafetensorsInput>, metadata: Readonly<Record<string, string>> | undefined): Layout {
  const order = [...tensors.entries()].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
  // The JSON is assembled by hand: object key order is not insertion order for integer-like
  // names, and the byte layout must not depend on such accidents.
  const parts: string[] = [];
  const metaKeys = metadata ? Object.keys(metadata).sort() : [];
  if (metadata && metaKeys.length > 0) {
    const m = metaKeys.map((k) => {
      const v = metadata[k];
      if (typeof v !== 'string') throw new Error(`safetensors metadata '${k}' must be a string, got ${typeof v}`);
      return `${JSON.stringify(k)}:${JSON.stringify(v)}`;
    });
    parts.push(`${JSON.stringify(METADATA_KEY)}:{${m.join(',')}}`);
  }
  let offset = 0;
  for (const [name, t] of order) {
    if (name === METADATA_KEY) throw new Error(`tensor name '${METADATA_KEY}' is reserved by the safetensors format`);
    for (const d of t.shape) {
      if (!Number.isSafeInteger(d) || d < 0) throw new Error(`tensor '${name}': bad dimension ${d} in shape ${fmtShape(t.shape)}`);
    }
    const count = elementCount(t.shape);
    if (count !== t.data.length) {
      throw new Error(`tensor '${name}': shape ${fmtShape(t.shape)} needs ${count} elements but its data has ${t.data.length}`);
    }
    const end = offset + count * 4;
    parts.push(`${JSON.stringify(name)}:{"dtype":"F32","shape":${JSON.stringify(t.shape)},"data_offsets":[${offset},${end}]}`);
    offset = end;
  }
  const json = new TextEncoder().encode(`{${parts.join(',')}}`);
  const padded = Math.ceil(json.byteLength / 8) * 8;
  const head = new Uint8Array(8 + padded).fill(0x20, 8 + json.byteLength);
  head.set(json, 8);
  const dv = new DataView(head.buffer);
  dv.setUint32(0, padded % 2 ** 32, true);
  dv.setUint32(4, Math.floor(padded / 2 ** 32), true);
  return { head, order, dataLength: offset };
}

/** The little-endian float32 bytes of `data` (a view when the platform is little-endian). */
function f32Bytes(data: Float32Array): Uint8Array {
  if (LITTLE_ENDIAN) return new Uint8Array(data.buffer, data.byteOffset, data.byteLength);
  const out = new Uint8Array(data.byteLength);
  const dv = new DataView(out.buffer);
  for (let i = 0; i < data.length; i++) dv.setFloat32(i * 4, data[i]!, true);
  return out;
}

/** Serialises tensors as F32 safetensors bytes (deterministic; see the file comment). */
export function writeSafetensors(
  tensors: ReadonlyMap<string, SafetensorsInput>,
  metadata?: Readonly<Record<string, string>>,
): Uint8Array {
  const { head, order, dataLength } = layout(tensors, metadata);
  const out = new Uint8Array(head.byteLength + dataLength);
  out.set(head, 0);
  let at = head.byteLength;
  for (const [, t] of order) {
    out.set(f32Bytes(t.data), at);
    at += t.data.byteLength;
  }
  return out;
}

/**
 * Writes the bytes `writeSafetensors` would, with the data region's sha256 added to the metadata
 * (`troupe.sha256`, checked on read), to `path`, streamed and atomically (temp file, fsync, rename).
 */
export async function writeSafetensorsFile(
  path: string,
  tensors: ReadonlyMap<string, SafetensorsInput>,
  metadata?: Readonly<Record<string, string>>,
): Promise<void> {
  if (metadata !== undefined && Object.hasOwn(metadata, CHECKSUM_METADATA_KEY)) throw new Error(`safetensors metadata '${CHECKSUM_METADATA_KEY}' is reserved for the checksum`);
  // The header comes first and holds the checksum, so the data is hashed in a pass of its own
  // (over memory, in the order layout() writes it: sorted by name).
  const hash = createHash('sha256');
  for (const [, t] of [...tensors.entries()].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))) hash.update(f32Bytes(t.data));
  const { head, order } = layout(tensors, { ...metadata, [CHECKSUM_METADATA_KEY]: hash.digest('hex') });
  function* chunks(): Generator<Uint8Array> {
    yield head;
    for (const [, t] of order) yield f32Bytes(t.data);
  }
  await writeFileAtomic(path, chunks());
}
