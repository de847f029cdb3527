/**
 * Tensors kept on the GPU for WebGPU sessions, and the few operations the engine worker needs on
 * them: device copies of host residents, row gathers, copies back to the host, and x + k·y.
 *
 * onnxruntime-node copies every host input to the device on each run. Weights live on the host
 * as resident tensors, so a WebGPU decode step used to move every weight to the GPU again: on an
 * H100, eight [32,1024]×[1024,1024] products took 40.7 ms fed from the host and 1.9 ms fed from
 * device copies (docs/gpu.md).
 *
 * Each operation is a one-node helper graph, one session per element type and rank, whose output
 * stays on the GPU (`preferredOutputLocation: 'gpu-buffer'`) or, for `toHost`, comes back; ONNX
 * Runtime's WebGPU provider shares one device between sessions, so any session takes the result
 * as an input. (onnxruntime-node cannot read a GPU tensor's data itself: `getData` aborts.)
 *
 * A device copy (y = x · 1, exact) is tied to its host tensor object and made again only after
 * that object is written: `stale` must be called for every in-place write (a run's output written
 * into a resident, accumulate) and for every host tensor that is replaced or dropped, which also
 * frees the GPU buffer at once instead of whenever the collector finds the wrapper.
 */
import * as ort from 'onnxruntime-node';
import { float16Bits } from '../compiler/float16.ts';
import { Graph, type Node } from '../compiler/ir.ts';
import { emitOnnx } from '../compiler/onnx-emit.ts';

/** The element types that get device copies; the rest (int64 ids, packed int4/int8 codes) are fed from the host. */
const COPIED = new Set<ort.Tensor.Type>(['float32', 'float16']);

export class DeviceTensors {
  private readonly copies = new Map<ort.Tensor, ort.Tensor>();
  /**
   * Helper sessions, one per element type and rank (graph inputs have a fixed rank): host→device
   * copies, row gathers, device→host copies, and x + k·y.
   */
  private readonly uploaders = new Map<string, Promise<ort.InferenceSession>>();
  private readonly gatherers = new Map<string, Promise<ort.InferenceSession>>();
  private readonly downloaders = new Map<string, Promise<ort.InferenceSession>>();
  private readonly adders = new Map<string, Promise<ort.InferenceSession>>();
  /** Host→device copies made so far (tests read it to see that an unchanged tensor is not copied again). */
  uploads = 0;

  constructor(private readonly provider: 'webgpu') {}

  /** Whether `host` is of a kind that gets a device copy. */
  static copies(host: ort.Tensor): boolean {
    return host.location === 'cpu' && COPIED.has(host.type) && host.dims.length >= 1 && host.dims.length <= 4 && host.size > 0;
  }

  /** The device copy of `host`, made now if there is none or the host tensor was written since. */
  async of(host: ort.Tensor): Promise<ort.Tensor> {
    if (!DeviceTensors.copies(host)) return host;
    const have = this.copies.get(host);
    if (have) return have;
    const uploader = this.helper(this.uploaders, host, 'device-copy', (b, x) => b.mul(x, b.scalar(1, x.dtype)), true);
    const copy = (await (await uploader).run({ x: host }))['y'];
    if (!copy || copy.location !== 'gpu-buffer') throw new Error(`device copy of a ${host.type}[${host.dims.join(', ')}] tensor came back on '${copy?.location ?? 'nothing'}', not the GPU`);
    this.copies.set(host, copy);
    this.uploads++;
    return copy;
  }

  /**
   * Rows `rows` of `t` along its first axis, as a new tensor on the device (`t` stays as it is):
   * how a KV cache kept on the GPU drops finished rows or copies a shared prompt's rows.
   */
  async gatherRows(t: ort.Tensor, rows: readonly number[]): Promise<ort.Tensor> {
    const s = this.helper(this.gatherers, t, 'gather-rows', (b, x) => b.gather(x, b.input('rows', 'int64', ['N']), 0), true);
    return this.output(await (await s).run({ x: t, rows: new ort.Tensor('int64', BigInt64Array.from(rows, (r) => BigInt(r)), [rows.length]) }), 'gather-rows');
  }

  /** A host copy of device tensor `t` (a resident a train step left on the GPU, read by a checkpoint). */
  async toHost(t: ort.Tensor): Promise<ort.Tensor> {
    if (t.location === 'cpu') return t;
    const s = this.helper(this.downloaders, t, 'to-host', (b, x) => b.mul(x, b.scalar(1, x.dtype)), false);
    return this.output(await (await s).run({ x: t }), 'to-host');
  }

  /** x + k·y, left on the device: gradient accumulation over device residents. */
  async addScaled(x: ort.Tensor, y: ort.Tensor, k: number): Promise<ort.Tensor> {
    if (x.type !== y.type || x.dims.length !== y.dims.length || x.dims.some((d, i) => d !== y.dims[i])) {
      throw new Error(`addScaled: ${x.type}[${x.dims.join(', ')}] and ${y.type}[${y.dims.join(', ')}] differ`);
    }
    const s = this.helper(this.adders, x, 'add-scaled', (b, a) => {
      const other = b.input('other', a.dtype, a.shape);
      const scale = b.input('scale', a.dtype, []);
      return b.add(a, b.mul(scale, other));
    }, true);
    const kt = x.type === 'float16' ? new ort.Tensor('float16', Uint16Array.from([float16Bits(k)]), []) : new ort.Tensor('float32', Float32Array.from([k]), []);
    return this.output(await (await s).run({ x, other: y, scale: kt }), 'add-scaled');
  }

  /** One helper session per element type and rank: `y = body(x)`, its output on the device or the host. */
  private helper(cache: Map<string, Promise<ort.InferenceSession>>, t: ort.Tensor, what: string, body: (b: Graph, x: Node) => Node, onDevice: boolean): Promise<ort.InferenceSession> {
    if (t.type !== 'float32' && t.type !== 'float16') throw new Error(`${what}: ${t.type} tensors are not handled on the device`);
    const key = `${t.type}/${t.dims.length}`;
    let s = cache.get(key);
    if (!s) {
      const b = new Graph();
      const x = b.input('x', t.type, Array.from({ length: t.dims.length }, (_, i) => `d${i}`));
      const model = emitOnnx([['y', body(b, x)]], { name: `${what}-${t.type}-${t.dims.length}` });
      s = onDevice ? this.session(model) : ort.InferenceSession.create(model, { executionProviders: [this.provider], logSeverityLevel: 3 });
      cache.set(key, s);
    }
    return s;
  }

  private output(r: ort.InferenceSession.OnnxValueMapType, what: string): ort.Tensor {
    const y = r['y'];
    if (!y) throw new Error(`${what}: the helper graph produced no output`);
    return y as ort.Tensor;
  }

  /** Forgets (and frees) the device copy of `host`: it was written, replaced or dropped. */
  stale(host: ort.Tensor | undefined): void {
    if (!host) return;
    const copy = this.copies.get(host);
    if (!copy) return;
    this.copies.delete(host);
    copy.dispose();
  }

  /** Bytes held on the device by copies. */
  get bytes(): number {
    let n = 0;
    for (const host of this.copies.keys()) n += host.size * (host.type === 'float16' ? 2 : 4);
    return n;
  }

  get count(): number {
    return this.copies.size;
  }

  /** A helper session whose outputs stay on the device. */
  private session(model: Uint8Array): Promise<ort.InferenceSession> {
    return ort.InferenceSession.create(model, { executionProviders: [this.provider], logSeverityLevel: 3, preferredOutputLocation: 'gpu-buffer' });
  }
}
