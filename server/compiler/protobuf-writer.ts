/**
 * A minimal protocol-buffers encoder: exactly the wire types the ONNX messages we emit use.
 * Output depends only on the calls made, never on hash or insertion order, which is what makes
 * emission deterministic.
 */
export class ProtoWriter {
  private chunks: Uint8Array[] = [];
  private scratch: number[] = [];

  private flushScratch(): void {
    if (this.scratch.length) {
      this.chunks.push(Uint8Array.from(this.scratch));
      this.scratch = [];
    }
  }

  private rawVarint(v: number | bigint): void {
    let x = typeof v === 'bigint' ? v : BigInt(v);
    // Negative int64 values are encoded as their 64-bit two's complement (10 bytes).
    if (x < 0n) x += 1n << 64n;
    while (x >= 0x80n) {
      this.scratch.push(Number(x & 0x7fn) | 0x80);
      x >>= 7n;
    }
    this.scratch.push(Number(x));
  }

  private tag(field: number, wire: number): void {
    this.rawVarint((field << 3) | wire);
  }

  /** int32 / int64 / enum / bool. */
  varint(field: number, v: number | bigint): this {
    if (typeof v === 'number' && !Number.isSafeInteger(v)) throw new Error(`protobuf varint field ${field}: ${v} is not a safe integer`);
    this.tag(field, 0);
    this.rawVarint(v);
    return this;
  }

  float(field: number, v: number): this {
    this.tag(field, 5);
    const b = new Uint8Array(4);
    new DataView(b.buffer).setFloat32(0, v, true);
    this.scratch.push(...b);
    return this;
  }

  bytes(field: number, data: Uint8Array): this {
    this.tag(field, 2);
    this.rawVarint(data.length);
    this.flushScratch();
    this.chunks.push(data);
    return this;
  }

  string(field: number, s: string): this {
    return this.bytes(field, new TextEncoder().encode(s));
  }

  message(field: number, build: (w: ProtoWriter) => void): this {
    const inner = new ProtoWriter();
    build(inner);
    return this.bytes(field, inner.finish());
  }

  finish(): Uint8Array {
    this.flushScratch();
    const total = this.chunks.reduce((n, c) => n + c.length, 0);
    const out = new Uint8Array(total);
    let off = 0;
    for (const c of this.chunks) {
      out.set(c, off);
      off += c.length;
    }
    return out;
  }
}
