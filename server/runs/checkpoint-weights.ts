/**
 * Which weights `--checkpoint initial|latest|<step>` means in a run folder, for `eval`, `export` and `serve-openai`:
 *   initial  the warm-started team before any RL step: base weights from checkpoints/warmstart/<model>,
 *            LoRA adapters fresh (B = 0, so the base itself), exactly the policy validated at step 0;
 *   latest   checkpoints/resume, the state after the last finished step;
 *   best     the validated step with the highest validation success (checkpoints/best.json);
 *   <step>   checkpoints/step-<step> (0 is the same as initial).
 */
import { existsSync } from 'node:fs';
import { readdir } from 'node:fs/promises';
import { join } from 'node:path';
import { CHECKPOINT_WEIGHTS_FILE, loadCheckpoint } from '../models/checkpoint.ts';
import { initParameters } from '../models/init.ts';
import { initLoraParameters, parseLoraConfig } from '../models/lora.ts';
import { readSafetensorsFile } from '../models/safetensors.ts';
import type { ModelConfig } from '../models/model-config.ts';
import type { Policy } from '../models/policy.ts';
import type { ModelSource, ResolvedExperiment } from '../rl/experiment.ts';
import { createPolicies, stringSeed } from '../rl/policies.ts';
import { bestFile, checkpointsDir, readBest, readCheckpointState, restorePolicies, resumeDir, stepDir, warmStartDir } from '../rl/run-checkpoint.ts';
import type { Engine } from '../runtime/engine.ts';
import { loadRunExperiment, readRunFolder, type RunFolder } from './run-folder.ts';

export type CheckpointChoice = { readonly kind: 'initial' } | { readonly kind: 'latest' } | { readonly kind: 'best' } | { readonly kind: 'step'; readonly step: number };

export const checkpointChoiceHelp = 'initial | latest | best | <step>';

/** Parses the `--checkpoint` value; null when it is none of the forms. */
export function parseCheckpointChoice(text: string): CheckpointChoice | null {
  if (text === 'initial' || text === 'latest' || text === 'best') return { kind: text };
  if (/^(0|[1-9][0-9]*)$/.test(text)) return Number(text) === 0 ? { kind: 'initial' } : { kind: 'step', step: Number(text) };
  return null;
}

export interface RunCheckpoint {
  /** `initial`, `latest`, `best` or `step-<n>`. */
  readonly label: string;
  /** The RL step the weights are from (0: before RL). */
  readonly step: number;
  /** The policy checkpoint folder, or null for the initial team (no RL state). */
  readonly dir: string | null;
}

/** Finds the checkpoint folder; errors list what the run has. */
export async function findRunCheckpoint(runDir: string, choice: CheckpointChoice): Promise<RunCheckpoint> {
  if (choice.kind === 'initial') return { label: 'initial', step: 0, dir: null };
  if (choice.kind === 'latest') {
    const state = await readCheckpointState(resumeDir(runDir));
    if (!state) throw new Error(`run folder ${runDir} has no checkpoint yet (${resumeDir(runDir)} is missing: the run has not finished its first validation)`);
    return { label: 'latest', step: state.step, dir: resumeDir(runDir) };
  }
  if (choice.kind === 'best') {
    const best = await readBest(runDir);
    if (!best) throw new Error(`run folder ${runDir} has no best validation (${bestFile(runDir)} is missing: the run has not finished its first validation, or predates best checkpoints)`);
    // Step 0's policy is the warm-started team, which 'initial' rebuilds when its checkpoint is not there.
    if (best.step === 0 && !(await readCheckpointState(stepDir(runDir, 0)))) return { label: 'best', step: 0, dir: null };
    const found = await findRunCheckpoint(runDir, { kind: 'step', step: best.step });
    return { ...found, label: 'best' };
  }
  const dir = stepDir(runDir, choice.step);
  if (!(await readCheckpointState(dir))) {
    const steps = existsSync(checkpointsDir(runDir))
      ? (await readdir(checkpointsDir(runDir))).flatMap((n) => /^step-(\d+)$/.exec(n)?.[1] ?? []).map(Number).sort((a, b) => a - b)
      : [];
    throw new Error(`run folder ${runDir} has no checkpoint of step ${choice.step}; available: initial, latest${existsSync(bestFile(runDir)) ? ', best' : ''}${steps.length ? `, ${steps.join(', ')}` : ''}`);
  }
  return { label: `step-${choice.step}`, step: choice.step, dir };
}

