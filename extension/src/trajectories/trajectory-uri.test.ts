import assert from 'node:assert/strict';
import { test } from 'node:test';
import { formatTrajectoryUri, parseTrajectoryUri, runSegment, trajectoryUriPath } from './trajectory-uri.ts';

test('round trip: run, step and id survive formatting and parsing', () => {
  const ref = { trajectoryId: 12, run: 'plan-path L2', step: 3 };
  assert.equal(trajectoryUriPath(ref), '/plan-path L2/step-3/trajectory-12.trajectory');
  assert.equal(formatTrajectoryUri(ref), 'troupe:/plan-path%20L2/step-3/trajectory-12.trajectory');
  assert.deepEqual(parseTrajectoryUri(formatTrajectoryUri(ref)), ref);
  // vscode.Uri exposes the decoded path; parsing its { scheme, path } gives the same answer.
  assert.deepEqual(parseTrajectoryUri({ scheme: 'troupe', path: trajectoryUriPath(ref) }), ref);
});

test('short form names only the trajectory', () => {
  assert.equal(formatTrajectoryUri({ trajectoryId: 7 }), 'troupe:/trajectory-7.trajectory');
  assert.deepEqual(parseTrajectoryUri('troupe:/trajectory-7.trajectory'), { trajectoryId: 7 });
  assert.deepEqual(parseTrajectoryUri('troupe:/trajectory-7.trajectory?x=1#top'), { trajectoryId: 7 }, 'query and fragment are ignored');
});

test('run names with separators stay one segment', () => {
  assert.equal(runSegment('team/a\\b'), 'team_a_b');
  assert.equal(runSegment('..'), '_');
  assert.equal(runSegment('  '), '_');
  const uri = formatTrajectoryUri({ trajectoryId: 5, run: 'a/b', step: 0 });
  assert.deepEqual(parseTrajectoryUri(uri), { trajectoryId: 5, run: 'a_b', step: 0 });
});

test('malformed URIs are rejected with a message naming the URI and the defect', () => {
  const cases: Array<[string | { scheme: string; path: string }, RegExp]> = [
    ['file:/x/trajectory-1.trajectory', /scheme is 'file', not 'troupe'/],
    ['troupe:trajectory-1.trajectory', /path must start with \//],
    ['troupe:/r/step-1/trajectory-x.trajectory', /last segment 'trajectory-x\.trajectory' is not trajectory-<id>\.trajectory/],
    ['troupe:/r/step-1/trajectory-1.txt', /last segment/],
    ['troupe:/trajectory-0.trajectory', /trajectory id must be a positive integer, got '0'/],
    ['troupe:/trajectory-99999999999999999999.trajectory', /positive integer/],
    ['troupe:/r/trajectory-1.trajectory', /expected 1 or 3 path segments, got 2/],
    ['troupe:/a/b/step-1/trajectory-1.trajectory', /got 4/],
    ['troupe:/r/step-x/trajectory-1.trajectory', /step segment 'step-x' is not step-<n>/],
    ['troupe://r/step-1/trajectory-1.trajectory', /got 4/],
    ['troupe:/%E0%A4%A/trajectory-1.trajectory', /malformed percent-encoding/],
    [{ scheme: 'troupe', path: '//step-1/trajectory-1.trajectory' }, /run segment is empty/],
  ];
  for (const [uri, message] of cases) {
    assert.throws(() => parseTrajectoryUri(uri), (e: Error) => {
      assert.match(e.message, /^not a Troupe trajectory URI: /);
      assert.match(e.message, message);
      return true;
    }, String(typeof uri === 'string' ? uri : uri.path));
  }
});

test('building a URI refuses ids and steps that could not be parsed back', () => {
  assert.throws(() => trajectoryUriPath({ trajectoryId: 0 }), /positive integer, got 0/);
  assert.throws(() => trajectoryUriPath({ trajectoryId: 1.5 }), /positive integer, got 1\.5/);
  assert.throws(() => trajectoryUriPath({ trajectoryId: 1, run: 'r', step: -1 }), /step must be a non-negative integer, got -1/);
});
