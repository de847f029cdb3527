/**
 * From an experiment config file to a `ResolvedExperiment`: parse and check the JSON (errors name
 * the file and the JSON path), validate the environment's options with the environment's own
 * schema, check the router against the environment's agents, and turn model references into
 * model configs with the source of their initial weights.
 */
import { createHash } from 'node:crypto';
import { readdir, readFile } from 'node:fs/promises';
import { dirname, isAbsolute, join, resolve } from 'node:path';
import { createEnvironment, environmentRunsCode, environments, type EnvironmentName } from '../envs/environments.ts';
import { chatWritesCode } from '../envs/chat-prompts/chat-environment.ts';
import { withPromptStyle } from '../envs/chat-prompts/prompt-styles.ts';
import { trainSeed } from '../envs/seed-ranges.ts';
import type { Environment } from '../envs/environment.ts';
import type { CodeOptions } from '../envs/code/code-env.ts';
import { datasetEnvironment, loadCodeSplits, type CodeSplits } from '../envs/code/code-dataset.ts';
import { defaultModelConfig, mediumModelConfig } from '../models/default-model.ts';
import { adaptedTargets, isGpt2, loraTargets, parseModelConfig, type ModelConfig } from '../models/model-config.ts';
import type { TextTokenizer } from '../models/folder-tokenizer.ts';
import type { LoraSpec } from '../models/transformer-graph.ts';
import { HfTokenizer } from '../models/hf-tokenizer.ts';
import { jsonSyntaxProblem } from '../models/json-file.ts';
import { HF_TOKENIZER_FILES, readModelFolderConfig, type ModelFolderConfig } from '../models/model-folder.ts';
import { defaultTokenizer } from '../models/tokenizer.ts';
import { ConfigError } from '../protocol/config-errors.ts';
import { checkAgainstAgents, parseExperimentConfig, type ExperimentConfig } from '../protocol/experiment-config.ts';
import type { ModelSource, ResolvedExperiment } from './experiment.ts';
import { chatPromptFitIssues } from './prompt-fit.ts';
import { checkTrainingMemory } from './memory-estimate.ts';

/** A config file's text; a file that cannot be read is an Error naming it. */
export async function readConfigText(path: string): Promise<string> {
  try {
    return await readFile(path, 'utf8');
  } catch (e) {
    throw new Error(`cannot read experiment config ${path}: ${e instanceof Error ? e.message : String(e)}`);
  }
}

/**
 * Parses and validates a config file's text. Text that is not JSON is a ConfigError naming
 * `source` with the line and column of the problem, never quoting the text (`jsonSyntaxProblem`:
 * the file may hold a secret and the message may reach a client); invalid fields are one
 * ConfigError naming each. The CLI and the server's runs both load configs through this.
 */
export function parseConfigText(text: string, source: string): { config: ExperimentConfig; json: unknown } {
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch (e) {
    throw new ConfigError(source, [{ path: [], message: jsonSyntaxProblem(text, e) }]);
  }
  return { config: parseExperimentConfig(json, source), json };
}

/** Reads, parses and resolves a config file; errors name `path` as given. */
export async function loadExperiment(path: string): Promise<{ config: ExperimentConfig; experiment: ResolvedExperiment }> {
  const { config } = parseConfigText(await readConfigText(path), path);
  return { config, experiment: await resolveExperiment(config, path) };
}

