/**
 * What `troupe serve-openai` serves: named models on one engine, each a `Policy` (so generation
 * and scoring are the trainer's own, never a second copy of them).
 *
 * - a base model is served as a LoRA policy with an all-zero adapter (B = 0 adds exactly 0), so
 *   it shares the one resident copy of the base with every adapter loaded on it
 *   (`Policy` `baseKey`) instead of holding a second copy;
 * - a run's policies (its trained adapters, or full-weight policies) are served under their ids;
 * - `/v1/load_lora_adapter` adds a PEFT adapter on a base under a new name, and
 *   `/v1/unload_lora_adapter` removes it once the requests using it have finished;
 * - SGLang's `/update_weights_from_disk` replaces a base's weights (a warm-started base the
 *   trainer wrote): the base and every LoRA policy on it are built again on the new weights under
 *   a new resident key, and take the next requests; the old ones are freed once theirs finish.
 *
 * Each model's policy is held in a lease that counts its requests in flight; an unload or a
 * weight update waits for the count to reach 0 before it disposes the policy, so a policy is never
 * disposed under a generation that uses it. Loads, unloads and updates run one at a time.
 */
import { join } from 'node:path';
import { z } from 'zod';
import { loadCheckpoint } from '../models/checkpoint.ts';
import { readJsonFile } from '../models/json-file.ts';
import { importPeftAdapter, initLoraParameters, parseLoraConfig, PEFT_CONFIG_FILE } from '../models/lora.ts';
import type { ModelConfig } from '../models/model-config.ts';
import type { OptimizerConfig } from '../models/optimizer.ts';
import { Policy } from '../models/policy.ts';
import type { DecodeSettings } from '../models/rollout-decoder.ts';
import type { TextTokenizer } from '../models/folder-tokenizer.ts';
import type { LoraSpec } from '../models/transformer-graph.ts';
import type { Engine } from '../runtime/engine.ts';
import { BatchingGenerator } from './batching-generator.ts';

/** A base model the server holds: its config and host weights (adapters are checked against them). */
export interface ServedBase {
  readonly id: string;
  readonly config: ModelConfig;
  readonly weights: ReadonlyMap<string, Float32Array>;
}

/** A policy and its requests in flight. */
interface Lease {
  readonly policy: Policy;
  inFlight: number;
  /** Called when `inFlight` reaches 0. */
  readonly waiters: Array<() => void>;
}

interface Entry {
  readonly name: string;
  /** The policy new requests use (a weight update replaces it). */
  current: Lease;
  /** The base model an adapter sits on; null for a base or a full-weight policy. */
  readonly parent: string | null;
  /** The base whose resident weights the policy is built on (a base's own id for a base); null: a full-weight policy. */
  readonly on: string | null;
  readonly created: number;
  /** Set once an unload was asked for: no new request may use it. */
  unloading: boolean;
}

/** A base as held: its weights and the resident key its policies share (new on every weight update). */
interface HeldBase extends ServedBase {
  readonly key: string;
}

const lease = (policy: Policy): Lease => ({ policy, inFlight: 0, waiters: [] });

/** Resolves once no request uses the lease's policy. */
async function drained(l: Lease): Promise<void> {
  if (l.inFlight > 0) await new Promise<void>((done) => l.waiters.push(done));
}

/** The fields two model configs differ in, beside the context length (which a server may cap). */
function architectureDifferences(a: ModelConfig, b: ModelConfig): string[] {
  const keys = new Set([...Object.keys(a), ...Object.keys(b)]);
  keys.delete('maxSequenceLength');
  return [...keys].filter((k) => JSON.stringify((a as Record<string, unknown>)[k]) !== JSON.stringify((b as Record<string, unknown>)[k])).sort();
}

/** A request for a name the server does not serve (404). */
export class UnknownModelError extends Error {
  constructor(readonly model: string) {
    super(`the model '${model}' does not exist`);
    this.name = 'UnknownModelError';
  }
}

/** A request the server understood and cannot do (400): the message names the field. */
export class ModelRequestError extends Error {
  constructor(
    message: string,
    readonly param: string,
  ) {
    super(message);
    this.name = 'ModelRequestError';
  }
}

const baseNameProbe = z.looseObject({ base_model_name_or_path: z.string().nullish() });

/** The zero adapter a base is served with: rank 1 on the query projection, B = 0. */
const ZERO_ADAPTER: LoraSpec = { rank: 1, alpha: 1, targets: ['q'] };

export interface ServedModelsOptions {
  readonly engine: Engine;
  readonly tokenizer: TextTokenizer;
  /** Decode settings of every served model (the experiment's `rollout`). */
  readonly decode: DecodeSettings;
  readonly optimizer: OptimizerConfig;
}

