/**
 * `troupe eval <experiment config.json>`: the team as the config declares it, untrained (the
 * paper's "untrained" rows), through the real CLI in a child process.
 */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { z } from 'zod';
import { tinyConfig } from '../fixtures/tiny-config.ts';

const cli = fileURLToPath(new URL('../../server/cli/troupe.mjs', import.meta.url));
let ws = '';
before(() => {
  ws = mkdtempSync(join(tmpdir(), 'troupe-eval-untrained-'));
  // A warm start is declared but must not run: an untrained evaluation plays the initial weights.
  writeFileSync(join(ws, 'tiny.json'), JSON.stringify(tinyConfig));
});
after(() => rmSync(ws, { recursive: true, force: true }));

const troupe = (args: readonly string[]) => spawnSync(process.execPath, [cli, ...args], { cwd: ws, encoding: 'utf8' });

const reportSchema = z.object({
  runId: z.null(),
  runDir: z.string(),
  checkpoint: z.literal('untrained'),
  step: z.literal(0),
  episodes: z.literal(6),
  seedOffset: z.literal(2),
  success: z.number().min(0).max(1),
  meanReward: z.number(),
  meanTeamReturn: z.number(),
  perAgent: z.record(z.string(), z.object({ acts: z.int().positive() }).loose()),
});

test('an experiment config is evaluated untrained, reproducibly, without creating a run', () => {
  const a = troupe(['eval', 'tiny.json', '--episodes', '6', '--seed-offset', '2', '--json']);
  assert.equal(a.status, 0, a.stderr);
  const r = reportSchema.parse(JSON.parse(a.stdout));
  assert.deepEqual(Object.keys(r.perAgent).sort(), ['plan', 'tool']);
  assert.equal(r.runDir, join(ws, 'tiny.json'));
  const b = troupe(['eval', 'tiny.json', '--episodes', '6', '--seed-offset', '2', '--json']);
  assert.deepEqual(JSON.parse(b.stdout), JSON.parse(a.stdout));
  const table = troupe(['eval', 'tiny.json', '--episodes', '6', '--seed-offset', '2']);
  assert.match(table.stdout, /tiny\.json, untrained, validation seeds 2\.\.7/);
  assert.equal(spawnSync('ls', [join(ws, '.troupe')]).status === 0, false, 'no workspace state is written');
});

test('--checkpoint with a config file is a usage error', () => {
  const r = troupe(['eval', 'tiny.json', '--checkpoint', 'latest']);
  assert.equal(r.status, 2);
  assert.match(r.stderr, /--checkpoint applies to a run folder; an experiment config is evaluated untrained/);
});

test('a math team is evaluated with its programs run in the sandbox', { skip: existsSync('/usr/bin/bwrap') ? false : '/usr/bin/bwrap is missing (CI installs it with test/sandbox/setup-sandbox.sh)' }, () => {
  writeFileSync(join(ws, 'math.json'), readFileSync(fileURLToPath(new URL('../../configs/math/L2-lora.json', import.meta.url)), 'utf8').replace('"../schema.json"', '"schema.json"'));
  const r = troupe(['eval', 'math.json', '--episodes', '3', '--json']);
  assert.equal(r.status, 0, r.stderr);
  const perAgent = z.object({ perAgent: z.record(z.string(), z.object({ acts: z.int().positive() }).loose()) }).parse(JSON.parse(r.stdout)).perAgent;
  assert.deepEqual(Object.keys(perAgent).sort(), ['reasoner', 'tool']);
});
