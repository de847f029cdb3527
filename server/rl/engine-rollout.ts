/**
 * Training rollouts on an engine fleet (config `rollout.backend` vllm / sglang): the rollout's
 * `generate` calls go over HTTP as token ids, each agent's policy as its current LoRA adapter.
 * Tokenization, old log-probs and the update stay in the trainer; the servers' log-probs are
 * kept as the samples' and charted against the trainer's as `rollout/mismatch_kl`.
 *
 * Adapters (`publish`, before each step's rollout): every policy's adapter is written in the PEFT
 * layout to `<run>/engine-adapters/<policy>@v<step>/` and loaded on every live server under the
 * versioned name `<policy>@<run id>.v<step>` (the run id keeps runs sharing a fleet apart) (reloading one name in place made vLLM re-read it from disk on every model step,
 * SkyRL PR #1606); the version before it is unloaded and its folder removed, which is safe there
 * because a step's rollout has finished (no request uses it) before the next publish.
 *
 * Bases (`setBases`, when a warm start changed them): the servers start with the base model they
 * were launched with, so before each step's adapters every live server is asked its weight version
 * (SGLang's `GET /model_info`, or `/get_weight_version` on older servers) and one that does not report the run's base version is sent
 * `/update_weights_from_disk` with the warm-started base's folder (a Hugging Face folder for a model
 * that came from one, else the run's warm-start checkpoint, which only Troupe's endpoint serves).
 * Asking every step covers a server restarted mid-run; a server already holding the version (the
 * same warm start, after a resume) is sent nothing. vLLM has no such route outside its dev mode,
 * so the config refuses a warm start with it.
 *
 * Sampling: a generate call's rows — each distinct prompt repeated K times, as the rollout lays
 * out a tree node — go as prompts with `n` = K, split into one contiguous chunk per live server,
 * each chunk with its first row (`troupe_row_offset`), so Troupe's own endpoint samples exactly
 * what in-process sampling does with the same seed, however the batch is split. vLLM and SGLang
 * ignore the field and sample with their own generators.
 */
import { existsSync } from 'node:fs';
import { mkdir, rename, rm } from 'node:fs/promises';
import { join } from 'node:path';
import { saveHfCheckpoint } from '../models/hf-checkpoint.ts';
import { exportPeftAdapter } from '../models/lora.ts';
import { copyHfTokenizerFiles, readHfSource } from '../models/model-folder.ts';
import type { Policy } from '../models/policy.ts';
import type { GenerateResult } from '../runtime/generate.ts';
import type { SamplingParams } from '../runtime/sampler.ts';
import { completionResponseSchema, sglangGenerateOutputSchema, weightVersionResponseSchema, type SglangGenerateOutput } from '../protocol/openai-api.ts';
import type { Metric } from '../protocol/trajectory.ts';
import { z } from 'zod';
import { EngineFleet, EngineFleetError, type EngineFleetConfig } from './engine-fleet.ts';
import type { ResolvedExperiment } from './experiment.ts';
import { mixSeed, type RolloutContext, type RolloutPolicy } from './rollout.ts';
import { warmStartDir } from './run-checkpoint.ts';
import { weightsContentKey } from './warm-start.ts';

type GenerateOptions = Parameters<Policy['generate']>[1];

/** One chunk's answer: per row tokens, log-probs, finish. */
interface RowsOut {
  tokens: Int32Array[];
  logprobs: Float32Array[];
  finish: Array<'stop' | 'length'>;
}

/** Runs of identical consecutive rows: [prompt, count]. */
function units(rows: readonly Int32Array[]): Array<{ prompt: Int32Array; first: number; count: number }> {
  const out: Array<{ prompt: Int32Array; first: number; count: number }> = [];
  rows.forEach((row, i) => {
    const last = out.at(-1);
    if (last && (last.prompt === row || (last.prompt.length === row.length && last.prompt.every((v, j) => v === row[j])))) last.count++;
    else out.push({ prompt: row, first: i, count: 1 });
  });
  return out;
}

/** Splits `n` units into `parts` contiguous chunks of near-equal size. */
function chunks<T>(xs: readonly T[], parts: number): T[][] {
  const out: T[][] = [];
  const size = Math.ceil(xs.length / Math.max(1, parts));
  for (let i = 0; i < xs.length; i += size) out.push(xs.slice(i, i + size));
  return out;
}

const finishOf = (reason: string | null | undefined): 'stop' | 'length' => (reason === 'length' ? 'length' : 'stop');

