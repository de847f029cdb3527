/**
 * A trainable policy: one model (and optionally one LoRA adapter) living in an engine worker,
 * with the operations the RL trainer needs — generate, score, train (PPO or cross-entropy) with
 * AdamW — and snapshots for checkpoints.
 *
 * Resident tensors in the worker, per policy id:
 *   `{id}:w:{name}`  weights         `{id}:g:{name}`  gradients (accumulated over micro-batches)
 *   `{id}:m:` `{id}:v:` AdamW moments, `{id}:n:` `{id}:m2:` `{id}:v2:` the optimizer's outputs,
 *   swapped in after a finite update (double buffering: nothing is allocated per step),
 *   `{id}:ref:{name}` the frozen reference weights for the KL term in full fine-tuning.
 * With LoRA the trainable tensors are the adapter's (`{id}:w:layers.0.attn.q.lora_A`, …) and
 * the reference policy is the base model with the adapter off, so no copy is needed. The frozen
 * base then lives once per engine under `base:{baseKey}:{name}`, shared by every LoRA policy
 * given the same `baseKey` (every agent's adapter at L2), and so do their compiled sessions
 * (`shared:…`, the same graphs over the same base): one copy of the base weights and one set
 * of ONNX Runtime arenas, whatever the number of agents.
 */
import { createHash } from 'node:crypto';
import { Engine, type SessionOptions } from '../runtime/engine.ts';
import type { GenerateResult, GenerateStep, TopAlternatives } from '../runtime/generate.ts';
import { maskLogits, type SamplingParams } from '../runtime/sampler.ts';
import { tokenLogprob, topLogprobs } from '../runtime/top-logprobs.ts';
import { f32, i64, type HostTensor } from '../runtime/tensor.ts';
import { buildAdamW, buildDecode, buildFeatures, buildRowLogits, buildScore, buildTrainStep, loweringFor, type Artifact } from './artifacts.ts';
import { type ModelConfig, modelDims, parameterShapes } from './model-config.ts';
import { plainDecode, RolloutDecoder, type DecodeSettings } from './rollout-decoder.ts';
import { learningRate, type OptimizerConfig } from './optimizer.ts';
import { groupedByPrompt, microBatches, packBatch, type MicroBatchLimits, type TrainSequence } from './train-batch.ts';
import { deviceCacheOutputs, loraShapes, type LoraSpec } from './transformer-graph.ts';

export interface PolicyOptions {
  readonly id: string;
  readonly config: ModelConfig;
  /** Base weights by parameter name (all of `parameterShapes(config)`). */
  readonly weights: ReadonlyMap<string, Float32Array>;
  /** LoRA layout; when set only the adapter trains. */
  readonly lora: LoraSpec | null;
  /** Initial adapter tensors (required with `lora`). */
  readonly adapter?: ReadonlyMap<string, Float32Array>;
  readonly optimizer: OptimizerConfig;
  /** Compile the KL-to-reference term into the PPO step. */
  readonly kl: boolean;
  /** Compile the entropy bonus into the PPO step. */
  readonly entropy: boolean;
  /** Fused decode graph and quantized rollout weights (rollout-decoder.ts); default: plain fp32. */
  readonly decode?: DecodeSettings;
  /**
   * With LoRA: the key the frozen base is shared under in the engine. LoRA policies with the same
   * key must have the same base weights (checked by a fingerprint) and share one resident copy.
   * Default: the policy id (not shared).
   */
  readonly baseKey?: string;
  /** Bounds on one forward/backward pass of score and update (default: 64 sequences). */
  readonly microBatch?: MicroBatchLimits;
  /**
   * Score and update sequences with identical prompts in one shared row (`train-batch.ts`), so
   * the prompt the K branches of a group share is computed once per pass. Same math as one row
   * each, up to float rounding. Default true.
   */
  readonly sharePrompts?: boolean;
  /**
   * Ids `generate` never samples: the embedding rows the tokenizer has no token for
   * (`TextTokenizer.unusedIds`; Qwen2.5 pads 151665 tokens to 151936 rows). Such a row was never
   * trained, and an id with no text would decode to nothing and poison the stored tokens.
   */
  readonly maskedTokens?: readonly number[];
}

