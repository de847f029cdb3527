/**
 * A shutdown past its timeout while a run is inside an engine call: the run manager asks the worker
 * to abort and, if it has not exited after its grace period, terminates it — but never while its
 * engine has a call in flight, since a thread torn down inside an ONNX Runtime call aborts the
 * whole process ("terminate called after throwing an instance of 'Napi::Error'", exit 134). With a
 * grace of 1 ms the grace always expires inside a call; the process must survive, the run must be
 * paused with a whole resume checkpoint, and it must resume from it. The manager runs in a child
 * process (shutdown-child.ts) so a crash is reported rather than taking the test runner with it.
 */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { after, test } from 'node:test';
import { readCheckpointState, resumeDir } from '../../server/rl/run-checkpoint.ts';
import { RunManager } from '../../server/runs/run-manager.ts';
import { tinyConfigWithSteps } from '../fixtures/tiny-config.ts';

const child = fileURLToPath(new URL('./shutdown-child.ts', import.meta.url));
const ws = mkdtempSync(join(tmpdir(), 'troupe-shutdown-'));
after(() => rmSync(ws, { recursive: true, force: true }));

test('a worker past its exit grace is not terminated inside an engine call; the run pauses with a whole checkpoint and resumes', { timeout: 180_000 }, async () => {
  const configFile = join(ws, 'config.json');
  writeFileSync(configFile, JSON.stringify(tinyConfigWithSteps(6)));
  const r = spawnSync(process.execPath, ['--import', 'tsx', child, ws, configFile, '1'], { encoding: 'utf8', timeout: 150_000 });
  assert.equal(r.signal, null, `the process died of ${r.signal}: ${r.stderr.slice(-2000)}`);
  assert.equal(r.status, 0, `exit ${r.status}: ${r.stderr.slice(-2000)}`);
  const out = JSON.parse(r.stdout.trim().split('\n').at(-1)!) as { runId: string; runDir: string; state: string; lastCommittedStep: number | null; log: string[] };
  assert.equal(out.state, 'paused', out.log.join('\n'));
  assert.ok(out.log.some((l) => /abandoning its step in flight/.test(l)), 'the shutdown went past its timeout');
  // Whatever the thread was doing, the resume checkpoint is the last committed step's, whole.
  const last = out.lastCommittedStep ?? 0;
  const state = await readCheckpointState(resumeDir(out.runDir));
  assert.equal(state?.step, last);

  const m = await RunManager.open({ workspace: ws, log: () => {} });
  try {
    const done = new Promise<void>((resolve) => m.onDidChangeState((e) => e.runId === out.runId && e.state === 'done' && resolve()));
    await m.resume(out.runId, { steps: last + 1 });
    await done;
    assert.deepEqual(m.store.listSteps(out.runId).map((s) => s.step), Array.from({ length: last + 2 }, (_, i) => i));
  } finally {
    await m.close();
  }
});
