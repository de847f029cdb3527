#!/usr/bin/env node
/**
 * The `troupe` command line. Wiring only: each subcommand lives in its own module.
 */
import { parseArgs } from 'node:util';
import { runEngineDemo } from './engine-demo.ts';

const usage = `usage: troupe <command> [options]

commands:
  demo [--steps N] [--batch N] [--seed N]   train the embedded default model on a toy task (engine smoke test)
`;

async function main(argv: string[]): Promise<number> {
  const [command, ...rest] = argv;
  switch (command) {
    case 'demo': {
      const { values } = parseArgs({ args: rest, options: { steps: { type: 'string', default: '200' }, batch: { type: 'string', default: '32' }, seed: { type: 'string', default: '1' } }, strict: true });
      const int = (name: string, v: string) => {
        const n = Number(v);
        if (!Number.isInteger(n) || n <= 0) throw new Error(`--${name} must be a positive integer, got '${v}'`);
        return n;
      };
      const r = await runEngineDemo({ steps: int('steps', values.steps), batch: int('batch', values.batch), seed: int('seed', values.seed), log: (l) => console.log(l) });
      return r.lastLoss < r.firstLoss ? 0 : 1;
    }
    case undefined:
    case '--help':
    case '-h':
      process.stdout.write(usage);
      return command === undefined ? 1 : 0;
    default:
      process.stderr.write(`troupe: unknown command '${command}'\n${usage}`);
      return 2;
  }
}

main(process.argv.slice(2)).then(
  (code) => process.exit(code),
  (err: unknown) => {
    process.stderr.write(`troupe: ${err instanceof Error ? err.message : String(err)}\n`);
    process.exit(1);
  },
);