export interface PpoHyperparams {
  readonly temperature: number;
  readonly clipEps: number;
  readonly klCoef: number;
  readonly entCoef: number;
}

export interface UpdateStats {
  /** Token-mean loss over the whole update. */
  readonly loss: number;
  readonly clipFrac: number;
  readonly approxKl: number;
  readonly entropy: number;
  readonly klRef: number;
  /** Global gradient norm before clipping (NaN when the update was skipped before the optimizer). */
  readonly gradNorm: number;
  readonly lr: number;
  readonly tokens: number;
  /** Why the update was not applied, or null when it was. */
  readonly skipped: null | 'non-finite loss' | 'non-finite gradient';
  readonly ms: number;
}

type TrainKind = 'ppo' | 'ce';

export class Policy {
  /** Optimizer steps applied so far. */
  step = 0;
  /** Updates skipped because the loss or gradient was not finite. */
  nonFiniteSkips = 0;
  /** Compiled graphs this policy holds, by key, with their session names (shared or own). */
  private readonly sessions = new Map<string, { artifact: Artifact; session: string; shared: boolean }>();
  /** Resident-name prefix of the frozen base shared with other LoRA policies; null: own weights. */
  private readonly baseScope: string | null;
  private readonly trainable: ReadonlyArray<readonly [string, readonly number[]]>;
  private readonly shapes = new Map<string, readonly number[]>();
  private readonly decoder: RolloutDecoder;

  /** The options, without the host copy of the weights: the engine holds them once uploaded. */
  readonly options: Omit<PolicyOptions, 'weights'>;

  private constructor(
    readonly engine: Engine,
    options: PolicyOptions,
  ) {
    // Keeping `weights` would pin a second copy of the base on the main thread for the policy's
    // life (2 GB at Qwen2.5-0.5B's size).
    const { weights: _uploaded, ...kept } = options;
    this.options = kept;
    const base = parameterShapes(options.config);
    const adapter = options.lora ? loraShapes(options.config, options.lora) : [];
    for (const [n, s] of [...base, ...adapter]) this.shapes.set(n, s);
    this.trainable = options.lora ? adapter : base;
    this.baseScope = options.lora ? `base:${options.baseKey ?? options.id}` : null;
    this.decoder = new RolloutDecoder(
      {
        engine,
        id: options.id,
        config: options.config,
        lora: options.lora,
        resident: (name) => this.weightRes(name),
        snapshot: async () => ({ weights: await this.weights(), adapter: options.lora ? await this.trainableTensors() : null }),
      },
      options.decode ?? plainDecode,
    );
  }

  get id(): string {
    return this.options.id;
  }

  get config(): ModelConfig {
    return this.options.config;
  }

  /** Uploads weights (and adapter) into the engine and zeroes the optimizer state. */
  static async create(engine: Engine, options: PolicyOptions): Promise<Policy> {
    const p = new Policy(engine, options);
    const base = parameterShapes(options.config);
    for (const [name, shape] of base) {
      const data = options.weights.get(name);
      if (!data) throw new Error(`policy '${options.id}': missing weight '${name}'`);
      const n = shape.reduce((a, b) => a * b, 1);
      if (data.length !== n) throw new Error(`policy '${options.id}': weight '${name}' has ${data.length} values, shape [${shape.join(', ')}] needs ${n}`);
    }
    if (p.baseScope) {
      const scope = p.baseScope;
      const names = base.map(([name]) => `${scope}:${name}`);
      // The first LoRA policy on this base uploads it; the others feed the same residents.
      await engine.acquireShared(
        scope,
        weightsFingerprint(base, options.weights),
        async () => {
          for (const [name, shape] of base) await engine.upload(`${scope}:${name}`, copyF32(shape, options.weights.get(name)!));
        },
        () => engine.drop(names),
      );
    } else {
      for (const [name, shape] of base) {
        const data = options.weights.get(name)!;
        await engine.upload(p.res('w', name), copyF32(shape, data));
        if (options.kl) await engine.upload(p.res('ref', name), copyF32(shape, data));
      }
    }
    if (options.lora) {
      for (const [name, shape] of loraShapes(options.config, options.lora)) {
        const data = options.adapter?.get(name);
        if (!data) throw new Error(`policy '${options.id}': missing adapter tensor '${name}'`);
        await engine.upload(p.res('w', name), f32(shape, data));
      }
    }
    await p.resetOptimizer();
    return p;
  }