/**
 * The base weights of every model as the run's policies started: the run's warm-start copy, or,
 * without a warm start, the model's initialisation or source checkpoint.
 */
export async function runBaseWeights(runDir: string, exp: ResolvedExperiment): Promise<Map<string, Map<string, Float32Array>>> {
  const out = new Map<string, Map<string, Float32Array>>();
  for (const [modelId, m] of exp.models) {
    const saved = warmStartDir(runDir, modelId);
    if (existsSync(join(saved, CHECKPOINT_WEIGHTS_FILE))) out.set(modelId, (await loadCheckpoint(saved)).params);
    else if (exp.warmStart.enabled) throw new Error(`run folder ${runDir} has no warm-started model '${modelId}' (${saved}): the run did not finish its warm start`);
    else out.set(modelId, await sourceWeights(m));
  }
  return out;
}

/** A run folder opened at one checkpoint: its experiment, which weights the choice means, and the base weights its policies start from. */
export interface RunAtCheckpoint {
  readonly folder: RunFolder;
  readonly experiment: ResolvedExperiment;
  readonly checkpoint: RunCheckpoint;
  readonly bases: Map<string, Map<string, Float32Array>>;
}

/** Opens `dir` at `choice` (for eval, serve-openai and the learning diagnostics); errors name what is missing. */
export async function openRunCheckpoint(dir: string, choice: CheckpointChoice): Promise<RunAtCheckpoint> {
  const folder = await readRunFolder(dir);
  const { experiment } = await loadRunExperiment(folder);
  const checkpoint = await findRunCheckpoint(folder.dir, choice);
  return { folder, experiment, checkpoint, bases: await runBaseWeights(folder.dir, experiment) };
}

/**
 * The team's policies on `engine`, started from `bases` and, with a checkpoint folder, restored
 * from it (null: the team as it starts, e.g. the initial checkpoint or an untrained config). The
 * policies made are disposed again when restoring fails.
 */
export async function loadTeamPolicies(engine: Engine, exp: ResolvedExperiment, bases: ReadonlyMap<string, ReadonlyMap<string, Float32Array>>, checkpointDir: string | null): Promise<Map<string, Policy>> {
  const policies = await createPolicies(engine, exp, bases);
  if (checkpointDir) {
    try {
      await restorePolicies(checkpointDir, policies);
    } catch (e) {
      for (const p of policies.values()) await p.dispose();
      throw e;
    }
  }
  return policies;
}

/**
 * A model's weights as its experiment declares them, before any training: its initialisation, or
 * its source checkpoint (a Troupe checkpoint or a Hugging Face folder).
 */
export async function sourceWeights(m: { readonly config: ModelConfig; readonly source: ModelSource }): Promise<Map<string, Float32Array>> {
  return m.source.kind === 'init' ? initParameters(m.config, m.source.seed) : (await loadCheckpoint(m.source.path)).params;
}

/**
 * Every policy's trainable tensors at a checkpoint: the adapter with LoRA, all weights otherwise.
 * `bases` are the run's base weights (for the initial team).
 */
export async function policyTensors(exp: ResolvedExperiment, ck: RunCheckpoint, bases: ReadonlyMap<string, ReadonlyMap<string, Float32Array>>): Promise<Map<string, Map<string, Float32Array>>> {
  const out = new Map<string, Map<string, Float32Array>>();
  for (const [policyId, spec] of exp.policies) {
    const model = exp.models.get(spec.model);
    if (!model) throw new Error(`policy '${policyId}': unknown model '${spec.model}'`);
    if (ck.dir) {
      const { tensors } = await readSafetensorsFile(join(ck.dir, `${policyId}.safetensors`));
      out.set(policyId, new Map([...tensors].map(([name, t]) => [name, t.data])));
    } else if (spec.lora) {
      // The same adapter the trainer starts from (policies.ts): seeded by the policy id, B = 0.
      out.set(policyId, initLoraParameters(model.config, parseLoraConfig({ rank: spec.lora.rank, alpha: spec.lora.alpha, targets: [...spec.lora.targets] }), stringSeed(policyId, exp.seed)));
    } else {
      out.set(policyId, new Map(bases.get(spec.model)));
    }
  }
  return out;
}
