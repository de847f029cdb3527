/**
 * `troupe runs`: the runs of a workspace's database, newest first. A run recorded as 'running'
 * whose process is gone (killed, machine restarted) is flagged, since the database alone cannot
 * tell; `troupe train --resume` continues it.
 */
import { existsSync } from 'node:fs';
import { resolve } from 'node:path';
import { defaultDatabasePath, openRunStore } from '../store/index.ts';
import { expectPositionals, parseCommandLine, printUsage, type Command } from './command.ts';
import { readRunFolder } from '../runs/run-folder.ts';
import { runLockHolder } from '../runs/run-lock.ts';
import { displayPath, formatTable, formatTime } from './text-format.ts';

const usage = `usage: troupe runs [--workspace DIR] [--json]

Lists the runs in <workspace>/.troupe/troupe.db, newest first: id, name, state, last committed
step (of the run's target), creation time and run folder.

options:
  --workspace DIR  the folder holding .troupe/ (default .)
  --json           print one JSON array of runs
  -h, --help       this text
`;

export const runsCommand: Command = {
  synopsis: ['runs [--workspace DIR] [--json]'],
  summary: 'list the runs of the workspace: id, name, state, step, created, run folder',
  usage,
  async run(args) {
    const { values, positionals } = parseCommandLine(usage, {
      args: [...args],
      options: {
        workspace: { type: 'string' },
        json: { type: 'boolean', default: false },
        help: { type: 'boolean', short: 'h', default: false },
      },
      allowPositionals: true,
      strict: true,
    });
    if (values.help) return printUsage(usage);
    expectPositionals(positionals, [], usage);
    const dbPath = defaultDatabasePath(resolve(values.workspace ?? '.'));
    // Listing must not create a database where there is none.
    const store = existsSync(dbPath) ? openRunStore(dbPath) : null;
    const runs = store?.listRuns() ?? [];
    store?.close();
    const rows = await Promise.all(
      runs.map(async (r) => {
        const steps = await readRunFolder(r.runDir).then((f) => f.steps, () => null);
        const stale = r.state === 'running' && existsSync(r.runDir) && runLockHolder(r.runDir) === null;
        return { ...r, steps, stale };
      }),
    );
    if (values.json) {
      process.stdout.write(`${JSON.stringify(rows)}\n`);
      return 0;
    }
    if (rows.length === 0) {
      process.stdout.write(`no runs in ${displayPath(dbPath)}\n`);
      return 0;
    }
    const table = formatTable(
      ['id', 'name', 'state', 'step', 'created', 'run folder'],
      rows.map((r) => [
        r.id,
        r.name,
        r.stale ? 'running*' : r.state,
        `${r.lastCommittedStep ?? '-'}${r.steps === null ? '' : `/${r.steps}`}`,
        formatTime(r.createdAt),
        displayPath(r.runDir),
      ]),
      ['left', 'left', 'left', 'right'],
    );
    const notes = [
      ...(rows.some((r) => r.stale) ? ['* no process is training it (killed?): continue it with troupe train --resume <id>'] : []),
      ...rows.filter((r) => r.state === 'failed' && r.error).map((r) => `${r.id} failed: ${r.error!.split('\n')[0]}`),
    ];
    process.stdout.write(`${table}\n${notes.map((n) => `${n}\n`).join('')}`);
    return 0;
  },
};
