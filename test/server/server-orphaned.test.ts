/**
 * `troupe serve` started by an editor that is gone: the editor's window closed, so the pipes the
 * server writes its log to are closed, and then it gets SIGTERM. It must still shut down in order
 * (exit 0, server.json removed) rather than die of EPIPE on its next log line.
 */
import assert from 'node:assert/strict';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, test } from 'node:test';
import { connect, startServerProcess, type ServerProcess } from './server-harness.ts';

const ws = mkdtempSync(join(tmpdir(), 'troupe-orphaned-'));
let server: ServerProcess | undefined;

after(() => {
  server?.child.kill('SIGKILL');
  rmSync(ws, { recursive: true, force: true });
});

test('with its stdout and stderr closed, SIGTERM still shuts the server down cleanly', async () => {
  server = await startServerProcess(ws);
  // A connected client makes the shutdown log a line ("client 1 disconnected") after the signal.
  const client = await connect(server.url, server.token);
  server.child.stdout!.destroy();
  server.child.stderr!.destroy();
  server.child.kill('SIGTERM');
  assert.deepEqual(await server.exited, { code: 0, signal: null });
  await client.closed;
  assert.ok(!existsSync(join(ws, '.troupe', 'server.json')), 'a server that shut down in order removes server.json');
});
