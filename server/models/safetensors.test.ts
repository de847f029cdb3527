import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFile, readdir, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { createHash } from 'node:crypto';
import { CHECKSUM_METADATA_KEY, ChecksumMismatchError, readSafetensors, readSafetensorsFile, writeSafetensors, writeSafetensorsFile } from './safetensors.ts';
import type { SafetensorsInput } from './safetensors.ts';
import { bitsOf, escapeRe, rejectsMessage, throwsMessage, withTempDir } from './test-util.ts';

/** A safetensors file from a header (object or raw string) and data bytes, padded like real writers. */
function rawFile(header: unknown, data: Uint8Array | number[] = []): Uint8Array {
  let json = typeof header === 'string' ? header : JSON.stringify(header);
  while ((json.length % 8) !== 0) json += ' ';
  const h = new TextEncoder().encode(json);
  const out = new Uint8Array(8 + h.byteLength + data.length);
  new DataView(out.buffer).setUint32(0, h.byteLength, true);
  out.set(h, 8);
  out.set(data, 8 + h.byteLength);
  return out;
}

function sample(): Map<string, SafetensorsInput> {
  return new Map<string, SafetensorsInput>([
    ['layers.1.w', { shape: [2, 3], data: new Float32Array([1, -2, 3.5, Number.NaN, -0, 1e-40]) }],
    ['embed.weight', { shape: [4], data: new Float32Array([0.1, 0.2, Infinity, -Infinity]) }],
    ['empty', { shape: [0, 5], data: new Float32Array(0) }],
    ['scalar', { shape: [], data: new Float32Array([42]) }],
  ]);
}


test('round trip is bit-exact and keeps metadata', () => {
  const input = sample();
  const bytes = writeSafetensors(input, { b: '2', a: 'x' });
  const { tensors, metadata } = readSafetensors(bytes, 'mem');
  assert.deepEqual(metadata, { a: 'x', b: '2' });
  assert.deepEqual([...tensors.keys()].sort(), [...input.keys()].sort());
  for (const [name, t] of input) {
    const r = tensors.get(name);
    assert.ok(r, name);
    assert.equal(r.dtype, 'F32');
    assert.deepEqual(r.shape, [...t.shape]);
    assert.deepEqual(bitsOf(r.data), bitsOf(t.data), name);
  }
});

test('writing is deterministic, sorted by name, 8-byte aligned and space-padded', () => {
  const a = writeSafetensors(sample(), { k: 'v' });
  const reversed = new Map([...sample()].reverse());
  const b = writeSafetensors(reversed, { k: 'v' });
  assert.deepEqual(a, b);
  const n = new DataView(a.buffer).getUint32(0, true);
  assert.equal(n % 8, 0);
  const header = new TextDecoder().decode(a.subarray(8, 8 + n));
  assert.match(header, /^\{"__metadata__":\{"k":"v"\},"embed\.weight":.*"scalar":.*\} *$/);
  const parsed = JSON.parse(header) as Record<string, { data_offsets: [number, number] }>;
  assert.deepEqual(parsed['embed.weight']?.data_offsets, [0, 16]);
  assert.deepEqual(parsed['empty']?.data_offsets, [16, 16]);
  assert.deepEqual(parsed['layers.1.w']?.data_offsets, [16, 40]);
  assert.deepEqual(parsed['scalar']?.data_offsets, [40, 44]);
  assert.equal(a.byteLength, 8 + n + 44);
});

test('empty tensor map writes a valid file', () => {
  const bytes = writeSafetensors(new Map());
  assert.equal(bytes.byteLength, 16);
  assert.equal(readSafetensors(bytes, 'mem').tensors.size, 0);
});

test('F16 decodes to hand-computed values', () => {
  const halves = [0x3c00, 0xc000, 0x3800, 0x3555, 0x7bff, 0x0001, 0x03ff, 0x0400, 0x8000, 0x7c00, 0xfc00, 0x7e00];
  const expected = [1, -2, 0.5, 0.333251953125, 65504, 2 ** -24, 1023 * 2 ** -24, 2 ** -14, -0, Infinity, -Infinity, Number.NaN];
  const data = halves.flatMap((h) => [h & 0xff, h >>> 8]);
  const file = rawFile({ h: { dtype: 'F16', shape: [halves.length], data_offsets: [0, data.length] } }, data);
  const t = readSafetensors(file, 'f16.safetensors').tensors.get('h');
  assert.equal(t?.dtype, 'F16');
  assert.deepEqual([...t.data], expected); // deepEqual uses Object.is: -0 and NaN are checked exactly
});