  private res(kind: string, name: string): string {
    return `${this.options.id}:${kind}:${name}`;
  }

  /** Resident name of a base weight (shared with LoRA) or adapter tensor, as graphs feed it. */
  private weightRes(name: string): string {
    return this.baseScope && !name.includes('.lora_') ? `${this.baseScope}:${name}` : this.res('w', name);
  }

  async resetOptimizer(): Promise<void> {
    for (const [name, shape] of this.trainable) {
      await this.engine.upload(this.res('m', name), f32(shape));
      await this.engine.upload(this.res('v', name), f32(shape));
    }
    this.step = 0;
  }

  /**
   * The compiled graph `key` and its session name. LoRA policies over one shared base share their
   * sessions too (same base, same adapter layout and loss terms: the same graph), created by the
   * first and released by the last.
   */
  private async artifact(key: string, build: () => Artifact, sessionOptions: SessionOptions = {}): Promise<Artifact> {
    return (await this.held(key, build, sessionOptions)).artifact;
  }

  private async held(key: string, build: () => Artifact, sessionOptions: SessionOptions): Promise<{ artifact: Artifact; session: string; shared: boolean }> {
    let h = this.sessions.get(key);
    if (h) return h;
    const o = this.options;
    if (this.baseScope) {
      const session = `shared:${this.baseScope}:${JSON.stringify({ lora: o.lora, kl: o.kl, entropy: o.entropy })}:${key}`;
      let cache = sharedArtifacts.get(this.engine);
      if (!cache) sharedArtifacts.set(this.engine, (cache = new Map()));
      let artifact = cache.get(session);
      if (!artifact) cache.set(session, (artifact = build()));
      const a = artifact;
      await this.engine.acquireShared(
        session,
        session,
        async () => void (await this.engine.createSession(session, a.bytes, sessionOptions)),
        async () => {
          cache.delete(session);
          await this.engine.releaseSession(session);
        },
      );
      h = { artifact: a, session, shared: true };
    } else {
      const artifact = build();
      const session = `${o.id}:${key}`;
      await this.engine.createSession(session, artifact.bytes, sessionOptions);
      h = { artifact, session, shared: false };
    }
    this.sessions.set(key, h);
    return h;
  }

  /** Session name of a graph this policy holds. */
  private sessionOf(key: string): string {
    const h = this.sessions.get(key);
    if (!h) throw new Error(`policy '${this.id}': no session '${key}'`);
    return h.session;
  }

  /** Feeds for a graph's tensor inputs: base weights (own, shared or the reference copy) and adapter. */
  private tensorFeeds(a: Artifact, weightsKind: 'w' | 'ref' = 'w'): Record<string, { resident: string }> {
    const feeds: Record<string, { resident: string }> = {};
    for (const n of a.tensorInputs) feeds[n] = { resident: weightsKind === 'ref' && !n.includes('.lora_') ? this.res('ref', n) : this.weightRes(n) };
    return feeds;
  }

