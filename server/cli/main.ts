#!/usr/bin/env node
/**
 * The `troupe` command line. Wiring only: each subcommand lives in its own module.
 * Exit codes: 0 success, 1 error (one line `troupe: <message>`), 2 usage error (message and
 * usage), 128 + signal number when training was interrupted (Ctrl-C: 130).
 */
import { UsageError, type Command } from './command.ts';
import { demoCommand } from './demo-command.ts';
import { doctorCommand } from './doctor-command.ts';
import { evalCommand } from './eval-command.ts';
import { exportCommand } from './export-command.ts';
import { modelsCommand } from './models-command.ts';
import { runsCommand } from './runs-command.ts';
import { serveCommand } from './serve-command.ts';
import { serveOpenAiCommand } from './serve-openai-command.ts';
import { trainCommand } from './train-command.ts';

const commands = {
  train: trainCommand,
  eval: evalCommand,
  runs: runsCommand,
  export: exportCommand,
  models: modelsCommand,
  serve: serveCommand,
  'serve-openai': serveOpenAiCommand,
  demo: demoCommand,
  doctor: doctorCommand,
} as const satisfies Record<string, Command>;

const usage = `usage: troupe <command> [options]

${Object.values(commands)
  .map((c) => `${c.synopsis.map((l) => `  troupe ${l}`).join('\n')}\n      ${c.summary}`)
  .join('\n')}

Run folders, the database and the warm-start cache live in <workspace>/.troupe/ (the workspace is
the current directory unless --workspace says otherwise). troupe <command> --help for details.
`;

async function main(argv: readonly string[]): Promise<number> {
  const [name, ...rest] = argv;
  if (name === undefined || name === '--help' || name === '-h') {
    process.stdout.write(usage);
    return name === undefined ? 2 : 0;
  }
  const command = Object.hasOwn(commands, name) ? commands[name as keyof typeof commands] : undefined;
  if (!command) throw new UsageError(`unknown command '${name}'`, usage);
  return command.run(rest);
}

main(process.argv.slice(2)).then(
  (code) => process.exit(code),
  (err: unknown) => {
    if (err instanceof UsageError) {
      process.stderr.write(`troupe: ${err.message}\n${err.usage}`);
      process.exit(2);
    }
    process.stderr.write(`troupe: ${err instanceof Error ? err.message : String(err)}\n`);
    process.exit(1);
  },
);