export async function resolveExperiment(c: ExperimentConfig, source: string): Promise<ResolvedExperiment> {
  const envName = c.env.name as EnvironmentName;
  const factory = environments[envName];
  const parsedOptions = factory.optionsSchema.safeParse(c.env.options);
  if (!parsedOptions.success) {
    throw new ConfigError(
      source,
      parsedOptions.error.issues.map((i) => ({ path: ['env', 'options', ...i.path.map((p) => (typeof p === 'symbol' ? String(p) : p))], message: i.message })),
    );
  }
  const options = parsedOptions.data;
  const probe = createEnvironment(envName, 0, options);
  const make = await environmentMaker(c, source, envName, options);
  const agentIssues = checkAgainstAgents(c, probe.agents);
  if (agentIssues.length) throw new ConfigError(source, agentIssues);

  const models = new Map<string, { config: ModelConfig; source: ModelSource }>();
  // Each model's tokenizer, and what identifies it (one experiment, one tokenizer: see below).
  const tokenizers = new Map<string, { tokenizer: TextTokenizer; key: string; what: string }>();
  const charTokenizer = { tokenizer: defaultTokenizer, key: 'char', what: 'the character tokenizer' };
  for (const [id, m] of Object.entries(c.models)) {
    if (m.preset) {
      models.set(id, { config: m.preset === 'medium' ? mediumModelConfig : defaultModelConfig, source: { kind: 'init', seed: c.seed } });
      tokenizers.set(id, charTokenizer);
    } else if (m.config) {
      const config = parseModelConfig(m.config, `${source}: models.${id}.config`);
      if (config.vocabSize !== defaultTokenizer.vocabSize) {
        throw new ConfigError(source, [{ path: ['models', id, 'config', 'vocabSize'], message: `must be ${defaultTokenizer.vocabSize} (the character tokenizer's vocabulary)` }]);
      }
      models.set(id, { config, source: { kind: 'init', seed: c.seed } });
      tokenizers.set(id, charTokenizer);
    } else if (m.checkpoint) {
      const dir = isAbsolute(m.checkpoint) ? m.checkpoint : resolve(dirname(source), m.checkpoint);
      let folder: ModelFolderConfig;
      try {
        folder = await readModelFolderConfig(dir, m.maxSequenceLength === undefined ? {} : { maxSequenceLength: m.maxSequenceLength });
      } catch (e) {
        throw new ConfigError(source, [{ path: ['models', id, 'checkpoint'], message: e instanceof Error ? e.message : String(e) }]);
      }
      if (folder.format === 'hugging-face') {
        // The folder's own tokenizer and chat template. Qwen3's thinking is off unless asked for
        // (its template then writes an empty <think></think>): answers are short and
        // maxNewTokens bounds them. The switch changes every prompt, so it is part of the key.
        const enableThinking = m.enableThinking ?? false;
        try {
          const tokenizer = await HfTokenizer.load(dir, { enableThinking });
          tokenizer.unusedIds(folder.config.vocabSize);
          tokenizers.set(id, { tokenizer, key: `${await tokenizerFilesKey(dir)}:thinking=${enableThinking}`, what: `the tokenizer of ${dir}${enableThinking ? ' with thinking on' : ''}` });
        } catch (e) {
          throw new ConfigError(source, [{ path: ['models', id, 'checkpoint'], message: e instanceof Error ? e.message : String(e) }]);
        }
      } else {
        if (m.enableThinking !== undefined) throw new ConfigError(source, [{ path: ['models', id, 'enableThinking'], message: `${dir} is a Troupe checkpoint (character tokenizer, no chat template); enableThinking applies to a Hugging Face folder` }]);
        tokenizers.set(id, charTokenizer);
      }
      models.set(id, { config: folder.config, source: { kind: 'checkpoint', path: dir } });
    }
  }

  // Rollouts, warm start, validation and the store encode every agent's text with one tokenizer.
  // Models that tokenize differently (the embedded model beside a Hugging Face one, or two
  // families) would each need their own, through all of them; refused until then.
  const used = [...tokenizers];
  const [firstId, first] = used[0] ?? ['', charTokenizer];
  const other = used.find(([, t]) => t.key !== first.key);
  if (other) {
    const [otherId, t] = other;
    throw new ConfigError(source, [{ path: ['models', otherId], message: `model "${otherId}" uses ${t.what} and model "${firstId}" ${first.what}; an experiment's models must share one tokenizer` }]);
  }
  const tokenizer = first.tokenizer;

  const fitIssues = chatPromptFitIssues(
    c,
    make(trainSeed(0)),
    new Map([...models].map(([id, m]) => [id, m.config.maxSequenceLength])),
    tokenizer,
    first.key === charTokenizer.key ? 'character' : 'pretrained',
  );
  if (fitIssues.length) throw new ConfigError(source, fitIssues);

  const policies: Map<string, { model: string; lora: LoraSpec | null }> = new Map();
  for (const [id, p] of Object.entries(c.policies)) {
    const model = models.get(p.model)?.config;
    let targets = loraTargets.filter((t) => p.lora?.targets.includes(t));
    if (p.lora && model) {
      try {
        targets = adaptedTargets(model, targets);
      } catch (e) {
        throw new ConfigError(source, [{ path: ['policies', id, 'lora', 'targets'], message: (e as Error).message.replace(/^lora\.targets: /, '') }]);
      }
    }
    const lora = p.lora ? { rank: p.lora.rank, alpha: p.lora.alpha ?? p.lora.rank, targets } : null;
    policies.set(id, { model: p.model, lora });
  }
  // The fused decode graph (decode-graph.ts) is built from ONNX Runtime's RMSNorm and RoPE
  // kernels, which GPT-2 does not use: its models decode with the plain graph only.
  const gpt2 = [...models].find(([, m]) => isGpt2(m.config));
  if (gpt2 && (c.rollout.fusedDecode || c.rollout.weights !== 'fp32')) {
    const path = c.rollout.fusedDecode ? ['rollout', 'fusedDecode'] : ['rollout', 'weights'];
    throw new ConfigError(source, [{ path, message: `model "${gpt2[0]}" is a gpt2 model, which decodes only with the plain fp32 graph (the fused decode graph is Llama-shaped); set rollout.fusedDecode false and rollout.weights "fp32"` }]);
  }
  // Troupe writes GPT-2 adapters in PEFT's layout (hf-gpt2.ts), but vLLM's GPT-2 model takes no
  // LoRA adapters, and fleet rollouts are tested on Llama-shaped models only.
  if (gpt2 && c.rollout.backend.kind !== 'in-process') {
    throw new ConfigError(source, [{ path: ['rollout', 'backend', 'kind'], message: `model "${gpt2[0]}" is a gpt2 model: vLLM's GPT-2 model takes no LoRA adapters, and ${c.rollout.backend.kind} fleet rollouts are supported for Llama-shaped models (qwen2, qwen3, llama) only; use the in-process backend` }]);
  }
  // Refused before anything is allocated when weights and optimizer state cannot fit this machine.
  checkTrainingMemory(models, policies, c.algorithm.klCoef, source);

  return {
    name: c.name,
    seed: c.seed,
    specialization: c.specialization,
    env: { name: envName, options, runsCode: environmentRunsCode(envName) || chatWritesCode(withPromptStyle(probe, c.env.promptStyle)), make },
    agents: probe.agents,
    tokenizer,
    models,
    policies,
    router: new Map(Object.entries(c.router)),
    algorithm: { ...c.algorithm, filters: { ...c.algorithm.filters }, curriculum: { ...c.algorithm.curriculum } },
    optimizer: c.optimizer,
    rollout: { weights: c.rollout.weights, fusedDecode: c.rollout.fusedDecode, blockSize: c.rollout.blockSize },
    rolloutBackend: c.rollout.backend,
    warmStart: c.warmStart,
    training: c.training,
    engine: c.engine,
    sandbox: c.sandbox,
  };
}

