/**
 * A server start held at a barrier, for racing starts in separate processes (server-lock.test.ts):
 * loading the modules takes most of a process's start-up and varies between processes, so each
 * child loads everything, says `ready`, and calls `TroupeServer.start` only when its stdin says
 * `go`. Reports one JSON line (`listening` with the URL, or `refused` with the error), then serves
 * until stdin says `stop` or closes.
 * Usage: node --import tsx test/server/serve-on-cue.ts <workspace>
 */
import { createInterface } from 'node:readline';
import { TroupeServer } from '../../server/rpc/troupe-server.ts';

const workspace = process.argv[2];
if (!workspace) throw new Error('usage: serve-on-cue.ts <workspace>');
const say = (m: Record<string, unknown>) => process.stdout.write(`${JSON.stringify(m)}\n`);
let server: TroupeServer | null = null;
const lines = createInterface({ input: process.stdin });
lines.on('line', (line) => {
  if (line === 'go') {
    TroupeServer.start({ workspace, log: () => {} }).then(
      (s) => {
        server = s;
        say({ listening: s.url });
      },
      (e: unknown) => say({ refused: e instanceof Error ? e.message : String(e) }),
    );
  } else if (line === 'stop') {
    lines.close();
  }
});
lines.on('close', () => {
  void (server?.close() ?? Promise.resolve()).then(() => process.exit(0));
});
say({ ready: true });