  /**
   * Samples responses for a batch of prompts (token ids) with the KV-cache decoder. `rollout`
   * marks a training rollout: it samples with the configured rollout weights (int8/int4 when set),
   * while validation and warm-start play always decode the fp32 policy. `topLogprobs` and
   * `onStep` are `GenerateRequest.topLogprobs` and `Engine.generate`'s per-step callback; `cancel`
   * is `GenerateRequest.cancel` (per-row flags on a SharedArrayBuffer).
   */
  async generate(
    prompts: readonly Int32Array[],
    o: {
      maxNewTokens: number;
      sampling: SamplingParams;
      seed: number;
      stopTokens: readonly number[];
      padToken: number;
      rollout?: boolean;
      distinctFirst?: number;
      rowSeeds?: readonly number[];
      topLogprobs?: number;
      onStep?: (step: GenerateStep) => void;
      cancel?: Int32Array;
    },
  ): Promise<GenerateResult> {
    const masked = this.options.maskedTokens ?? [];
    const run = {
      prompts,
      maxNewTokens: o.maxNewTokens,
      sampling: o.sampling,
      seed: o.seed,
      stopTokens: o.stopTokens,
      padToken: o.padToken,
      ...(masked.length > 0 ? { maskedTokens: masked } : {}),
      ...(o.distinctFirst !== undefined && o.distinctFirst > 1 ? { distinctFirst: o.distinctFirst } : {}),
      ...(o.rowSeeds ? { rowSeeds: o.rowSeeds } : {}),
      ...(o.topLogprobs ? { topLogprobs: o.topLogprobs } : {}),
      ...(o.cancel ? { cancel: o.cancel } : {}),
    };
    const chosen = await this.decoder.choose(o.rollout ?? false);
    if (chosen) return this.engine.generate({ ...chosen, ...run }, o.onStep);
    const { L, Hkv, D, V } = modelDims(this.config);
    // On WebGPU the KV cache stays on the GPU between steps (runtime/generate.ts, 'device').
    const cache = this.engine.provider === 'webgpu' ? 'device' : 'time-major';
    const key = cache === 'device' ? 'decode-device' : 'decode';
    const a = await this.artifact(key, () => buildDecode(this.config, this.options.lora, 'float32', cache, loweringFor(this.engine.provider)), cache === 'device' ? { outputsOnDevice: deviceCacheOutputs(this.config) } : {});
    const params: Record<string, string> = {};
    for (const n of a.tensorInputs) params[n] = this.weightRes(n);
    return this.engine.generate({ ...run, session: this.sessionOf(key), params, contract: { numLayers: L, numKvHeads: Hkv, headDim: D, vocabSize: V, cacheLayout: cache } }, o.onStep);
  }

  /**
   * Log-probs of each sequence's response tokens at `temperature`: under the current policy, or
   * under the reference policy (base model without adapter / initial weights) with `reference`.
   */
  async score(seqs: readonly TrainSequence[], temperature: number, reference = false): Promise<Float32Array[]> {
    const useBase = reference && this.options.lora !== null;
    const pack = this.packing();
    const key = `${useBase ? 'score-base' : 'score'}${pack.sharePrompts ? '-shared' : ''}`;
    // Scoring runs once or twice per step, between rollouts and updates: without an arena its
    // [N,V] tensors go back to the system instead of staying reserved next to the train step's.
    const a = await this.artifact(key, () => buildScore(this.config, useBase ? null : this.options.lora, 'float32', loweringFor(this.engine.provider), pack.sharePrompts), { memoryArena: false });
    if (reference && !this.options.lora && !this.options.kl) throw new Error(`policy '${this.id}': reference log-probs need kl enabled (no reference copy was kept)`);
    const result = new Array<Float32Array>(seqs.length);
    // Sequences of one prompt side by side, so they land in one pass and share its row.
    const order = pack.sharePrompts ? groupedByPrompt(seqs) : seqs.map((_, i) => i);
    const limits = this.options.microBatch ?? { sequences: 64 };
    // Micro-batched like an update: a score pass holds the same forward activations.
    let at = 0;
    for (const chunk of microBatches(order.map((i) => seqs[i]!), limits, pack)) {
      const batch = packBatch(chunk, this.config.vocabSize, { advantages: false, oldLogp: false, refLogp: false }, pack);
      const t = batch.tensors;
      const out = await this.engine.run(
        this.sessionOf(key),
        {
          ...this.tensorFeeds(a, reference && !this.options.lora ? 'ref' : 'w'),
          input_ids: t['input_ids']!,
          position_ids: t['position_ids']!,
          attention_bias: t['attention_bias']!,
          targets: t['targets']!,
          loss_rows: t['loss_rows']!,
          temperature: f32([], [temperature]),
        },
        { logp: 'return' },
      );
      const logp = out['logp']!.data as Float32Array;
      chunk.forEach((s, b) => {
        const r = s.tokens.length - s.promptLength;
        result[order[at + b]!] = Float32Array.from({ length: r }, (_, j) => logp[batch.responseIndex(b, j)]!);
      });
      at += chunk.length;
    }
    return result;
  }

