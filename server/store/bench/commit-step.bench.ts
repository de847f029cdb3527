/**
 * Run store benchmark: how long a whole step takes to validate and commit, how many bytes it adds,
 * and how long the editor's reads take once a run has some history. Not a test; prints a table and,
 * given a path, writes the numbers as JSON.
 *
 *   node --import tsx server/store/bench/commit-step.bench.ts [out.json]
 *
 * Shapes: "flat" is 64 trajectories × 8 turn rows (4 turns × 2 agents, one branch) with 64 prompt and
 * 64 response tokens per row; "tree" is the same step tree-sampled with K = 4 (32 rows per trajectory)
 * and 256-token prompts. Each shape commits `steps` steps to a fresh database in a temp folder.
 */
import { mkdtempSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { openRunStore } from '../index.ts';
import { parseStepInput } from '../step-input.ts';
import { sampleStep, type SampleStepOptions } from '../testing/sample-step.ts';
import { median } from '../../../bench/stats.ts';

const steps = 30;
const shapes: Record<string, Omit<SampleStepOptions, 'step'>> = {
  'flat 64x8x64': { instances: 64, turns: 4, agents: ['tool', 'plan'], branches: 1, promptTokens: 64, responseTokens: 64, validation: 0 },
  'flat 64x8x64 typed': { instances: 64, turns: 4, agents: ['tool', 'plan'], branches: 1, promptTokens: 64, responseTokens: 64, validation: 0, typed: true },
  'tree 64x32 (K=4) p256 r64': { instances: 64, turns: 4, agents: ['tool', 'plan'], branches: 4, promptTokens: 256, responseTokens: 64, validation: 0, typed: true },
};


function time<T>(fn: () => T): [T, number] {
  const t0 = performance.now();
  const out = fn();
  return [out, performance.now() - t0];
}

const rows: Array<Record<string, string | number>> = [];
for (const [name, shape] of Object.entries(shapes)) {
  const dir = mkdtempSync(join(tmpdir(), 'troupe-store-bench-'));
  try {
    const dbPath = join(dir, 'troupe.db');
    const store = openRunStore(dbPath);
    const runId = store.createRun({ name, config: {} }).id;
    const inputs = Array.from({ length: steps }, (_, i) => sampleStep({ step: i + 1, ...shape }));
    const validate: number[] = [];
    const commit: number[] = [];
    for (const input of inputs) {
      validate.push(time(() => parseStepInput(runId, input))[1]);
      commit.push(time(() => store.commitStep(runId, input))[1]);
    }
    const turnRows = (inputs[0]?.trajectories ?? []).reduce((n, t) => n + t.turns.length, 0);
    const listStep = median(Array.from({ length: 20 }, (_, i) => time(() => store.listTrajectories({ runId, step: (i % steps) + 1 }))[1]));
    const ids = store.listTrajectories({ runId, step: steps }).map((t) => t.id);
    const detail = median(ids.slice(0, 20).map((id) => time(() => store.getTrajectory(id))[1]));
    const series = median(Array.from({ length: 20 }, () => time(() => store.metricSeries({ runId, name: 'reward/mean', agentId: 'plan' }))[1]));
    const latest = median(Array.from({ length: 20 }, () => time(() => store.latestMetrics(runId))[1]));
    store.close(); // folds the WAL into the main file, so its size is the data's
    rows.push({
      shape: name,
      'turn rows/step': turnRows,
      'validate ms': +median(validate).toFixed(2),
      'commitStep ms (median)': +median(commit).toFixed(2),
      'commitStep ms (max)': +Math.max(...commit).toFixed(2),
      'MB/step': +(statSync(dbPath).size / steps / 2 ** 20).toFixed(2),
      'listTrajectories ms': +listStep.toFixed(3),
      'getTrajectory ms': +detail.toFixed(3),
      'metricSeries ms': +series.toFixed(3),
      'latestMetrics ms': +latest.toFixed(3),
    });
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

console.table(rows);
const out = process.argv[2];
if (out !== undefined) writeFileSync(out, `${JSON.stringify({ node: process.version, steps, rows }, null, 2)}\n`);
