/**
 * The KV cache on the GPU (`CacheLayout` 'device'), for the WebGPU execution provider.
 */
import * as ort from 'onnxruntime-node';
import { prefillInputs, promptClasses, SAMPLE_INPUTS, SAMPLE_OUTPUTS, spreadLogits, stepInputs } from './decode-inputs.ts';
import type { DeviceTensors } from './device-tensors.ts';
import type { Decoder, GenerateRequest } from './generate.ts';


/**
 * The cache on the GPU (`CacheLayout` 'device'): each run's `cache.*` outputs stay there and are
 * the next run's past; dropping rows and copying a shared prompt's rows are gathers on the device.
 * Tensors a run or gather replaced are freed at once (`dispose`), not when collected.
 */
export class DeviceKvDecoder implements Decoder {
  rows: number[];
  logits: Float32Array<ArrayBufferLike> = new Float32Array(0);
  drawn: { tokens: Int32Array; logprobs: Float32Array } | null = null;
  runMs = 0;
  runs = 0;
  /** Per layer [key, value], [B,Hkv,P,D] on the device; null before the prefill. */
  private cache: ort.Tensor[] | null = null;
  /** The sampling graph's [V] mask of ids that may be drawn (built once per request). */
  private keep: ort.Tensor | null = null;
  private filled = 0;

  constructor(
    private readonly req: GenerateRequest,
    private readonly session: ort.InferenceSession,
    private readonly weights: Record<string, ort.Tensor>,
    private readonly Tp: number,
    private readonly device: DeviceTensors,
  ) {
    this.rows = req.prompts.map((_, b) => b);
  }

  /** `draws`: the rows' uniforms, for a graph that samples (contract `sampling` 'device'). */
  private async run(ids: BigInt64Array, pos: BigInt64Array, bias: Float32Array, T: number, draws?: Float32Array): Promise<void> {
    const { numLayers: L, numKvHeads: Hkv, headDim: D, vocabSize: V } = this.req.contract;
    const B = this.rows.length;
    const P = this.filled;
    const feeds: Record<string, ort.Tensor> = {
      ...this.weights,
      input_ids: new ort.Tensor('int64', ids, [B, T]),
      position_ids: new ort.Tensor('int64', pos, [B, T]),
      attention_bias: new ort.Tensor('float32', bias, [B, T, P + T]),
    };
    const sampling = this.req.contract.sampling === 'device';
    if (sampling) {
      // Without draws the graph's draw is computed and ignored (the logits come back instead).
      feeds[SAMPLE_INPUTS.uniform] = new ort.Tensor('float32', draws ?? new Float32Array(B), [B]);
      feeds[SAMPLE_INPUTS.inverseTemperature] = new ort.Tensor('float32', Float32Array.of(this.req.sampling.temperature > 0 ? 1 / this.req.sampling.temperature : 1), [1]);
      feeds[SAMPLE_INPUTS.keep] = (this.keep ??= keepMask(V, this.req.maskedTokens ?? []));
    } else if (draws) {
      throw new Error("decode: draws for a graph that does not sample (contract sampling is not 'device')");
    }
    // Before the prefill the past is empty: [B,Hkv,0,D] from the host.
    const past = this.cache ?? new Array<ort.Tensor>(2 * L).fill(new ort.Tensor('float32', new Float32Array(0), [B, Hkv, 0, D]));
    for (let i = 0; i < L; i++) {
      feeds[`past_key_values.${i}.key`] = past[2 * i]!;
      feeds[`past_key_values.${i}.value`] = past[2 * i + 1]!;
    }
    const t0 = performance.now();
    const out = await this.session.run(feeds);
    this.runMs += performance.now() - t0;
    this.runs++;
    const next: ort.Tensor[] = [];
    for (let i = 0; i < L; i++) {
      for (const kv of ['key', 'value']) {
        const t = out[`cache.${i}.${kv}`];
        if (!t) throw new Error(`decode: the graph returned no 'cache.${i}.${kv}' (a 'device' decode graph must)`);
        next.push(t);
      }
    }
    const logits = out['logits'];
    if (!logits) throw new Error("decode: the graph returned no 'logits'");
    this.replace(next);
    this.filled += T;
    if (draws) {
      const token = out[SAMPLE_OUTPUTS.token];
      const logprob = out[SAMPLE_OUTPUTS.logprob];
      if (!token || !logprob) throw new Error(`decode: a sampling graph returned no '${SAMPLE_OUTPUTS.token}' or '${SAMPLE_OUTPUTS.logprob}'`);
      this.drawn = { tokens: Int32Array.from(token.data as Float32Array), logprobs: logprob.data as Float32Array };
      if (logits.location === 'gpu-buffer') logits.dispose();
      return;
    }
    this.drawn = null;
    if (logits.location === 'gpu-buffer') {
      // A sampling graph keeps its logits on the GPU; this step samples on the host. (A GPU
      // tensor's own getData aborts in onnxruntime-node: device-tensors.ts copies it back.)
      this.logits = (await this.device.toHost(logits)).data as Float32Array;
      logits.dispose();
    } else {
      this.logits = logits.data as Float32Array;
    }
  }

  private replace(next: ort.Tensor[]): void {
    for (const t of this.cache ?? []) if (!next.includes(t)) t.dispose();
    this.cache = next;
  }

  private async gather(rows: readonly number[]): Promise<void> {
    const next: ort.Tensor[] = [];
    for (const t of this.cache!) next.push(await this.device.gatherRows(t, rows));
    this.replace(next);
  }

  async prefill(): Promise<void> {
    const all = this.rows;
    const { u, distinct } = promptClasses(this.req, all);
    const { ids, pos, bias } = prefillInputs(this.req, distinct, this.Tp);
    this.rows = distinct;
    await this.run(ids, pos, bias, this.Tp);
    this.rows = all;
    if (distinct.length === all.length) return;
    await this.gather(u);
    this.logits = spreadLogits(this.logits, u, this.req.contract.vocabSize);
  }

  async step(ids: BigInt64Array, n: number, draws?: Float32Array): Promise<void> {
    const { pos, bias } = stepInputs(this.req, this.rows, this.Tp, this.filled, n);
    await this.run(ids, pos, bias, 1, draws);
  }

  async retain(keep: readonly number[]): Promise<void> {
    await this.gather(keep);
    this.rows = keep.map((k) => this.rows[k]!);
    const V = this.req.contract.vocabSize;
    this.logits = new Float32Array(keep.length * V);
  }

  release(): void {
    this.replace([]);
  }
}

/** [V] float32: 1 for ids that may be drawn, 0 for the request's masked ids. */
function keepMask(V: number, masked: ArrayLike<number>): ort.Tensor {
  const keep = new Float32Array(V).fill(1);
  for (let i = 0; i < masked.length; i++) keep[masked[i]!] = 0;
  return new ort.Tensor('float32', keep, [V]);
}