  /**
   * The final-normed hidden state [C] at the last token of each prompt (the state a value head
   * reads: `rl/value-head.ts`), under the current weights, adapter included. Prompts that are
   * equal share a packed row, as in `score`.
   */
  async features(prompts: readonly Int32Array[]): Promise<Float32Array[]> {
    const pack = this.packing();
    const key = `features${pack.sharePrompts ? '-shared' : ''}`;
    const a = await this.artifact(key, () => buildFeatures(this.config, this.options.lora, 'float32', pack.sharePrompts), { memoryArena: false });
    const C = this.config.hiddenSize;
    // A prompt and one placeholder token: the placeholder's row is the prompt's last position.
    const seqs: TrainSequence[] = prompts.map((p, i) => {
      if (p.length === 0) throw new Error(`policy '${this.id}': features of an empty prompt (row ${i})`);
      return { tokens: Int32Array.from([...p, 0]), promptLength: p.length };
    });
    const result = new Array<Float32Array>(seqs.length);
    const order = pack.sharePrompts ? groupedByPrompt(seqs) : seqs.map((_, i) => i);
    let at = 0;
    for (const chunk of microBatches(order.map((i) => seqs[i]!), this.options.microBatch ?? { sequences: 64 }, pack)) {
      const batch = packBatch(chunk, this.config.vocabSize, { advantages: false, oldLogp: false, refLogp: false }, pack);
      const t = batch.tensors;
      const rows = chunk.map((_, b) => batch.responseIndex(b, 0));
      const out = await this.engine.run(
        this.sessionOf(key),
        { ...this.tensorFeeds(a), input_ids: t['input_ids']!, position_ids: t['position_ids']!, attention_bias: t['attention_bias']!, loss_rows: i64([rows.length], rows) },
        { hidden: 'return' },
      );
      const hidden = out['hidden']!.data as Float32Array;
      chunk.forEach((_, b) => (result[order[at + b]!] = hidden.slice(b * C, (b + 1) * C)));
      at += chunk.length;
    }
    return result;
  }

  /**
   * vLLM's `prompt_logprobs` for one prompt: for each token after the first, its log-prob and rank
   * given the tokens before it, and the `k` most likely tokens there (best first, k per position,
   * -1 past the finite ids), under the distribution generated tokens' log-probs come from: the
   * logits at `temperature` (untempered when 0), with the policy's masked ids removed. The logits
   * come from a teacher-forced pass (`buildRowLogits`), at most 64 MiB of them (or `rowsPerPass`
   * rows) per pass.
   */
  async promptAlternatives(prompt: Int32Array, temperature: number, k: number, rowsPerPass?: number): Promise<{ logprobs: Float32Array; ranks: Int32Array; top: TopAlternatives }> {
    const V = this.config.vocabSize;
    // Positions scored: every prompt token after the first (none for an empty prompt).
    const n = Math.max(prompt.length - 1, 0);
    const out = { logprobs: new Float32Array(n), ranks: new Int32Array(n), top: { ids: new Int32Array(n * k), logprobs: new Float32Array(n * k) } };
    if (n === 0) return out;
    const a = await this.artifact('row-logits', () => buildRowLogits(this.config, this.options.lora), { memoryArena: false });
    const masked = this.options.maskedTokens ?? [];
    const perPass = Math.max(1, rowsPerPass ?? Math.floor(2 ** 24 / V));
    for (let from = 0; from < n; from += perPass) {
      // Packed again for each pass: a run transfers its input buffers to the engine.
      const batch = packBatch([{ tokens: prompt, promptLength: 1 }], V, { advantages: false, oldLogp: false, refLogp: false }, { sharePrompts: false });
      const t = batch.tensors;
      const rows = Array.from({ length: Math.min(perPass, n - from) }, (_, j) => batch.responseIndex(0, from + j));
      const res = await this.engine.run(
        this.sessionOf('row-logits'),
        { ...this.tensorFeeds(a), input_ids: t['input_ids']!, position_ids: t['position_ids']!, attention_bias: t['attention_bias']!, loss_rows: i64([rows.length], rows) },
        { logits: 'return' },
      );
      const logits = res['logits']!.data as Float32Array;
      rows.forEach((_, j) => {
        const at = from + j;
        if (masked.length > 0) maskLogits(logits, j * V, masked);
        const own = tokenLogprob(logits, j * V, V, temperature, prompt[at + 1]!);
        out.logprobs[at] = own.logprob;
        out.ranks[at] = own.rank;
        if (k > 0) topLogprobs(logits, j * V, V, temperature, k, out.top.ids, out.top.logprobs, at * k);
      });
    }
    return out;
  }

