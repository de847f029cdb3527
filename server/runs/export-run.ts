/**
 * Writes a run's trained policies at one checkpoint in formats other tools load (for a model whose
 * source is a Hugging Face folder, its base and full policies are written as Hugging Face folders
 * with the source's tokenizer files, and adapters name their base in base_model_name_or_path):
 *   <out>/<policyId>/adapter_config.json + adapter_model.safetensors   LoRA policies, PEFT layout
 *   <out>/<modelId>.model/config.json + model.safetensors + troupe-tokenizer.json   the base model those
 *       adapters apply to (the run's warm-started model; an adapter is of no use without it)
 *   <out>/<policyId>/config.json + model.safetensors + troupe-tokenizer.json   fully fine-tuned policies
 *   <out>/export.json   what was written, and which agent each policy acts for
 * Config ids cannot contain '.', so `<modelId>.model` never collides with a policy's folder.
 * Used by `troupe export` and the server's `adapters/export`.
 */
import { existsSync } from 'node:fs';
import { mkdir, readdir, rm } from 'node:fs/promises';
import { join } from 'node:path';
import { CHECKPOINT_CONFIG_FILE, CHECKPOINT_WEIGHTS_FILE, saveCheckpoint } from '../models/checkpoint.ts';
import { writeJsonFile } from '../models/json-file.ts';
import { HF_CONFIG_FILE, HF_WEIGHTS_FILE, saveHfCheckpoint } from '../models/hf-checkpoint.ts';
import { exportPeftAdapter, PEFT_CONFIG_FILE, PEFT_WEIGHTS_FILE } from '../models/lora.ts';
import { copyHfTokenizerFiles, readHfSource, type HfSource } from '../models/model-folder.ts';
import { CharTokenizer, saveTokenizer, TOKENIZER_FILE } from '../models/tokenizer.ts';
import type { ResolvedExperiment } from '../rl/experiment.ts';
import { findRunCheckpoint, policyTensors, runBaseWeights, type CheckpointChoice } from './checkpoint-weights.ts';
import { loadRunExperiment, readRunFolder } from './run-folder.ts';

export interface ExportedRun {
  readonly runId: string;
  /** `initial`, `latest` or `step-<n>`. */
  readonly checkpoint: string;
  readonly step: number;
  /** Folders written, each with the files in it. */
  readonly written: ReadonlyArray<{ readonly dir: string; readonly files: readonly string[] }>;
  /** The manifest, `<out>/export.json`. */
  readonly manifestPath: string;
}

/** How often a `latest` export is retried when the run's trainer replaces the checkpoint while it is read. */
const LATEST_ATTEMPTS = 3;

/**
 * The policy tensors at `choice`. `latest` is the resume checkpoint, which a run in training
 * replaces after every step (two renames, so for a moment it does not exist): the read is repeated
 * until the checkpoint's step is the same before and after it, so an export never mixes steps.
 */
async function readConsistent(runDir: string, choice: CheckpointChoice, exp: Awaited<ReturnType<typeof loadRunExperiment>>['experiment'], bases: Map<string, Map<string, Float32Array>>) {
  for (let attempt = 1; ; attempt++) {
    try {
      const ck = await findRunCheckpoint(runDir, choice);
      const tensors = await policyTensors(exp, ck, bases);
      if (choice.kind !== 'latest' || (await findRunCheckpoint(runDir, choice)).step === ck.step) return { ck, tensors };
      if (attempt >= LATEST_ATTEMPTS) throw new Error(`the latest checkpoint changed ${LATEST_ATTEMPTS} times while it was read (the run is training); export a step checkpoint instead`);
    } catch (e) {
      if (choice.kind !== 'latest' || attempt >= LATEST_ATTEMPTS || (e as NodeJS.ErrnoException).code !== 'ENOENT') throw e;
    }
  }
}

/**
 * Exports the run in `runDir` at `choice` into `out`, which must be new or empty (absolute path).
 * Aborting `signal` stops between files and removes what this export wrote.
 */
export async function exportRun(runDir: string, choice: CheckpointChoice, out: string, signal?: AbortSignal): Promise<ExportedRun> {
  const existed = existsSync(out);
  if (existed && (await readdir(out)).length > 0) throw new Error(`${out} is not empty`);
  try {
    return await writeExport(runDir, choice, out, signal);
  } catch (e) {
    // Leave the folder as it was: an export that failed or was cancelled half-way is of no use.
    await rm(out, { recursive: true, force: true });
    if (existed) await mkdir(out, { recursive: true });
    throw e;
  }
}

/**
 * A Troupe-format model folder gets the character tokenizer. An experiment has one tokenizer
 * (resolveExperiment refuses a mix), so a Hugging Face tokenizer here means a wiring mistake.
 */