/** The ids of a vLLM choice: `token_ids` (>= 0.10.2), else `token_id:<id>` entries of `logprobs.tokens`. */
function choiceTokens(c: z.output<typeof completionResponseSchema>['choices'][number]): number[] {
  if (c.token_ids) return c.token_ids;
  const tokens = c.logprobs?.tokens;
  if (!tokens) throw new EngineFleetError('the server returned neither token_ids nor token_id:<id> log-prob tokens (vLLM before 0.10.2 needs return_tokens_as_token_ids)');
  return tokens.map((t) => {
    const m = /^token_id:(\d+)$/.exec(t);
    if (!m) throw new EngineFleetError('a log-prob token is not of the form token_id:<id>');
    return Number(m[1]);
  });
}

export class EngineRollout {
  readonly fleet: EngineFleet;
  /** The adapter version name each policy samples with now. */
  private readonly current = new Map<string, string>();
  private readonly folders = new Map<string, string>();

  constructor(
    private readonly exp: ResolvedExperiment,
    config: EngineFleetConfig,
    private readonly adapterRoot: string,
    log: (line: string) => void,
    /** The run's id: adapter names carry it, so runs sharing a fleet never collide. */
    runId: string,
  ) {
    this.fleet = new EngineFleet(config, log);
    this.run = runId.replace(/[^A-Za-z0-9_-]/g, '_').slice(0, 64);
  }

  private readonly run: string;

  /** The base folders sent to the servers, and the version they report once they hold them; null: the servers' own bases. */
  private bases: { folders: Array<{ model: string; dir: string }>; version: string } | null = null;

  /**
   * From now on every live server must sample on these base weights (the warm-started bases of a
   * run whose folder is `runDir`): writes each model's folder the servers read (once per run) and
   * takes the version the servers are to report. Sent at the next `publish`.
   */
  async setBases(runDir: string, weights: ReadonlyMap<string, ReadonlyMap<string, Float32Array>>): Promise<void> {
    if (this.kind === 'vllm') throw new EngineFleetError('rollout.backend "vllm" cannot replace the servers\' base weights (no /update_weights_from_disk outside VLLM_SERVER_DEV_MODE); turn the warm start off or use "sglang"');
    const folders: Array<{ model: string; dir: string }> = [];
    for (const [model, w] of weights) {
      const m = this.exp.models.get(model);
      if (!m) throw new Error(`no model '${model}' in the experiment`);
      const source = m.source.kind === 'checkpoint' ? await readHfSource(m.source.path) : null;
      if (!source) {
        // The run's warm-start checkpoint, as the trainer saved it (Troupe's format).
        folders.push({ model, dir: warmStartDir(runDir, model) });
        continue;
      }
      // A Hugging Face folder of the warm-started weights with the source's tokenizer, written once
      // (under a temporary name, renamed when whole).
      const dir = join(this.adapterRoot, '..', 'engine-bases', model);
      if (!existsSync(dir)) {
        const tmp = `${dir}.tmp-${process.pid}`;
        await rm(tmp, { recursive: true, force: true });
        await saveHfCheckpoint(tmp, m.config, w, { modelType: source.modelType, sourceConfig: source.config, metadata: { model } });
        await copyHfTokenizerFiles(source.dir, tmp);
        await mkdir(join(dir, '..'), { recursive: true });
        await rename(tmp, dir);
      }
      folders.push({ model, dir });
    }
    const key = weightsContentKey(new Map([...weights].flatMap(([model, w]) => [...w].map(([name, t]) => [`${model}/${name}`, t] as const))));
    this.bases = { folders, version: `${this.run}.base.${key.slice(0, 16)}` };
  }

  /** Sends the run's bases to every live server that does not report their version. */
  private async syncBases(): Promise<void> {
    if (!this.bases) return;
    const { folders, version } = this.bases;
    // Servers side by side: each reloads from disk on its own.
    await Promise.all(
      (await this.fleet.getEach('/model_info')).map(async (info) => {
        const { index } = info;
        // SGLang reports the version in /model_info since late 2025, in /get_weight_version before.
        const fromInfo = info.status === 404 ? null : weightVersionResponseSchema.safeParse(info.answer);
        const answer = fromInfo?.success ? info : (await this.fleet.getEach('/get_weight_version', index))[0];
        if (!answer) return;
        const reported = weightVersionResponseSchema.safeParse(answer.answer);
        if (answer.status === 404 || !reported.success) throw new EngineFleetError(`${this.fleet.config.urls[index]} reports no weight version (neither /model_info nor /get_weight_version has weight_version): it cannot take the warm-started base`);
        if (reported.data.weight_version === version) return;
        for (const [i, f] of folders.entries()) {
          // The version is set with the last base only, so a server that fails half-way is sent them all again.
          const body = { model_path: f.dir, abort_all_requests: false, flush_cache: true, ...(i === folders.length - 1 ? { weight_version: version } : {}), ...(folders.length > 1 ? { troupe_model: f.model } : {}) };
          if (!(await this.fleet.postTo(index, '/update_weights_from_disk', body))) return;
        }
      }),
    );
  }