export class ServedModels {
  /** Joins concurrent requests for one model into one engine call. */
  readonly batching = new BatchingGenerator();
  private readonly entries = new Map<string, Entry>();
  private readonly bases = new Map<string, HeldBase>();
  private counter = 0;
  private weightUpdates = 0;
  /** Loads, unloads and weight updates, one at a time. */
  private queue: Promise<unknown> = Promise.resolve();
  /** SGLang's `weight_version`: "default" until an update names one. */
  private version = 'default';

  constructor(private readonly o: ServedModelsOptions) {}

  get tokenizer(): TextTokenizer {
    return this.o.tokenizer;
  }

  /** The weight version SGLang's `/get_weight_version` reports: "default", or the last update's. */
  get weightVersion(): string {
    return this.version;
  }

  /** The ids of the served base models. */
  baseIds(): string[] {
    return [...this.bases.keys()];
  }

  /** Serves `base` under its id. */
  async addBase(base: ServedBase): Promise<void> {
    const held = { ...base, key: base.id };
    this.bases.set(base.id, held);
    // initLoraParameters starts B at 0, as PEFT does: the adapter adds exactly nothing.
    const adapter = initLoraParameters(base.config, parseLoraConfig({ rank: ZERO_ADAPTER.rank, alpha: ZERO_ADAPTER.alpha, targets: [...ZERO_ADAPTER.targets] }), 0);
    this.addPolicy(base.id, await this.create(held, ZERO_ADAPTER, adapter), null, base.id);
  }

  /**
   * Serves an existing policy (a run's trained adapter or full-weight policy) under `name`; `on`
   * is the served base a LoRA policy shares (its weights are updated with it), default `parent`.
   */
  addPolicy(name: string, policy: Policy, parent: string | null, on: string | null = parent): void {
    if (this.entries.has(name)) throw new Error(`two served models are named '${name}'`);
    this.entries.set(name, { name, current: lease(policy), parent, on, created: Math.floor(Date.now() / 1000), unloading: false });
  }

  /** Every served model, bases first, for `/v1/models`. */
  list(): Array<{ id: string; parent: string | null; created: number; maxModelLen: number }> {
    return [...this.entries.values()]
      .filter((e) => !e.unloading)
      .sort((a, b) => Number(a.parent !== null) - Number(b.parent !== null))
      .map((e) => ({ id: e.name, parent: e.parent, created: e.created, maxModelLen: e.current.policy.config.maxSequenceLength }));
  }

  /**
   * Runs `fn` with the policy served as `name`, counted as in flight so that an unload waits for
   * it. Throws `UnknownModelError` for a name not served (or being unloaded).
   */
  async use<T>(name: string, fn: (policy: Policy) => Promise<T>): Promise<T> {
    const e = this.entries.get(name);
    if (!e || e.unloading) throw new UnknownModelError(name);
    const l = e.current;
    l.inFlight++;
    try {
      return await fn(l.policy);
    } finally {
      l.inFlight--;
      if (l.inFlight === 0) for (const done of l.waiters.splice(0)) done();
    }
  }

  /**
   * Loads the PEFT adapter in `dir` under `name`, on the base its adapter_config.json names
   * (`base_model_name_or_path` equal to a served base's id), or on the only base.
   */
  loadAdapter(name: string, dir: string): Promise<void> {
    return this.serially(() => this.load(name, dir));
  }

  private async load(name: string, dir: string): Promise<void> {
    if (this.entries.has(name)) throw new ModelRequestError(`a model named '${name}' is already served; unload it first or load under a new (versioned) name`, 'lora_name');
    const base = await this.baseFor(dir);
    let peft;
    try {
      peft = await importPeftAdapter(dir, base.config);
    } catch (e) {
      throw new ModelRequestError(`lora_path: ${e instanceof Error ? e.message : String(e)}`, 'lora_path');
    }
    // The name may have been taken while the adapter was read.
    if (this.entries.has(name)) throw new ModelRequestError(`a model named '${name}' is already served`, 'lora_name');
    this.addPolicy(name, await this.create(base, { rank: peft.lora.rank, alpha: peft.lora.alpha, targets: peft.lora.targets }, peft.params), base.id);
  }

  /** Stops serving `name` once its requests in flight have finished, and frees its tensors. */
  unload(name: string): Promise<void> {
    const e = this.entries.get(name);
    if (!e || e.unloading) return Promise.reject(new UnknownModelError(name));
    if (e.parent === null) return Promise.reject(new ModelRequestError(`'${name}' is a base model or a run's policy, not a loaded adapter`, 'lora_name'));
    // No new request may use it from now on, even while an earlier load or update finishes.
    e.unloading = true;
    return this.serially(async () => {
      await drained(e.current);
      this.entries.delete(name);
      await e.current.policy.dispose();
    });
  }

