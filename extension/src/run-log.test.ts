import assert from 'node:assert/strict';
import { test } from 'node:test';
import { runLogLine } from './run-log.ts';

test('a run log line names its run', () => {
  assert.equal(runLogLine('r1', 'step 3: reward 0.5'), '[run r1] step 3: reward 0.5');
});
