/**
 * `troupe export`: writes a run's trained policies at one checkpoint in formats other tools load:
 *   <out>/<policyId>/adapter_config.json + adapter_model.safetensors   LoRA policies, PEFT layout
 *   <out>/<modelId>.model/config.json + model.safetensors + tokenizer.json   the base model those
 *       adapters apply to (the run's warm-started model; an adapter is of no use without it)
 *   <out>/<policyId>/config.json + model.safetensors + tokenizer.json   fully fine-tuned policies
 *   <out>/export.json   what was written, and which agent each policy acts for
 * Config ids cannot contain '.', so `<modelId>.model` never collides with a policy's folder.
 */
import { existsSync } from 'node:fs';
import { readdir } from 'node:fs/promises';
import { join, resolve } from 'node:path';
import { CHECKPOINT_CONFIG_FILE, CHECKPOINT_WEIGHTS_FILE, saveCheckpoint } from '../models/checkpoint.ts';
import { writeJsonFile } from '../models/json-file.ts';
import { exportPeftAdapter, PEFT_CONFIG_FILE, PEFT_WEIGHTS_FILE } from '../models/lora.ts';
import { saveTokenizer, TOKENIZER_FILE } from '../models/tokenizer.ts';
import { checkpointChoiceHelp, findRunCheckpoint, parseCheckpointChoice, policyTensors, runBaseWeights } from './checkpoint-weights.ts';
import { expectPositionals, parseCommandLine, printUsage, UsageError, type Command } from './command.ts';
import { loadRunExperiment, readRunFolder } from './run-folder.ts';
import { displayPath } from './text-format.ts';

const usage = `usage: troupe export <run folder> --out DIR [--checkpoint ${checkpointChoiceHelp}]

Writes a run's policies at a checkpoint (default latest) into DIR, which must be new or empty:
  DIR/<policy>/adapter_config.json, adapter_model.safetensors   LoRA adapters in the PEFT layout
  DIR/<model>.model/config.json, model.safetensors, tokenizer.json   the base model they adapt
  DIR/<policy>/config.json, model.safetensors, tokenizer.json   fully fine-tuned policies
  DIR/export.json   the run, checkpoint, and which agent each policy acts for

options:
  --out DIR        where to write
  --checkpoint C   initial (the warm-started team, step 0), latest (default) or a step number
  -h, --help       this text
`;

export const exportCommand: Command = {
  synopsis: [`export <run folder> --out DIR [--checkpoint ${checkpointChoiceHelp}]`],
  summary: 'write the LoRA adapters (PEFT layout) and model checkpoints of a checkpoint',
  usage,
  async run(args) {
    const { values, positionals } = parseCommandLine(usage, {
      args: [...args],
      options: {
        out: { type: 'string' },
        checkpoint: { type: 'string', default: 'latest' },
        help: { type: 'boolean', short: 'h', default: false },
      },
      allowPositionals: true,
      strict: true,
    });
    if (values.help) return printUsage(usage);
    expectPositionals(positionals, ['<run folder>'], usage);
    if (values.out === undefined) throw new UsageError('missing --out DIR', usage);
    const choice = parseCheckpointChoice(values.checkpoint);
    if (!choice) throw new UsageError(`--checkpoint must be ${checkpointChoiceHelp}, got '${values.checkpoint}'`, usage);
    const out = resolve(values.out);
    if (existsSync(out) && (await readdir(out)).length > 0) throw new Error(`--out ${displayPath(out)} is not empty`);

    const folder = await readRunFolder(positionals[0]!);
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

    process.stdout.write(`exported run ${folder.runId}, checkpoint ${ck.label} (step ${ck.step}), to ${displayPath(out)}:\n`);
    for (const w of written) process.stdout.write(`  ${displayPath(w.dir)}/  ${w.files.join(', ')}\n`);
    process.stdout.write(`  ${displayPath(join(out, 'export.json'))}\n`);
    return 0;
  },
};