  /** How score and update pack sequences into rows. */
  private packing(): { readonly sharePrompts: boolean } {
    return { sharePrompts: this.options.sharePrompts ?? true };
  }

  /**
   * One optimizer update on `seqs`: PPO (needs advantages and old log-probs, plus reference
   * log-probs when kl is on) or cross-entropy. Micro-batches within the policy's limits
   * (`microBatch`; a number here overrides their sequence count) accumulate gradients with a
   * token weight of 1/(all trained tokens), so the loss is a token mean over the whole update
   * regardless of how it is split.
   */
  async update(kind: TrainKind, seqs: readonly TrainSequence[], hp: PpoHyperparams | null, microBatch?: number): Promise<UpdateStats> {
    const t0 = performance.now();
    if (kind === 'ppo' && !hp) throw new Error('PPO update needs hyperparameters');
    const o = this.options;
    const pack = this.packing();
    const key = `train-${kind}${pack.sharePrompts ? '-shared' : ''}`;
    const a = await this.artifact(key, () =>
      buildTrainStep(
        this.config,
        { loss: kind, trainable: o.lora ? 'lora' : 'full', lora: o.lora, kl: kind === 'ppo' && o.kl, entropy: kind === 'ppo' && o.entropy, perSequenceMask: pack.sharePrompts },
        loweringFor(this.engine.provider),
      ),
      // On a GPU the gradients stay there for AdamW (ignored on the CPU).
      { outputsOnDevice: this.trainable.map(([n]) => `${n}_grad`) },
    );
    const need = { advantages: kind === 'ppo', oldLogp: kind === 'ppo', refLogp: kind === 'ppo' && o.kl };
    const limits = o.microBatch ?? { sequences: 64 };
    const grouped = pack.sharePrompts ? groupedByPrompt(seqs).map((i) => seqs[i]!) : seqs;
    const chunks = microBatches(grouped, microBatch === undefined ? limits : { ...limits, sequences: microBatch }, pack);
    const packed = chunks.map((c) => packBatch(c, this.config.vocabSize, need, pack));
    const tokens = packed.reduce((n, p) => n + p.tokenCount, 0);
    const lr = learningRate(o.optimizer, this.step);
    const sums = { loss: 0, clip_frac: 0, approx_kl: 0, entropy: 0, kl_ref: 0 };
    const stats = (skipped: UpdateStats['skipped'], gradNorm: number): UpdateStats => ({
      loss: sums.loss,
      clipFrac: sums.clip_frac,
      approxKl: sums.approx_kl,
      entropy: sums.entropy,
      klRef: sums.kl_ref,
      gradNorm,
      lr,
      tokens,
      skipped,
      ms: performance.now() - t0,
    });
    if (tokens === 0) throw new Error(`policy '${this.id}': update has no trained tokens`);

    for (let c = 0; c < packed.length; c++) {
      const p = packed[c]!;
      const feeds: Record<string, HostTensor | { resident: string }> = { ...this.tensorFeeds(a), ...p.tensors, token_weight: f32([], [1 / tokens]) };
      if (kind === 'ppo') {
        feeds['temperature'] = f32([], [hp!.temperature]);
        feeds['clip_eps'] = f32([], [hp!.clipEps]);
        if (o.kl) feeds['kl_coef'] = f32([], [hp!.klCoef]);
        if (o.entropy) feeds['ent_coef'] = f32([], [hp!.entCoef]);
      }
      const gradKind = c === 0 ? 'g' : 'gs';
      const fetches: Record<string, 'return' | { into: string; dtype: 'float32'; dims: readonly number[] }> = {};
      for (const out of a.outputs) if (!out.endsWith('_grad') && out !== 'logp') fetches[out] = 'return';
      for (const [name, shape] of this.trainable) fetches[`${name}_grad`] = { into: this.res(gradKind, name), dtype: 'float32', dims: shape };
      const r = await this.engine.run(this.sessionOf(key), feeds, fetches);
      for (const k of Object.keys(sums) as Array<keyof typeof sums>) {
        const v = r[k];
        if (v) sums[k] += (v.data as Float32Array)[0]!;
      }
      if (!Number.isFinite(sums.loss)) {
        this.nonFiniteSkips++;
        return stats('non-finite loss', Number.NaN);
      }
      if (c > 0) await this.engine.accumulate(this.trainable.map(([n]) => [this.res('g', n), this.res('gs', n)] as const));
    }
    return this.applyAdamW(lr, stats);
  }