async function saveCharTokenizer(dir: string, exp: ResolvedExperiment): Promise<void> {
  if (!(exp.tokenizer instanceof CharTokenizer)) throw new Error(`${dir}: a Troupe-format model, but the experiment's tokenizer is a Hugging Face one`);
  await saveTokenizer(dir, exp.tokenizer);
}

async function writeExport(runDir: string, choice: CheckpointChoice, out: string, signal: AbortSignal | undefined): Promise<ExportedRun> {
  const folder = await readRunFolder(runDir);
  const { experiment: exp } = await loadRunExperiment(folder);
  const bases = await runBaseWeights(folder.dir, exp);
  const { ck, tensors } = await readConsistent(folder.dir, choice, exp, bases);
  const meta = { run: folder.runId, checkpoint: ck.label, step: String(ck.step) };

  const written: Array<{ dir: string; files: string[] }> = [];
  const manifest: Record<string, unknown> = {};
  const baseModels = new Set<string>();
  const hf = new Map<string, HfSource>();
  for (const [modelId, m] of exp.models) {
    const source = m.source.kind === 'checkpoint' ? await readHfSource(m.source.path) : null;
    if (source) hf.set(modelId, source);
  }
  /** Writes weights of a Hugging Face-sourced model as a Hugging Face folder with its tokenizer. */
  const saveHf = async (dir: string, source: HfSource, config: Parameters<typeof saveHfCheckpoint>[1], weights: ReadonlyMap<string, Float32Array>, metadata: Record<string, string>) => {
    await saveHfCheckpoint(dir, config, weights, { modelType: source.modelType, sourceConfig: source.config, metadata });
    return [HF_CONFIG_FILE, HF_WEIGHTS_FILE, ...(await copyHfTokenizerFiles(source.dir, dir))];
  };
  for (const [policyId, spec] of exp.policies) {
    signal?.throwIfAborted();
    const model = exp.models.get(spec.model)!;
    const dir = join(out, policyId);
    const agents = [...exp.router].filter(([, p]) => p === policyId).map(([a]) => a);
    if (spec.lora) {
      // The base the adapter was trained on: the source model itself unless a warm start changed
      // it, in which case the exported <model>.model folder (absolute, as PEFT resolves it).
      const source = hf.get(spec.model);
      const baseName = source && (exp.warmStart.enabled ? join(out, `${spec.model}.model`) : (source.nameOrPath ?? source.dir));
      await exportPeftAdapter(dir, model.config, { rank: spec.lora.rank, alpha: spec.lora.alpha, targets: [...spec.lora.targets] }, tensors.get(policyId)!, baseName ? { baseModelNameOrPath: baseName } : {});
      written.push({ dir, files: [PEFT_CONFIG_FILE, PEFT_WEIGHTS_FILE] });
      baseModels.add(spec.model);
      manifest[policyId] = { kind: 'lora', agents, dir: policyId, base: `${spec.model}.model` };
    } else {
      const source = hf.get(spec.model);
      if (source) {
        written.push({ dir, files: await saveHf(dir, source, model.config, tensors.get(policyId)!, { ...meta, policy: policyId }) });
      } else {
        await saveCheckpoint(dir, model.config, tensors.get(policyId)!, { metadata: { ...meta, policy: policyId } });
        await saveCharTokenizer(dir, exp);
        written.push({ dir, files: [CHECKPOINT_CONFIG_FILE, CHECKPOINT_WEIGHTS_FILE, TOKENIZER_FILE] });
      }
      manifest[policyId] = { kind: 'full', agents, dir: policyId };
    }
  }
  for (const modelId of baseModels) {
    signal?.throwIfAborted();
    const dir = join(out, `${modelId}.model`);
    const source = hf.get(modelId);
    if (source) {
      written.push({ dir, files: await saveHf(dir, source, exp.models.get(modelId)!.config, bases.get(modelId)!, { ...meta, model: modelId }) });
      continue;
    }
    await saveCheckpoint(dir, exp.models.get(modelId)!.config, bases.get(modelId)!, { metadata: { ...meta, model: modelId } });
    await saveCharTokenizer(dir, exp);
    written.push({ dir, files: [CHECKPOINT_CONFIG_FILE, CHECKPOINT_WEIGHTS_FILE, TOKENIZER_FILE] });
  }
  await writeJsonFile(join(out, 'export.json'), { runId: folder.runId, name: exp.name, checkpoint: ck.label, step: ck.step, policies: manifest });

  return { runId: folder.runId, checkpoint: ck.label, step: ck.step, written, manifestPath: join(out, 'export.json') };
}