/**
 * How the run makes the environment of a seed: generated from the seed, or, with `env.dataset`,
 * on the dataset's problem for that seed (training seeds its training problems, validation and
 * test seeds their held-out ones). The file is read here, once, relative to the config's folder;
 * its problems are a ConfigError at env.dataset.path naming the file and the line or row.
 */
async function environmentMaker(c: ExperimentConfig, source: string, envName: EnvironmentName, options: unknown): Promise<(seed: number) => Environment> {
  const dataset = c.env.dataset;
  if (dataset === undefined) return (seed) => withPromptStyle(createEnvironment(envName, seed, options), c.env.promptStyle);
  // checkExperimentConfig refuses a dataset for any other environment.
  if (envName !== 'code') throw new ConfigError(source, [{ path: ['env', 'dataset'], message: `${envName} reads no dataset file` }]);
  const path = isAbsolute(dataset.path) ? dataset.path : resolve(dirname(source), dataset.path);
  let splits: CodeSplits;
  try {
    splits = await loadCodeSplits(path, dataset);
  } catch (e) {
    throw new ConfigError(source, [{ path: ['env', 'dataset', 'path'], message: e instanceof Error ? e.message : String(e) }]);
  }
  return (seed) => withPromptStyle(datasetEnvironment(splits, seed, options as CodeOptions), c.env.promptStyle);
}

/**
 * What identifies a Hugging Face folder's tokenizer: a hash of its tokenizer files' bytes, so two
 * folders of one family (a model and its fine-tune) share it and a different vocabulary does not.
 */
async function tokenizerFilesKey(dir: string): Promise<string> {
  const present = new Set(await readdir(dir));
  const h = createHash('sha256');
  for (const f of HF_TOKENIZER_FILES) if (present.has(f)) h.update(`${f}\0`).update(await readFile(join(dir, f))).update('\0');
  return `hf:${h.digest('hex')}`;
}