  private async applyAdamW(lr: number, stats: (s: UpdateStats['skipped'], g: number) => UpdateStats): Promise<UpdateStats> {
    const o = this.options.optimizer;
    // On a GPU the weights and moments stay there: the next step reads them where AdamW left them.
    await this.artifact('adamw', () => buildAdamW(this.trainable), { outputsOnDevice: this.trainable.flatMap(([n]) => [`${n}.next`, `${n}.m.next`, `${n}.v.next`]) });
    const t = this.step + 1;
    const feeds: Record<string, HostTensor | { resident: string }> = {
      lr: f32([], [lr]),
      beta1: f32([], [o.beta1]),
      beta2: f32([], [o.beta2]),
      eps: f32([], [o.eps]),
      weight_decay: f32([], [o.weightDecay]),
      bias_correction1: f32([], [1 - Math.pow(o.beta1, t)]),
      bias_correction2: f32([], [1 - Math.pow(o.beta2, t)]),
      max_grad_norm: f32([], [o.maxGradNorm > 0 ? o.maxGradNorm : 3.0e38]),
    };
    const fetches: Record<string, 'return' | { into: string; dtype: 'float32'; dims: readonly number[] }> = { grad_norm: 'return' };
    for (const [name, shape] of this.trainable) {
      feeds[name] = { resident: this.res('w', name) };
      feeds[`${name}_grad`] = { resident: this.res('g', name) };
      feeds[`${name}.m`] = { resident: this.res('m', name) };
      feeds[`${name}.v`] = { resident: this.res('v', name) };
      fetches[`${name}.next`] = { into: this.res('n', name), dtype: 'float32', dims: shape };
      fetches[`${name}.m.next`] = { into: this.res('m2', name), dtype: 'float32', dims: shape };
      fetches[`${name}.v.next`] = { into: this.res('v2', name), dtype: 'float32', dims: shape };
    }
    const r = await this.engine.run(this.sessionOf('adamw'), feeds, fetches);
    const gradNorm = (r['grad_norm']!.data as Float32Array)[0]!;
    if (!Number.isFinite(gradNorm)) {
      // The new values sit in the scratch buffers; not swapping them in discards the update.
      this.nonFiniteSkips++;
      return stats('non-finite gradient', gradNorm);
    }
    const pairs: Array<readonly [string, string]> = [];
    for (const [name] of this.trainable) {
      pairs.push([this.res('w', name), this.res('n', name)], [this.res('m', name), this.res('m2', name)], [this.res('v', name), this.res('v2', name)]);
    }
    await this.engine.swap(pairs);
    this.decoder.invalidate();
    this.step = t;
    return stats(null, gradNorm);
  }