  /**
   * Replaces the weights of the served base `model` (the only one when null) with the model folder
   * `dir` (a Troupe checkpoint or a Hugging Face folder of the same architecture): the base and
   * every LoRA policy on it are built again on the new weights and take the next requests; the old
   * ones are disposed once their requests in flight have finished, before this resolves.
   * `weightVersion` (when given) becomes the version reported. Full-weight policies are untouched.
   */
  updateBaseWeights(dir: string, model: string | null, weightVersion: string | null): Promise<void> {
    return this.serially(async () => {
      const base = model === null ? (this.bases.size === 1 ? [...this.bases.values()][0]! : undefined) : this.bases.get(model);
      if (!base) {
        throw model === null
          ? new ModelRequestError(`this server holds ${this.bases.size} base models (${[...this.bases.keys()].join(', ')}); name the one to update in troupe_model`, 'troupe_model')
          : new ModelRequestError(`no base model named '${model}' is served (${[...this.bases.keys()].join(', ')})`, 'troupe_model');
      }
      let loaded;
      try {
        loaded = await loadCheckpoint(dir);
      } catch (e) {
        throw new ModelRequestError(`model_path: ${e instanceof Error ? e.message : String(e)}`, 'model_path');
      }
      const differ = architectureDifferences(loaded.config, base.config);
      if (differ.length > 0) throw new ModelRequestError(`model_path: the folder holds a model of another architecture than the served base '${base.id}' (${differ.join(', ')} differ)`, 'model_path');
      const next: HeldBase = { id: base.id, config: base.config, weights: loaded.params, key: `${base.id}#w${++this.weightUpdates}` };
      const on = [...this.entries.values()].filter((e) => e.on === base.id && !e.unloading);
      const rebuilt: Policy[] = [];
      try {
        for (const e of on) {
          const spec = e.current.policy.options.lora;
          if (!spec) throw new Error(`served model '${e.name}' shares base '${base.id}' but has no LoRA adapter`);
          rebuilt.push(await this.create(next, spec, await e.current.policy.trainableTensors()));
        }
      } catch (e) {
        for (const p of rebuilt) await p.dispose();
        throw e;
      }
      this.bases.set(base.id, next);
      const old = on.map((e, i) => {
        const was = e.current;
        e.current = lease(rebuilt[i]!);
        return was;
      });
      if (weightVersion !== null) this.version = weightVersion;
      await Promise.all(
        old.map(async (l) => {
          await drained(l);
          await l.policy.dispose();
        }),
      );
    });
  }

  async close(): Promise<void> {
    await this.queue;
    for (const e of this.entries.values()) await e.current.policy.dispose();
    this.entries.clear();
  }

  /** Runs `fn` after every load, unload and update asked for before it has finished. */
  private serially<T>(fn: () => Promise<T>): Promise<T> {
    const run = this.queue.then(fn, fn);
    this.queue = run.catch(() => {});
    return run;
  }

  private async baseFor(dir: string): Promise<HeldBase> {
    if (this.bases.size === 1) return [...this.bases.values()][0]!;
    const named = await readJsonFile(join(dir, PEFT_CONFIG_FILE), baseNameProbe).then(
      (c) => c.base_model_name_or_path ?? null,
      () => null,
    );
    const base = named === null ? undefined : this.bases.get(named);
    if (!base) throw new ModelRequestError(`this server holds ${this.bases.size} base models (${[...this.bases.keys()].join(', ')}); the adapter's adapter_config.json must name one of them in base_model_name_or_path`, 'lora_path');
    return base;
  }

  /** A LoRA policy on `base` (sharing its resident copy) with `adapter`, its decode session taken. */
  private async create(base: HeldBase, lora: LoraSpec, adapter: ReadonlyMap<string, Float32Array>): Promise<Policy> {
    const policy = await Policy.create(this.o.engine, {
      // Resident names are the policy id's: a counter keeps a reloaded name from meeting the old one's.
      id: `served-${this.counter++}`,
      config: base.config,
      weights: base.weights,
      lora,
      adapter,
      baseKey: base.key,
      optimizer: this.o.optimizer,
      kl: false,
      entropy: false,
      decode: this.o.decode,
      maskedTokens: this.o.tokenizer.unusedIds(base.config.vocabSize),
    });
    // One greedy token now: the policy takes its (shared) decode session at load, so when the
    // previous version is unloaded right after, the session stays held instead of being freed
    // and compiled again by this version's first request; and a broken adapter fails its load.
    const tok = this.o.tokenizer;
    try {
      await policy.generate([Int32Array.of(tok.stopTokenId)], { maxNewTokens: 1, sampling: { temperature: 0, topP: 1, topK: 0 }, seed: 0, stopTokens: [], padToken: tok.padTokenId, rollout: true });
    } catch (e) {
      await policy.dispose();
      throw e;
    }
    return policy;
  }
}