  /** The served name of a policy's adapter at a step: `<policy>@<run>.v<step>`. */
  adapterName(policyId: string, step: number): string {
    return `${policyId}@${this.run}.v${step}`;
  }

  get kind(): 'vllm' | 'sglang' {
    return this.fleet.config.kind;
  }

  /**
   * Sends the run's bases where a server lacks them (`setBases`), then writes every policy's
   * adapter as version `step` and loads it on every live server; the previous version is unloaded
   * and its folder removed. Throws when no server took it.
   */
  async publish(step: number, policies: ReadonlyMap<string, Policy>): Promise<void> {
    this.fleet.revive();
    const t0 = performance.now();
    await this.syncBases();
    const prefix = this.kind === 'vllm' ? '/v1' : '';
    // Policies publish side by side: each server loads the agents' adapters concurrently.
    await Promise.all(
      [...policies].map(async ([policyId, policy]) => {
        const spec = this.exp.policies.get(policyId);
        if (!spec?.lora) throw new EngineFleetError(`policy '${policyId}' has no LoRA adapter to send to the servers`);
        const name = this.adapterName(policyId, step);
        const dir = join(this.adapterRoot, `${policyId}@v${step}`);
        await exportPeftAdapter(dir, policy.config, { rank: spec.lora.rank, alpha: spec.lora.alpha, targets: [...spec.lora.targets] }, await policy.trainableTensors(), { baseModelNameOrPath: spec.model });
        // A resumed run publishes a step's version again, which a server that outlived the crash
        // still holds: unload it first (404 and 400: it was not there).
        await this.fleet.broadcast(`${prefix}/unload_lora_adapter`, { lora_name: name }, (status) => status === 404 || status === 400);
        const loaded = await this.fleet.broadcast(`${prefix}/load_lora_adapter`, { lora_name: name, lora_path: dir });
        if (loaded.length === 0) throw new EngineFleetError(`no server loaded adapter ${name}: every server of rollout.backend.urls is down`);
        const old = this.current.get(policyId);
        this.current.set(policyId, name);
        this.folders.set(name, dir);
        if (old !== undefined && old !== name) {
          // A server that lost it (restarted) answers 404: nothing to unload there.
          await this.fleet.broadcast(`${prefix}/unload_lora_adapter`, { lora_name: old }, (status) => status === 404);
          await rm(this.folders.get(old)!, { recursive: true, force: true });
          this.folders.delete(old);
        }
      }),
    );
    this.publishMs = performance.now() - t0;
  }

  /** Wall time of the last `publish`, ms. */
  private publishMs = 0;

  /** `ctx` with each policy's sampling sent to the fleet (its other parts unchanged). */
  context(ctx: RolloutContext): RolloutContext {
    const remote = new Map<string, RolloutPolicy>();
    return {
      ...ctx,
      route: (agent) => {
        const { policyId } = ctx.route(agent);
        let policy = remote.get(policyId);
        if (!policy) remote.set(policyId, (policy = { generate: (rows, o) => this.generate(policyId, rows, o) }));
        return { policyId, policy };
      },
    };
  }

  /** The last publish's wall time, and per server requests, failures and generated tokens per second since the last call. */
  stepMetrics(): Metric[] {
    return [{ name: 'engine/publish_ms', value: this.publishMs }, ...this.fleet.takeStats().flatMap((s, i) => [
      { name: `engine/server${i}/requests`, value: s.requests },
      { name: `engine/server${i}/failures`, value: s.failures },
      { name: `engine/server${i}/tokens_per_s`, value: s.busyMs > 0 ? (s.generatedTokens * 1000) / s.busyMs : 0 },
    ])];
  }

  private async generate(policyId: string, rows: readonly Int32Array[], o: GenerateOptions): Promise<GenerateResult> {
    const model = this.current.get(policyId);
    if (model === undefined) throw new EngineFleetError(`policy '${policyId}' has no adapter on the servers yet (publish first)`);
    if (o.distinctFirst !== undefined && o.distinctFirst > 1) throw new EngineFleetError('algorithm.distinctBranches needs rollout.backend "in-process"');
    const us = units(rows);
    const n = us.every((u) => u.count === us[0]!.count) ? us[0]!.count : 1;
    const flat = n === 1 ? rows.map((prompt, first) => ({ prompt, first, count: 1 })) : us;
    const out: RowsOut = { tokens: new Array(rows.length), logprobs: new Array(rows.length), finish: new Array(rows.length) };
    const t0 = performance.now();
    await Promise.all(
      chunks(flat, this.fleet.liveCount()).map(async (chunk) => {
        const firstRow = chunk[0]!.first;
        const got = this.kind === 'vllm' ? await this.vllm(model, chunk, n, firstRow, o) : await this.sglang(model, chunk, n, firstRow, o);
        got.tokens.forEach((t, j) => {
          out.tokens[firstRow + j] = t;
          out.logprobs[firstRow + j] = got.logprobs[j]!;
          out.finish[firstRow + j] = got.finish[j]!;
        });
      }),
    );
    return { ...out, prefillMs: 0, decodeMs: performance.now() - t0 };
  }