  /** Copies of the trainable tensors (the adapter with LoRA, all weights otherwise). */
  async trainableTensors(): Promise<Map<string, Float32Array>> {
    const out = new Map<string, Float32Array>();
    for (const [name] of this.trainable) out.set(name, (await this.engine.download(this.res('w', name))).data as Float32Array);
    return out;
  }

  /** Copies of every weight, with the adapter (if any) kept separate. */
  async weights(): Promise<Map<string, Float32Array>> {
    const out = new Map<string, Float32Array>();
    for (const [name] of parameterShapes(this.config)) out.set(name, (await this.engine.download(this.weightRes(name))).data as Float32Array);
    return out;
  }

  /** Optimizer moments, for checkpoints that resume exactly. */
  async optimizerState(): Promise<Map<string, Float32Array>> {
    const out = new Map<string, Float32Array>();
    for (const [name] of this.trainable) {
      out.set(`${name}.m`, (await this.engine.download(this.res('m', name))).data as Float32Array);
      out.set(`${name}.v`, (await this.engine.download(this.res('v', name))).data as Float32Array);
    }
    return out;
  }

  /** Restores trainable tensors and optimizer state (resume). */
  async restore(tensors: ReadonlyMap<string, Float32Array>, state: ReadonlyMap<string, Float32Array> | null, step: number): Promise<void> {
    for (const [name, shape] of this.trainable) {
      const data = tensors.get(name);
      if (!data) throw new Error(`policy '${this.id}': restore is missing '${name}'`);
      await this.engine.upload(this.res('w', name), f32(shape, data));
      const m = state?.get(`${name}.m`);
      const v = state?.get(`${name}.v`);
      await this.engine.upload(this.res('m', name), f32(shape, m ?? undefined));
      await this.engine.upload(this.res('v', name), f32(shape, v ?? undefined));
    }
    this.decoder.invalidate();
    this.step = step;
  }

  /** Releases this policy's sessions and resident tensors in the engine. */
  async dispose(): Promise<void> {
    for (const h of this.sessions.values()) await (h.shared ? this.engine.releaseShared(h.session) : this.engine.releaseSession(h.session));
    for (const session of this.decoder.sessions()) await this.engine.releaseSession(session);
    this.sessions.clear();
    const names: string[] = [];
    for (const kind of ['w', 'ref', 'g', 'gs', 'm', 'v', 'n', 'm2', 'v2']) for (const name of this.shapes.keys()) names.push(this.res(kind, name));
    await this.engine.drop(names);
    if (this.baseScope) await this.engine.releaseShared(this.baseScope);
  }

  /** Milliseconds the last rebuild of the quantized rollout decoder took (0 when none ran). */
  get rolloutRebuildMs(): number {
    return this.decoder.lastRebuildMs;
  }

  /** Trainable tensor names and shapes. */
  get trainableShapes(): ReadonlyArray<readonly [string, readonly number[]]> {
    return this.trainable;
  }
}

/** Compiled graphs of shared sessions, per engine, so a second policy does not recompile them. */
const sharedArtifacts = new WeakMap<Engine, Map<string, Artifact>>();

/** A copy for upload (upload transfers its buffer; the caller keeps the original). */
function copyF32(shape: readonly number[], data: Float32Array): HostTensor {
  return { dtype: 'float32', dims: shape, data: data.slice() };
}

/**
 * What identifies a set of base weights for sharing: names, shapes and 64 evenly spaced values of
 * each tensor. A guard against sharing two different bases under one key (any two trained or
 * differently initialised bases differ in these), not a proof of equality.
 */
function weightsFingerprint(shapes: ReadonlyArray<readonly [string, readonly number[]]>, weights: ReadonlyMap<string, Float32Array>): string {
  const h = createHash('sha256');
  for (const [name, shape] of shapes) {
    const d = weights.get(name)!;
    const step = Math.max(1, Math.floor(d.length / 64));
    const sample = new Float32Array(Math.ceil(d.length / step));
    for (let i = 0, k = 0; i < d.length; i += step) sample[k++] = d[i]!;
    h.update(`${name}[${shape.join(',')}]`).update(new Uint8Array(sample.buffer));
  }
  return h.digest('hex');
}