test('BF16 decodes to hand-computed values', () => {
  const halves = [0x3f80, 0xc040, 0x3eab, 0x4049, 0x7f80, 0x0001, 0x8000];
  const expected = [1, -3, 0.333984375, 3.140625, Infinity, Math.fround(2 ** -133), -0];
  const data = halves.flatMap((h) => [h & 0xff, h >>> 8]);
  const file = rawFile({ b: { dtype: 'BF16', shape: [halves.length], data_offsets: [0, data.length] } }, data);
  const t = readSafetensors(file, 'bf16.safetensors').tensors.get('b');
  assert.equal(t?.dtype, 'BF16');
  assert.deepEqual([...t.data], expected);
});

test('F64 decodes (rounded to float32)', () => {
  const f64 = new Float64Array([0.1, -1e300, 2]);
  const file = rawFile({ d: { dtype: 'F64', shape: [3], data_offsets: [0, 24] } }, new Uint8Array(f64.buffer));
  const t = readSafetensors(file, 'f64').tensors.get('d');
  assert.deepEqual([...(t?.data ?? [])], [Math.fround(0.1), -Infinity, 2]);
});

test('the allocator places data, e.g. on a SharedArrayBuffer', () => {
  const alloc = (n: number): Float32Array => new Float32Array(new SharedArrayBuffer(n * 4));
  const { tensors } = readSafetensors(writeSafetensors(sample()), 'mem', { alloc });
  for (const t of tensors.values()) assert.ok(t.data.buffer instanceof SharedArrayBuffer);
  throwsMessage(
    () => readSafetensors(writeSafetensors(sample()), 'mem', { alloc: () => new Float32Array(1) }),
    /mem: tensor '(embed\.weight|empty|layers\.1\.w)': allocator returned 1 elements/,
  );
});

test('truncating a real file anywhere gives a named error', () => {
  const bytes = writeSafetensors(sample());
  const dataStart = 8 + new DataView(bytes.buffer).getUint32(0, true);
  const cuts: Array<[number, RegExp]> = [
    [0, /^cut\.safetensors: file is 0 bytes, shorter than the 8-byte/],
    [5, /^cut\.safetensors: file is 5 bytes, shorter than the 8-byte/],
    [8, /^cut\.safetensors: header length \d+ runs past the end of the 8-byte file/],
    [30, /^cut\.safetensors: header length \d+ runs past the end/],
    [dataStart - 1, /^cut\.safetensors: header length \d+ runs past the end/],
    [dataStart, /^cut\.safetensors: tensor 'embed\.weight': data_offsets \[0, 16\] run past the 0-byte data region/],
    [dataStart + 20, /^cut\.safetensors: tensor 'layers\.1\.w': data_offsets \[16, 40\] run past the 20-byte data region/],
    [bytes.byteLength - 1, /^cut\.safetensors: tensor 'scalar': data_offsets \[40, 44\] run past the 43-byte data region/],
  ];
  for (const [at, re] of cuts) {
    throwsMessage(() => readSafetensors(bytes.subarray(0, at), 'cut.safetensors'), re, `cut at ${at}`);
  }
});