  private async vllm(model: string, chunk: ReadonlyArray<{ prompt: Int32Array }>, n: number, firstRow: number, o: GenerateOptions): Promise<RowsOut> {
    const s: SamplingParams = o.sampling;
    const body = {
      model,
      prompt: chunk.map((u) => Array.from(u.prompt)),
      n,
      max_tokens: o.maxNewTokens,
      temperature: s.temperature,
      top_p: s.topP,
      top_k: s.topK > 0 ? s.topK : -1,
      seed: o.seed,
      stop_token_ids: [...o.stopTokens],
      logprobs: 0,
      return_token_ids: true,
      return_tokens_as_token_ids: true,
      // Token ids are what the trainer reads; text would be decoded by the server for nothing.
      skip_special_tokens: false,
      troupe_row_offset: firstRow,
    };
    const answer = completionResponseSchema.parse(await this.fleet.request('/v1/completions', body, chunk.length * n, (a) => completionTokens(a)));
    const choices = [...answer.choices].sort((a, b) => a.index - b.index);
    if (choices.length !== chunk.length * n) throw new EngineFleetError(`the server returned ${choices.length} choices for ${chunk.length * n} rows`);
    return {
      tokens: choices.map((c) => Int32Array.from(choiceTokens(c))),
      logprobs: choices.map((c) => {
        const lp = c.logprobs?.token_logprobs;
        if (!lp) throw new EngineFleetError('the server returned no logprobs.token_logprobs (sent logprobs: 0)');
        // A missing or infinite log-prob would poison the step's metrics (the store refuses
        // non-finite values): name the server's fault here instead.
        if (lp.some((v) => v === null || !Number.isFinite(v))) throw new EngineFleetError('the server returned a null or infinite log-prob for a sampled token (vLLM: --logprobs-mode processed_logprobs)');
        return Float32Array.from(lp, (v) => v!);
      }),
      finish: choices.map((c) => finishOf(c.finish_reason)),
    };
  }

  private async sglang(model: string, chunk: ReadonlyArray<{ prompt: Int32Array; count: number }>, n: number, firstRow: number, o: GenerateOptions): Promise<RowsOut> {
    // SGLang samples every row of a request from its own sampling_seed: one per row, so the K
    // branches of a node differ, derived from the call's seed and the row's index in the call.
    const rows = chunk.flatMap((u) => Array.from({ length: n }, () => Array.from(u.prompt)));
    const params = rows.map((_, j) => ({
      max_new_tokens: o.maxNewTokens,
      temperature: o.sampling.temperature,
      top_p: o.sampling.topP,
      top_k: o.sampling.topK > 0 ? o.sampling.topK : -1,
      stop_token_ids: [...o.stopTokens],
      sampling_seed: mixSeed(o.seed, firstRow + j),
    }));
    const body = { input_ids: rows, sampling_params: params, return_logprob: true, lora_path: rows.map(() => model), troupe_seed: o.seed >>> 0, troupe_row_offset: firstRow };
    const raw = await this.fleet.request('/generate', body, rows.length, (a) => (Array.isArray(a) ? a.reduce((t: number, x: unknown) => t + (sglangGenerateOutputSchema.safeParse(x).data?.meta_info.completion_tokens ?? 0), 0) : 0));
    const outs: SglangGenerateOutput[] = z.array(sglangGenerateOutputSchema).parse(raw);
    if (outs.length !== rows.length) throw new EngineFleetError(`the server returned ${outs.length} outputs for ${rows.length} rows`);
    return {
      tokens: outs.map((x) => Int32Array.from(x.output_ids)),
      logprobs: outs.map((x) => {
        const lp = x.meta_info.output_token_logprobs;
        if (!lp || lp.length !== x.output_ids.length) throw new EngineFleetError('the server returned no meta_info.output_token_logprobs for every token (sent return_logprob)');
        if (lp.some((e) => e[0] === null || !Number.isFinite(e[0]))) throw new EngineFleetError('the server returned a null or infinite log-prob for a sampled token');
        return Float32Array.from(lp, (e) => e[0]!);
      }),
      finish: outs.map((x) => finishOf(x.meta_info.finish_reason?.type)),
    };
  }
}

function completionTokens(answer: unknown): number {
  const u = completionResponseSchema.safeParse(answer);
  return u.success ? (u.data.usage?.completion_tokens ?? u.data.choices.reduce((a, c) => a + (c.token_ids?.length ?? 0), 0)) : 0;
}
