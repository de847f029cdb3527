/**
 * `troupe demo`: the engine smoke test (engine-demo.ts) behind the command line.
 */
import { expectPositionals, integerFlag, parseCommandLine, printUsage, type Command } from './command.ts';
import { runEngineDemo } from './engine-demo.ts';

const usage = `usage: troupe demo [--steps N] [--batch N] [--seed N]

Trains the embedded default model from scratch on a toy task (write a digit string backwards),
printing the loss and held-out accuracy before and after: a smoke test of the whole engine.
Exits with 1 if the loss did not fall.

options:
  --steps N   training steps (default 200)
  --batch N   sequences per step (default 32)
  --seed N    initialisation and data seed (default 1)
  -h, --help  this text
`;

export const demoCommand: Command = {
  synopsis: ['demo [--steps N] [--batch N] [--seed N]'],
  summary: 'train the embedded default model on a toy task (engine smoke test)',
  usage,
  async run(args) {
    const { values, positionals } = parseCommandLine(usage, {
      args: [...args],
      options: {
        steps: { type: 'string', default: '200' },
        batch: { type: 'string', default: '32' },
        seed: { type: 'string', default: '1' },
        help: { type: 'boolean', short: 'h', default: false },
      },
      allowPositionals: true,
      strict: true,
    });
    if (values.help) return printUsage(usage);
    expectPositionals(positionals, [], usage);
    const r = await runEngineDemo({
      steps: integerFlag('steps', values.steps, 1, usage),
      batch: integerFlag('batch', values.batch, 1, usage),
      seed: integerFlag('seed', values.seed, 1, usage),
      log: (l) => console.log(l),
    });
    return r.lastLoss < r.firstLoss ? 0 : 1;
  },
};
