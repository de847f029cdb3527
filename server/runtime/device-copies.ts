/**
 * GPU copies of the engine's resident tensors, for sessions that run on WebGPU.
 *
 * onnxruntime-node copies every host input to the device on each run. Weights live on the host
 * as resident tensors, so a WebGPU decode step used to move every weight to the GPU again: on an
 * H100, eight [32,1024]×[1024,1024] products took 40.7 ms fed from the host and 1.9 ms fed from
 * device copies (README, GPU).
 *
 * A device copy is made by running a one-node graph (y = x · 1, exact) whose output stays on the
 * GPU (`preferredOutputLocation: 'gpu-buffer'`); ONNX Runtime's WebGPU provider shares one device
 * between sessions, so any session takes it as an input. A copy is tied to its host tensor object
 * and made again only after that object is written: `stale` must be called for every in-place
 * write (a run's output written into a resident, accumulate) and for every host tensor that is
 * replaced or dropped, which also frees the GPU buffer at once instead of whenever the collector
 * finds the wrapper.
 */
import * as ort from 'onnxruntime-node';
import { Graph } from '../compiler/ir.ts';
import { emitOnnx } from '../compiler/onnx-emit.ts';

/** The element types that get device copies; the rest (int64 ids, packed int4/int8 codes) are fed from the host. */
const COPIED = new Set<ort.Tensor.Type>(['float32', 'float16']);

export class DeviceCopies {
  private readonly copies = new Map<ort.Tensor, ort.Tensor>();
  /** One uploading session, and one row-gathering session, per element type and rank (graph inputs have a fixed rank). */
  private readonly uploaders = new Map<string, Promise<ort.InferenceSession>>();
  private readonly gatherers = new Map<string, Promise<ort.InferenceSession>>();
  /** Host→device copies made so far (tests read it to see that an unchanged tensor is not copied again). */
  uploads = 0;

  constructor(private readonly provider: 'webgpu') {}

  /** Whether `host` is of a kind that gets a device copy. */
  static copies(host: ort.Tensor): boolean {
    return host.location === 'cpu' && COPIED.has(host.type) && host.dims.length >= 1 && host.dims.length <= 4 && host.size > 0;
  }

  /** The device copy of `host`, made now if there is none or the host tensor was written since. */
  async of(host: ort.Tensor): Promise<ort.Tensor> {
    if (!DeviceCopies.copies(host)) return host;
    const have = this.copies.get(host);
    if (have) return have;
    const uploader = await this.uploader(host.type, host.dims.length);
    const copy = (await uploader.run({ x: host }))['y'];
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
    if (t.type !== 'float32' && t.type !== 'float16') throw new Error(`gatherRows: ${t.type} tensors are not gathered on the device`);
    const key = `${t.type}/${t.dims.length}`;
    let s = this.gatherers.get(key);
    if (!s) {
      const dtype = t.type;
      const b = new Graph();
      const x = b.input('x', dtype, Array.from({ length: t.dims.length }, (_, i) => `d${i}`));
      const idx = b.input('rows', 'int64', ['N']);
      s = this.session(emitOnnx([['y', b.gather(x, idx, 0)]], { name: `gather-rows-${dtype}-${t.dims.length}` }));
      this.gatherers.set(key, s);
    }
    const out = (await (await s).run({ x: t, rows: new ort.Tensor('int64', BigInt64Array.from(rows, (r) => BigInt(r)), [rows.length]) }))['y'];
    if (!out) throw new Error('gatherRows: the gather produced no output');
    return out;
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

  async release(): Promise<void> {
    for (const host of [...this.copies.keys()]) this.stale(host);
    for (const s of [...this.uploaders.values(), ...this.gatherers.values()]) await (await s).release();
    this.uploaders.clear();
    this.gatherers.clear();
  }

  private uploader(type: ort.Tensor.Type, rank: number): Promise<ort.InferenceSession> {
    const key = `${type}/${rank}`;
    let s = this.uploaders.get(key);
    if (!s) {
      const dtype = type === 'float16' ? 'float16' : 'float32';
      const b = new Graph();
      const x = b.input('x', dtype, Array.from({ length: rank }, (_, i) => `d${i}`));
      const model = emitOnnx([['y', b.mul(x, b.scalar(1, dtype))]], { name: `device-copy-${dtype}-${rank}` });
      s = this.session(model);
      this.uploaders.set(key, s);
    }
    return s;
  }

  /** A helper session whose outputs stay on the device. */
  private session(model: Uint8Array): Promise<ort.InferenceSession> {
    return ort.InferenceSession.create(model, { executionProviders: [this.provider], logSeverityLevel: 3, preferredOutputLocation: 'gpu-buffer' });
  }
}
