/**
 * One server per workspace, even when several start in the same instant: each start runs in its
 * own process, held at a barrier (serve-on-cue.ts) until all have loaded, then released together,
 * so the checks and writes of their starts overlap. Exactly one may listen; the others are refused
 * naming it. Also when a killed server left its lock behind: it is taken over, by exactly one.
 */
import assert from 'node:assert/strict';
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { hostname, tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { after, test } from 'node:test';

const cue = fileURLToPath(new URL('./serve-on-cue.ts', import.meta.url));
const root = mkdtempSync(join(tmpdir(), 'troupe-lock-'));
const children: ChildProcess[] = [];
after(() => {
  for (const c of children) c.kill('SIGKILL');
  rmSync(root, { recursive: true, force: true });
});

interface Contender {
  readonly child: ChildProcess;
  /** The next JSON line the child prints. */
  next(): Promise<Record<string, unknown>>;
  readonly exited: Promise<number | null>;
}

function contender(workspace: string): Contender {
  const child = spawn(process.execPath, ['--import', 'tsx', cue, workspace], { stdio: ['pipe', 'pipe', 'inherit'] });
  children.push(child);
  const queue: Array<Record<string, unknown>> = [];
  const waiting: Array<(m: Record<string, unknown>) => void> = [];
  createInterface({ input: child.stdout! }).on('line', (line) => {
    const m = JSON.parse(line) as Record<string, unknown>;
    const w = waiting.shift();
    if (w) w(m);
    else queue.push(m);
  });
  const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
  return { child, exited, next: () => (queue.length > 0 ? Promise.resolve(queue.shift()!) : new Promise((resolve) => waiting.push(resolve))) };
}

/** Starts `n` servers on `workspace` at once; returns what each reported, after stopping them all. */
async function race(workspace: string, n: number): Promise<Array<Record<string, unknown>>> {
  const cs = Array.from({ length: n }, () => contender(workspace));
  for (const c of cs) assert.deepEqual(await c.next(), { ready: true });
  for (const c of cs) c.child.stdin!.write('go\n');
  const results = await Promise.all(cs.map((c) => c.next()));
  for (const c of cs) c.child.stdin!.end('stop\n');
  for (const c of cs) assert.equal(await c.exited, 0);
  return results;
}

const listening = (rs: Array<Record<string, unknown>>) => rs.filter((r) => typeof r.listening === 'string');

test('three servers started in the same instant on one workspace: exactly one serves, the others are refused', { timeout: 120_000 }, async () => {
  const ws = join(root, 'fresh');
  mkdirSync(ws);
  const rs = await race(ws, 3);
  assert.equal(listening(rs).length, 1, JSON.stringify(rs));
  for (const r of rs.filter((x) => x.refused !== undefined)) assert.match(String(r.refused), /already serving/);
});

test('a lock left by a killed server is taken over, by exactly one of three racing starts', { timeout: 120_000 }, async () => {
  const ws = join(root, 'stale');
  mkdirSync(join(ws, '.troupe'), { recursive: true });
  // The pid of a process that has exited: a server that was killed.
  const dead = spawnSync(process.execPath, ['-e', '']).pid;
  writeFileSync(join(ws, '.troupe', 'server.lock'), `${JSON.stringify({ pid: dead, host: hostname(), startedAt: new Date().toISOString() })}\n`);
  const rs = await race(ws, 3);
  assert.equal(listening(rs).length, 1, JSON.stringify(rs));
  // And once it stopped, the lock is free for the next server.
  const again = await race(ws, 1);
  assert.equal(listening(again).length, 1, JSON.stringify(again));
});
