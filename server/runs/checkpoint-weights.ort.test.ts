/**
 * `loadTeamPolicies` on a real engine: a team restored from a checkpoint that cannot be read is
 * refused with the folder named, and leaves nothing resident behind (its policies are disposed).
 */
import assert from 'node:assert/strict';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import { tinyConfig } from '../../test/fixtures/tiny-config.ts';
import { parseExperimentConfig } from '../protocol/experiment-config.ts';
import type { ResolvedExperiment } from '../rl/experiment.ts';
import { resolveExperiment } from '../rl/resolve-experiment.ts';
import { Engine } from '../runtime/engine.ts';
import { loadTeamPolicies, sourceWeights } from './checkpoint-weights.ts';

let dir = '';
let engine: Engine;
let exp: ResolvedExperiment;

before(async () => {
  dir = await mkdtemp(join(tmpdir(), 'troupe-team-policies-'));
  exp = await resolveExperiment(parseExperimentConfig({ ...tinyConfig, warmStart: { enabled: false } }, 'tiny'), 'tiny');
  engine = await Engine.start({ executionProvider: 'cpu', threads: 1, log: () => {} });
});

after(async () => {
  await engine?.close();
  await rm(dir, { recursive: true, force: true });
});

test('a team whose checkpoint cannot be restored is refused naming the folder, and its policies are released', async () => {
  const bases = new Map([['base', await sourceWeights(exp.models.get('base')!)]]);
  const empty = await engine.stats();
  const missing = join(dir, 'step-7');
  await assert.rejects(loadTeamPolicies(engine, exp, bases, missing), (e: unknown) => e instanceof Error && e.message.includes(missing));
  const afterFailure = await engine.stats();
  assert.equal(afterFailure.residentTensors, empty.residentTensors, 'no tensor of the refused team stays resident');
  assert.equal(afterFailure.sessions, empty.sessions, 'no session of the refused team stays open');
  // The same team without a checkpoint loads, and holds what the refused one would have.
  const team = await loadTeamPolicies(engine, exp, bases, null);
  assert.deepEqual([...team.keys()].sort(), ['plan-lora', 'tool-lora']);
  assert.ok((await engine.stats()).residentTensors > empty.residentTensors);
  for (const p of team.values()) await p.dispose();
});
