/**
 * What `troupe serve-openai` serves: named models on one engine, each a `Policy` (so generation
 * and scoring are the trainer's own, never a second copy of them).
 *
 * - a base model is served as a LoRA policy with an all-zero adapter (B = 0 adds exactly 0), so
 *   it shares the one resident copy of the base with every adapter loaded on it
 *   (`Policy` `baseKey`) instead of holding a second copy;
 * - a run's policies (its trained adapters, or full-weight policies) are served under their ids;
 * - `/v1/load_lora_adapter` adds a PEFT adapter on a base under a new name, and
 *   `/v1/unload_lora_adapter` removes it once the requests using it have finished.
 *
 * Each model keeps a count of requests in flight; an unload waits for it to reach 0, so an
 * adapter version is never disposed under a generation that uses it.
 */
import { join } from 'node:path';
import { z } from 'zod';
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

interface Entry {
  readonly name: string;
  readonly policy: Policy;
  /** The base model an adapter sits on; null for a base or a full-weight policy. */
  readonly parent: string | null;
  readonly created: number;
  inFlight: number;
  /** Set once an unload was asked for: no new request may use it. */
  unloading: boolean;
  drained: (() => void) | null;
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
  private readonly bases = new Map<string, ServedBase>();
  private counter = 0;

  constructor(private readonly o: ServedModelsOptions) {}

  get tokenizer(): TextTokenizer {
    return this.o.tokenizer;
  }

  /** Serves `base` under its id. */
  async addBase(base: ServedBase): Promise<void> {
    this.bases.set(base.id, base);
    // initLoraParameters starts B at 0, as PEFT does: the adapter adds exactly nothing.
    const adapter = initLoraParameters(base.config, parseLoraConfig({ rank: ZERO_ADAPTER.rank, alpha: ZERO_ADAPTER.alpha, targets: [...ZERO_ADAPTER.targets] }), 0);
    await this.add(base.id, null, { lora: ZERO_ADAPTER, adapter, base });
  }

  /** Serves an existing policy (a run's trained adapter or full-weight policy) under `name`. */
  addPolicy(name: string, policy: Policy, parent: string | null): void {
    if (this.entries.has(name)) throw new Error(`two served models are named '${name}'`);
    this.entries.set(name, { name, policy, parent, created: Math.floor(Date.now() / 1000), inFlight: 0, unloading: false, drained: null });
  }

  /** Every served model, bases first, for `/v1/models`. */
  list(): Array<{ id: string; parent: string | null; created: number; maxModelLen: number }> {
    return [...this.entries.values()]
      .filter((e) => !e.unloading)
      .sort((a, b) => Number(a.parent !== null) - Number(b.parent !== null))
      .map((e) => ({ id: e.name, parent: e.parent, created: e.created, maxModelLen: e.policy.config.maxSequenceLength }));
  }

  /**
   * Runs `fn` with the policy served as `name`, counted as in flight so that an unload waits for
   * it. Throws `UnknownModelError` for a name not served (or being unloaded).
   */
  async use<T>(name: string, fn: (policy: Policy) => Promise<T>): Promise<T> {
    const e = this.entries.get(name);
    if (!e || e.unloading) throw new UnknownModelError(name);
    e.inFlight++;
    try {
      return await fn(e.policy);
    } finally {
      e.inFlight--;
      if (e.inFlight === 0) e.drained?.();
    }
  }

  /**
   * Loads the PEFT adapter in `dir` under `name`, on the base its adapter_config.json names
   * (`base_model_name_or_path` equal to a served base's id), or on the only base.
   */
  async loadAdapter(name: string, dir: string): Promise<void> {
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
    await this.add(name, base.id, { lora: { rank: peft.lora.rank, alpha: peft.lora.alpha, targets: peft.lora.targets }, adapter: peft.params, base });
  }

  /** Stops serving `name` once its requests in flight have finished, and frees its tensors. */
  async unload(name: string): Promise<void> {
    const e = this.entries.get(name);
    if (!e || e.unloading) throw new UnknownModelError(name);
    if (e.parent === null) throw new ModelRequestError(`'${name}' is a base model or a run's policy, not a loaded adapter`, 'lora_name');
    e.unloading = true;
    if (e.inFlight > 0) await new Promise<void>((done) => (e.drained = done));
    this.entries.delete(name);
    await e.policy.dispose();
  }

  async close(): Promise<void> {
    for (const e of this.entries.values()) await e.policy.dispose();
    this.entries.clear();
  }

  private async baseFor(dir: string): Promise<ServedBase> {
    if (this.bases.size === 1) return [...this.bases.values()][0]!;
    const named = await readJsonFile(join(dir, PEFT_CONFIG_FILE), baseNameProbe).then(
      (c) => c.base_model_name_or_path ?? null,
      () => null,
    );
    const base = named === null ? undefined : this.bases.get(named);
    if (!base) throw new ModelRequestError(`this server holds ${this.bases.size} base models (${[...this.bases.keys()].join(', ')}); the adapter's adapter_config.json must name one of them in base_model_name_or_path`, 'lora_path');
    return base;
  }

  private async add(name: string, parent: string | null, a: { lora: LoraSpec; adapter: ReadonlyMap<string, Float32Array>; base: ServedBase }): Promise<void> {
    const policy = await Policy.create(this.o.engine, {
      // Resident names are the policy id's: a counter keeps a reloaded name from meeting the old one's.
      id: `served-${this.counter++}`,
      config: a.base.config,
      weights: a.base.weights,
      lora: a.lora,
      adapter: a.adapter,
      baseKey: a.base.id,
      optimizer: this.o.optimizer,
      kl: false,
      entropy: false,
      decode: this.o.decode,
      maskedTokens: this.o.tokenizer.unusedIds(a.base.config.vocabSize),
    });
    // One greedy token now: the policy takes its (shared) decode session at load, so when the
    // previous version is unloaded right after, the session stays held instead of being freed
    // and compiled again by this version's first request; and a broken adapter fails its load.
    const tok = this.o.tokenizer;
    await policy.generate([Int32Array.of(tok.stopTokenId)], { maxNewTokens: 1, sampling: { temperature: 0, topP: 1, topK: 0 }, seed: 0, stopTokens: [], padToken: tok.padTokenId, rollout: true });
    this.addPolicy(name, policy, parent);
  }
}
