/**
 * `troupe serve`: the training server the editor talks to (JSON-RPC 2.0 over WebSocket). It prints
 * its URL, writes `.troupe/server.json` and a 0600 token file, and serves until Ctrl-C or SIGTERM,
 * which pause live runs at their step boundary (resumable) before it exits.
 */
import { resolve } from 'node:path';
import { TroupeServer } from '../rpc/troupe-server.ts';
import { expectPositionals, integerFlag, parseCommandLine, printUsage, type Command } from './command.ts';
import { displayPath } from './text-format.ts';

const usage = `usage: troupe serve [--host 127.0.0.1] [--port 0] [--workspace DIR] [--max-runs N] [--allow-path DIR]...

Serves the workspace's runs to editors: run control, live metrics, trajectory queries and config
language features, as JSON-RPC 2.0 over WebSocket. Clients authenticate with the bearer token in
the file that <workspace>/.troupe/server.json names (readable only by you); browser origins are
refused.

options:
  --host HOST      interface to listen on (default 127.0.0.1; anything else is reachable from
                   other machines and is warned about)
  --port N         port (default 0: a free one; the URL is printed and written to server.json)
  --workspace DIR  the folder holding .troupe/ (default .)
  --max-runs N     runs training at once; more wait as 'queued' (default 1)
  --allow-path DIR a folder outside the workspace that clients may name (a config file, a
                   checkpoint folder in a config, an export destination); repeatable. Without
                   it every such path must lie inside the workspace, symbolic links resolved
  -h, --help       this text

Ctrl-C (or SIGTERM) pauses live runs after their step in flight and exits; a second Ctrl-C exits
at once (committed steps are kept; the step in flight is lost). A killed server's runs are listed
as interrupted on the next start and can be resumed.
`;

export const serveCommand: Command = {
  synopsis: ['serve [--host 127.0.0.1] [--port 0] [--workspace DIR] [--max-runs N] [--allow-path DIR]...'],
  summary: 'serve the workspace to the editor (JSON-RPC over WebSocket)',
  usage,
  async run(args) {
    const { values, positionals } = parseCommandLine(usage, {
      args: [...args],
      options: {
        host: { type: 'string', default: '127.0.0.1' },
        port: { type: 'string', default: '0' },
        workspace: { type: 'string' },
        'max-runs': { type: 'string' },
        'allow-path': { type: 'string', multiple: true },
        help: { type: 'boolean', short: 'h', default: false },
      },
      allowPositionals: true,
      strict: true,
    });
    if (values.help) return printUsage(usage);
    expectPositionals(positionals, [], usage);
    const port = integerFlag('port', values.port, 0, usage);
    const maxRuns = values['max-runs'] === undefined ? undefined : integerFlag('max-runs', values['max-runs'], 1, usage);
    const workspace = resolve(values.workspace ?? '.');
    // An editor starts the server with its output piped to it and may be gone first (its window
    // closed, then SIGTERM): writing to the closed pipe must not kill the server before it has
    // paused its runs and removed server.json. The lines are lost; the server goes on.
    for (const stream of [process.stdout, process.stderr]) {
      stream.on('error', (e: NodeJS.ErrnoException) => {
        if (e.code !== 'EPIPE' && e.code !== 'ERR_STREAM_DESTROYED') throw e;
      });
    }
    const log = (line: string) => process.stderr.write(`${new Date().toISOString()} ${line}\n`);
    const allowPaths = (values['allow-path'] ?? []).map((p) => resolve(p));
    const server = await TroupeServer.start({ workspace, host: values.host, port, log, allowPaths, ...(maxRuns !== undefined ? { maxConcurrentRuns: maxRuns } : {}) });
    // The URL on stdout, alone on its line, is the contract with whoever started the server.
    process.stdout.write(`troupe server listening on ${server.url}\ntoken file: ${displayPath(server.tokenFile)}\n`);

    return new Promise<number>((done) => {
      let signalled = false;
      const onSignal = (signal: NodeJS.Signals) => {
        if (signalled) {
          // Second signal: die by it (see train-command.ts on why not process.exit mid-run).
          process.off('SIGINT', onSignal);
          process.off('SIGTERM', onSignal);
          process.kill(process.pid, signal);
          return;
        }
        signalled = true;
        log(`${signal}: pausing live runs at their step boundary, then exiting (again to exit now)`);
        server.close().then(
          () => done(0),
          (e: unknown) => {
            log(`shutdown failed: ${e instanceof Error ? e.message : String(e)}`);
            done(1);
          },
        );
      };
      process.on('SIGINT', onSignal);
      process.on('SIGTERM', onSignal);
    });
  },
};
