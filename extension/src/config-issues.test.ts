import assert from 'node:assert/strict';
import { test } from 'node:test';
import { formatInvalidConfig, issueOffset, parseInvalidConfigData } from './config-issues.ts';

test("InvalidConfig data as run-handlers.ts builds it is read; anything else is not", () => {
  const data = { source: 'configs/a.json', issues: [{ path: 'algorithm.k', segments: ['algorithm', 'k'], message: 'must be at least 2' }] };
  assert.deepEqual(parseInvalidConfigData(data), data.issues);
  assert.equal(parseInvalidConfigData({ issues: [] }), null);
  assert.equal(parseInvalidConfigData(undefined), null);
  assert.equal(parseInvalidConfigData({ issues: [{ path: 1 }] }), null);
});

test('the message lists the first three problems and counts the rest', () => {
  const issues = ['a', 'b', 'c', 'd', 'e'].map((p) => ({ path: p, message: `${p} is wrong` }));
  assert.equal(formatInvalidConfig('x.json', issues), 'x.json is not a valid experiment config: a: a is wrong; b: b is wrong; c: c is wrong (and 2 more)');
  assert.equal(formatInvalidConfig('x.json', [{ path: '', message: 'not JSON' }]), 'x.json is not a valid experiment config: not JSON');
});

test('an issue is located at its field, or at the nearest parent that exists', () => {
  const text = '{\n  "name": "x",\n  "algorithm": { "k": 1 }\n}';
  assert.equal(issueOffset(text, ['algorithm', 'k']), text.indexOf('"k"'));
  assert.equal(issueOffset(text, ['algorithm', 'missing']), text.indexOf('"algorithm"'));
  assert.equal(issueOffset(text, ['nowhere', 'deep']), 0);
  assert.equal(issueOffset('not json at all', ['a']), 0);
});
