import assert from 'node:assert/strict';
import { renameSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';
import { openRunStore } from './index.ts';
import { fromStoredPath, toStoredPath } from './store-paths.ts';
import { tempDir } from './testing/temp-dir.ts';

test('paths inside the store folder are stored relative with "/", others absolute', () => {
  const store = '/w/project/.troupe';
  assert.equal(toStoredPath(store, '/w/project/.troupe/runs/r1/step-10'), 'runs/r1/step-10');
  assert.equal(toStoredPath(store, 'runs/r1'), 'runs/r1', 'relative inputs are taken relative to the store folder');
  assert.equal(toStoredPath(store, '/data/checkpoints/a'), '/data/checkpoints/a');
  assert.equal(toStoredPath(store, '/w/project/.troupe/../other'), '/w/project/other');
  assert.equal(toStoredPath(store, '/w/project/.troupe/..hidden/x'), '..hidden/x', 'a name starting with ".." is still inside');
  assert.equal(fromStoredPath(store, 'runs/r1/step-10'), '/w/project/.troupe/runs/r1/step-10');
  assert.equal(fromStoredPath(store, '/data/checkpoints/a'), '/data/checkpoints/a');
});

test('a workspace moved to another folder still finds its run folders and checkpoints', () => {
  const parent = tempDir();
  const before = join(parent, 'workspace');
  const after = join(parent, 'moved');
  let store = openRunStore(join(before, '.troupe', 'troupe.db'));
  const run = store.createRun({ id: 'r1', name: 'movable', config: {} });
  store.addCheckpoint(run.id, { step: 0, kind: 'warmstart', path: join(run.runDir, 'warmstart.safetensors') });
  store.addCheckpoint(run.id, { step: 0, kind: 'warmstart', path: '/shared/base.safetensors', policyId: 'base' });
  store.close();

  renameSync(before, after);
  store = openRunStore(join(after, '.troupe', 'troupe.db'));
  assert.equal(store.getRun('r1')?.runDir, join(after, '.troupe', 'runs', 'r1'));
  assert.deepEqual(store.listCheckpoints('r1').map((c) => c.path), [
    join(after, '.troupe', 'runs', 'r1', 'warmstart.safetensors'),
    '/shared/base.safetensors',
  ]);
  store.close();
});