test('corrupt headers give errors naming the file and tensor', () => {
  const ok = { a: { dtype: 'F32', shape: [2], data_offsets: [0, 8] } };
  const eight = new Uint8Array(8);
  const cases: Array<[string, Uint8Array, RegExp]> = [
    ['not JSON', rawFile('{"a": nope}'), /^bad: header is not valid UTF-8 JSON/],
    ['bad UTF-8', rawFile('{}', []).map((b, i) => (i === 8 ? 0xff : b)), /^bad: header is not valid UTF-8 JSON/],
    ['array', rawFile('[1, 2]'), /^bad: header is not a JSON object/],
    ['number', rawFile('7'), /^bad: header is not a JSON object/],
    ['unknown dtype', rawFile({ a: { dtype: 'Q8', shape: [2], data_offsets: [0, 8] } }, eight), /^bad: tensor 'a': unknown or unsupported dtype 'Q8'/],
    ['int dtype', rawFile({ a: { dtype: 'I64', shape: [1], data_offsets: [0, 8] } }, eight), /^bad: tensor 'a': unknown or unsupported dtype 'I64'/],
    ['size mismatch', rawFile({ a: { dtype: 'F32', shape: [3], data_offsets: [0, 8] } }, eight), /^bad: tensor 'a': shape \[3\] of F32 needs 12 bytes but data_offsets \[0, 8\] span 8/],
    ['reversed offsets', rawFile({ a: { dtype: 'F32', shape: [0], data_offsets: [8, 0] } }, eight), /^bad: tensor 'a': data_offsets \[8, 0\] end before they begin/],
    ['missing offsets', rawFile({ a: { dtype: 'F32', shape: [2] } }, eight), /^bad: tensor 'a': invalid header entry:\n {2}data_offsets:/],
    ['negative dim', rawFile({ a: { dtype: 'F32', shape: [-2], data_offsets: [0, 8] } }, eight), /^bad: tensor 'a': invalid header entry:\n {2}shape\.0:/],
    ['out of range', rawFile({ a: { dtype: 'F32', shape: [2], data_offsets: [4, 12] } }, eight), /^bad: tensor 'a': data_offsets \[4, 12\] run past the 8-byte data region/],
    [
      'overlap',
      rawFile({ a: { dtype: 'F32', shape: [2], data_offsets: [0, 8] }, b: { dtype: 'F32', shape: [1], data_offsets: [4, 8] } }, eight),
      /^bad: tensors 'a' \[0, 8\] and 'b' \[4, 8\] overlap/,
    ],
    ['gap at start', rawFile({ a: { dtype: 'F32', shape: [1], data_offsets: [4, 8] } }, eight), /^bad: data bytes \[0, 4\) at the start belong to no tensor \(gap before 'a'\)/],
    [
      'gap between',
      rawFile({ a: { dtype: 'F32', shape: [1], data_offsets: [0, 4] }, b: { dtype: 'F32', shape: [1], data_offsets: [8, 12] } }, new Uint8Array(12)),
      /^bad: data bytes \[4, 8\) after 'a' belong to no tensor \(gap before 'b'\)/,
    ],
    ['trailing', rawFile(ok, new Uint8Array(12)), /^bad: data region is 12 bytes but tensors cover 8: 4 trailing bytes after tensor 'a'/],
    ['bad metadata', rawFile({ __metadata__: { n: 1 }, ...ok }, eight), /^bad: header __metadata__ must map strings to strings/],
  ];
  for (const [what, bytes, re] of cases) throwsMessage(() => readSafetensors(bytes, 'bad'), re, what);

  const huge = rawFile(ok, eight);
  new DataView(huge.buffer).setUint32(4, 1, true); // header length >= 2^32
  throwsMessage(() => readSafetensors(huge, 'bad'), /^bad: header length \d+ exceeds the 100000000-byte limit/);
});

test('flipping any header byte never crashes and never silently changes data', () => {
  const bytes = writeSafetensors(sample());
  const dataStart = 8 + new DataView(bytes.buffer).getUint32(0, true);
  const original = readSafetensors(bytes, 'orig').tensors;
  for (let i = 8; i < dataStart; i++) {
    const copy = bytes.slice();
    copy[i] = copy[i]! ^ 0x20; // e.g. '"' → '\x02', '{' → '[', digits → other characters
    let result;
    try {
      result = readSafetensors(copy, 'flip');
    } catch (e) {
      assert.match((e as Error).message, /^flip: /, `byte ${i}`);
      continue;
    }
    // A flip that still parses may only rename a tensor or touch padding; data per offset is unchanged.
    const flat = (m: typeof original): number[] => [...m.values()].flatMap((t) => bitsOf(t.data));
    assert.deepEqual(flat(result.tensors), flat(original), `byte ${i}`);
  }
});

test('writing rejects inconsistent tensors, naming them', () => {
  throwsMessage(
    () => writeSafetensors(new Map([['w', { shape: [2, 2], data: new Float32Array(3) }]])),
    /tensor 'w': shape \[2, 2\] needs 4 elements but its data has 3/,
  );
  throwsMessage(() => writeSafetensors(new Map([['w', { shape: [1.5], data: new Float32Array(1) }]])), /tensor 'w': bad dimension 1.5/);
  throwsMessage(() => writeSafetensors(new Map([['__metadata__', { shape: [0], data: new Float32Array(0) }]])), /reserved/);
});

