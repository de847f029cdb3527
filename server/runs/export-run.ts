/**
 * Writes a run's trained policies at one checkpoint in formats other tools load:
 *   <out>/<policyId>/adapter_config.json + adapter_model.safetensors   LoRA policies, PEFT layout
 *   <out>/<modelId>.model/config.json + model.safetensors + tokenizer.json   the base model those
 *       adapters apply to (the run's warm-started model; an adapter is of no use without it)
 *   <out>/<policyId>/config.json + model.safetensors + tokenizer.json   fully fine-tuned policies
 *   <out>/export.json   what was written, and which agent each policy acts for
 * Config ids cannot contain '.', so `<modelId>.model` never collides with a policy's folder.
 * Used by `troupe export` and the server's `adapters/export`.
 */
import { existsSync } from 'node:fs';
import { readdir } from 'node:fs/promises';
import { join } from 'node:path';
import { CHECKPOINT_CONFIG_FILE, CHECKPOINT_WEIGHTS_FILE, saveCheckpoint } from '../models/checkpoint.ts';
import { writeJsonFile } from '../models/json-file.ts';
import { exportPeftAdapter, PEFT_CONFIG_FILE, PEFT_WEIGHTS_FILE } from '../models/lora.ts';
import { saveTokenizer, TOKENIZER_FILE } from '../models/tokenizer.ts';
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

/** Exports the run in `runDir` at `choice` into `out`, which must be new or empty (absolute path). */
export async function exportRun(runDir: string, choice: CheckpointChoice, out: string): Promise<ExportedRun> {
  if (existsSync(out) && (await readdir(out)).length > 0) throw new Error(`${out} is not empty`);
  const folder = await readRunFolder(runDir);
  const { experiment: exp } = await loadRunExperiment(folder);
  const ck = await findRunCheckpoint(folder.dir, choice);
  const bases = await runBaseWeights(folder.dir, exp);
  const tensors = await policyTensors(exp, ck, bases);
  const meta = { run: folder.runId, checkpoint: ck.label, step: String(ck.step) };

  const written: Array<{ dir: string; files: string[] }> = [];
  const manifest: Record<string, unknown> = {};
  const baseModels = new Set<string>();
  for (const [policyId, spec] of exp.policies) {
    const model = exp.models.get(spec.model)!;
    const dir = join(out, policyId);
    const agents = [...exp.router].filter(([, p]) => p === policyId).map(([a]) => a);
    if (spec.lora) {
      await exportPeftAdapter(dir, model.config, { rank: spec.lora.rank, alpha: spec.lora.alpha, targets: [...spec.lora.targets] }, tensors.get(policyId)!);
      written.push({ dir, files: [PEFT_CONFIG_FILE, PEFT_WEIGHTS_FILE] });
      baseModels.add(spec.model);
      manifest[policyId] = { kind: 'lora', agents, dir: policyId, base: `${spec.model}.model` };
    } else {
      await saveCheckpoint(dir, model.config, tensors.get(policyId)!, { metadata: { ...meta, policy: policyId } });
      await saveTokenizer(dir, exp.tokenizer);
      written.push({ dir, files: [CHECKPOINT_CONFIG_FILE, CHECKPOINT_WEIGHTS_FILE, TOKENIZER_FILE] });
      manifest[policyId] = { kind: 'full', agents, dir: policyId };
    }
  }
  for (const modelId of baseModels) {
    const dir = join(out, `${modelId}.model`);
    await saveCheckpoint(dir, exp.models.get(modelId)!.config, bases.get(modelId)!, { metadata: { ...meta, model: modelId } });
    await saveTokenizer(dir, exp.tokenizer);
    written.push({ dir, files: [CHECKPOINT_CONFIG_FILE, CHECKPOINT_WEIGHTS_FILE, TOKENIZER_FILE] });
  }
  await writeJsonFile(join(out, 'export.json'), { runId: folder.runId, name: exp.name, checkpoint: ck.label, step: ck.step, policies: manifest });

  return { runId: folder.runId, checkpoint: ck.label, step: ck.step, written, manifestPath: join(out, 'export.json') };
}
