/**
 * `troupe export`: writes a run's trained policies at one checkpoint (LoRA adapters in the PEFT
 * layout, full models as checkpoints; see export-run.ts for the layout).
 */
import { existsSync } from 'node:fs';
import { readdir } from 'node:fs/promises';
import { resolve } from 'node:path';
import { checkpointChoiceHelp, parseCheckpointChoice } from '../runs/checkpoint-weights.ts';
import { expectPositionals, parseCommandLine, printUsage, UsageError, type Command } from './command.ts';
import { exportRun } from '../runs/export-run.ts';
import { displayPath } from './text-format.ts';

const usage = `usage: troupe export <run folder> --out DIR [--checkpoint ${checkpointChoiceHelp}]

Writes a run's policies at a checkpoint (default latest) into DIR, which must be new or empty:
  DIR/<policy>/adapter_config.json, adapter_model.safetensors   LoRA adapters in the PEFT layout
  DIR/<model>.model/config.json, model.safetensors, troupe-tokenizer.json   the base model they adapt
  DIR/<policy>/config.json, model.safetensors, troupe-tokenizer.json   fully fine-tuned policies
  DIR/export.json   the run, checkpoint, and which agent each policy acts for

options:
  --out DIR        where to write
  --checkpoint C   initial (the warm-started team, step 0), latest (default), best (the
                   validated step with the highest validation success) or a step number
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

    const r = await exportRun(positionals[0]!, choice, out);
    process.stdout.write(`exported run ${r.runId}, checkpoint ${r.checkpoint} (step ${r.step}), to ${displayPath(out)}:\n`);
    for (const w of r.written) process.stdout.write(`  ${displayPath(w.dir)}/  ${w.files.join(', ')}\n`);
    process.stdout.write(`  ${displayPath(r.manifestPath)}\n`);
    return 0;
  },
};