test('file helpers: streamed write equals in-memory bytes, atomic, and file reads validate too', async () => {
  await withTempDir(async (dir) => {
    const path = join(dir, 'model.safetensors');
    const alloc = (n: number): Float32Array => new Float32Array(new SharedArrayBuffer(n * 4));
    const shared = new Map([...sample()].map(([k, v]) => [k, { shape: v.shape, data: alloc(v.data.length) }] as const));
    for (const [k, v] of shared) v.data.set(sample().get(k)!.data);
    await writeSafetensorsFile(path, shared, { m: '1' });
    const bytes = await readFile(path);
    // The in-memory bytes plus the data region's sha256 in the metadata.
    const plain = writeSafetensors(sample(), { m: '1' });
    const sha = createHash('sha256').update(plain.subarray(plain.byteLength - 4 * [...sample().values()].reduce((n, t) => n + t.data.length, 0))).digest('hex');
    assert.deepEqual(new Uint8Array(bytes), writeSafetensors(sample(), { m: '1', [CHECKSUM_METADATA_KEY]: sha }));
    assert.deepEqual(await readdir(dir), ['model.safetensors']); // no temp file left behind

    const { tensors, metadata } = await readSafetensorsFile(path, { alloc });
    assert.deepEqual(metadata, { m: '1' });
    for (const [name, t] of sample()) assert.deepEqual(bitsOf(tensors.get(name)!.data), bitsOf(t.data));
    assert.ok(tensors.get('scalar')!.data.buffer instanceof SharedArrayBuffer);

    const f16 = join(dir, 'half.safetensors');
    await writeFile(f16, rawFile({ h: { dtype: 'F16', shape: [2], data_offsets: [0, 4] } }, [0x00, 0x3c, 0x00, 0xc0]));
    assert.deepEqual([...(await readSafetensorsFile(f16)).tensors.get('h')!.data], [1, -2]);

    const cut = join(dir, 'cut.safetensors');
    await writeFile(cut, bytes.subarray(0, bytes.byteLength - 3));
    await rejectsMessage(readSafetensorsFile(cut), new RegExp(`^${escapeRe(cut)}: tensor 'scalar'.*run past`));
    await rejectsMessage(readSafetensorsFile(join(dir, 'nope.safetensors')), /cannot open .*nope\.safetensors/);
    await writeFile(cut, bytes.subarray(0, 4));
    await rejectsMessage(readSafetensorsFile(cut), /cut\.safetensors: file is 4 bytes/);
  });
});

test('checksums: a written file carries its sha256; zero-filled or flipped data fails naming the file; a file without one loads', async () => {
  await withTempDir(async (dir) => {
    const path = join(dir, 'w.safetensors');
    await writeSafetensorsFile(path, sample(), { m: '1' });
    const good = new Uint8Array(await readFile(path));
    const dataLength = 4 * [...sample().values()].reduce((n, t) => n + t.data.length, 0);
    const dataStart = good.byteLength - dataLength;
    assert.deepEqual((await readSafetensorsFile(path)).metadata, { m: '1' }, 'the checksum key is not returned');
    assert.deepEqual(readSafetensors(good, 'mem').metadata, { m: '1' });

    const isMismatch = (file: string) => (e: unknown): boolean => {
      assert.ok(e instanceof ChecksumMismatchError, String(e));
      assert.equal(e.path, file);
      assert.match(e.message, new RegExp(`^${escapeRe(file)}: checksum mismatch`));
      return true;
    };
    const zeroed = join(dir, 'zeroed.safetensors');
    const z = good.slice();
    z.fill(0, dataStart);
    await writeFile(zeroed, z);
    await assert.rejects(readSafetensorsFile(zeroed), isMismatch(zeroed));
    assert.throws(() => readSafetensors(z, zeroed), isMismatch(zeroed));

    const flipped = join(dir, 'flipped.safetensors');
    const f = good.slice();
    f[good.byteLength - 1]! ^= 0x01;
    await writeFile(flipped, f);
    await assert.rejects(readSafetensorsFile(flipped), isMismatch(flipped));

    // Written before checksums existed (or by another tool): no key, no check, same tensors.
    const old = join(dir, 'old.safetensors');
    await writeFile(old, writeSafetensors(sample(), { m: '1' }));
    const loaded = await readSafetensorsFile(old);
    assert.deepEqual(loaded.metadata, { m: '1' });
    for (const [name, t] of sample()) assert.deepEqual(bitsOf(loaded.tensors.get(name)!.data), bitsOf(t.data));

    await assert.rejects(writeSafetensorsFile(join(dir, 'x.safetensors'), sample(), { [CHECKSUM_METADATA_KEY]: 'mine' }), /reserved for the checksum/);
  });
});
