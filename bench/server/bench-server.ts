/**
 * `npm run bench:server` — is the training server responsive while a run steps?
 *
 * The server runs in this process (so its own event loop is the one measured) and a client talks to
 * it over a real WebSocket. Two phases, measured the same way in the same run:
 *   idle       no run: the baseline
 *   training   a real run stepping in the server's worker threads (the flagship's environment and
 *              model at a small budget, warm start cached)
 * In each phase: for a fixed number of seconds, a cheap request (`server/status`) every 10 ms, its
 * round-trip latency recorded, and the server's event-loop delay (perf_hooks.monitorEventLoopDelay,
 * 10 ms resolution), with the steps the run committed meanwhile; then notification throughput:
 * 2000 config edits (`textDocument/didChange`), each answered by `publishDiagnostics`, one in flight.
 * Target (the project's quality bar): event-loop delay p99 < 50 ms while training. Writes bench/results/server.json.
 *
 * Options (env): SERVER_BENCH_SECONDS (responsiveness window per phase, default 30).
 */
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { mkdir, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { monitorEventLoopDelay } from 'node:perf_hooks';
import { TroupeServer } from '../../server/rpc/troupe-server.ts';
import { connect, type TestClient } from '../../test/server/server-harness.ts';

const root = fileURLToPath(new URL('../..', import.meta.url));
const SECONDS = Number(process.env['SERVER_BENCH_SECONDS'] ?? 30);
const NOTIFICATIONS = 2000;

interface PhaseResult {
  phase: string;
  seconds: number;
  requests: number;
  latencyMs: { p50: number; p99: number; max: number };
  eventLoopDelayMs: { p50: number; p99: number; max: number };
  notificationsPerSecond: number;
  stepsCommitted: number;
}

const quantile = (xs: number[], q: number): number => {
  if (xs.length === 0) return Number.NaN;
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.floor(q * s.length))]!;
};
const round = (x: number) => Math.round(x * 100) / 100;

/** A config document whose every edit changes the diagnostics (a bad value, then a good one). */
function configText(i: number): string {
  const steps = i % 2 === 0 ? 10 : -1;
  return JSON.stringify({ name: 'bench', env: { name: 'plan-path' }, specialization: 'L2', policies: { t: { model: 'base', lora: {} }, p: { model: 'base', lora: {} } }, router: { tool: 't', plan: 'p' }, training: { steps } }, null, 2);
}

async function measure(phase: string, c: TestClient, stepsSoFar: () => number): Promise<PhaseResult> {
  // 1. Responsiveness: a cheap request at a steady 100 Hz for SECONDS while the event-loop delay is
  // sampled; nothing else loads the main thread, so the training (if any) runs as it normally does.
  const latencies: number[] = [];
  const delay = monitorEventLoopDelay({ resolution: 10 });
  const stepsAtStart = stepsSoFar();
  delay.enable();
  const end = performance.now() + SECONDS * 1000;
  while (performance.now() < end) {
    const t0 = performance.now();
    await c.rpc.request('server/status', {});
    latencies.push(performance.now() - t0);
    const wait = 10 - (performance.now() - t0);
    if (wait > 0) await new Promise((r) => setTimeout(r, wait));
  }
  delay.disable();
  const stepsCommitted = stepsSoFar() - stepsAtStart;

  // 2. Notification throughput: NOTIFICATIONS config edits, one in flight at a time, each answered
  // by publishDiagnostics. (Measured apart from 1: it saturates the main thread on purpose.)
  const uri = `file:///bench/${phase}.json`;
  let version = 1;
  c.rpc.notify('textDocument/didOpen', { textDocument: { uri, languageId: 'json', version, text: configText(0) } });
  await c.waitFor('textDocument/publishDiagnostics', (p) => p.uri === uri && p.version === 1);
  const t0 = performance.now();
  for (let i = 0; i < NOTIFICATIONS; i++) {
    version++;
    const want = version;
    const got = c.waitFor('textDocument/publishDiagnostics', (p) => p.uri === uri && p.version === want, 30_000);
    c.rpc.notify('textDocument/didChange', { textDocument: { uri, version }, contentChanges: [{ text: configText(version) }] });
    await got;
  }
  const elapsed = (performance.now() - t0) / 1000;
  c.rpc.notify('textDocument/didClose', { textDocument: { uri } });
  const ms = (ns: number) => round(ns / 1e6);
  return {
    phase,
    seconds: SECONDS,
    requests: latencies.length,
    latencyMs: { p50: round(quantile(latencies, 0.5)), p99: round(quantile(latencies, 0.99)), max: round(Math.max(...latencies)) },
    eventLoopDelayMs: { p50: ms(delay.percentile(50)), p99: ms(delay.percentile(99)), max: ms(delay.max) },
    notificationsPerSecond: round(NOTIFICATIONS / elapsed),
    stepsCommitted,
  };
}

async function main(): Promise<void> {
  const ws = mkdtempSync(join(tmpdir(), 'troupe-bench-server-'));
  const server = await TroupeServer.start({ workspace: ws, log: () => {} });
  try {
    const token = readFileSync(server.tokenFile, 'utf8').trim();
    const c = await connect(server.url, token);
    let steps = 0;
    c.rpc.onNotification('run/didProgress', () => steps++);

    const idle = await measure('idle', c, () => steps);

    // The flagship's environment and model, at a budget that keeps stepping through the phase.
    const flagship = JSON.parse(readFileSync(join(root, 'configs/plan-path/L2-lora.json'), 'utf8')) as Record<string, unknown> & { training: Record<string, unknown>; warmStart: Record<string, unknown> };
    const config = { ...flagship, warmStart: { ...flagship.warmStart, demonstrations: 64, steps: 10 }, training: { ...flagship.training, steps: 1000, validateEvery: 5, validationEpisodes: 16, checkpointEvery: 1000 } };
    delete (config as { $schema?: unknown }).$schema;
    const { run } = await c.rpc.request('run/start', { config });
    process.stderr.write(`run ${run.id} started; waiting for its first RL step\n`);
    await c.waitFor('run/didProgress', (p) => p.runId === run.id && p.step >= 1, 600_000);
    const training = await measure('training', c, () => steps);
    await c.rpc.request('run/stop', { runId: run.id });
    await c.waitFor('run/didChangeState', (p) => p.runId === run.id && p.state === 'done', 600_000);
    await c.close();

    const result = {
      bench: 'server',
      date: new Date().toISOString(),
      machine: { cpus: (await import('node:os')).cpus().length, node: process.version },
      target: { eventLoopDelayP99Ms: 50 },
      // Node's histogram records the time between its samples, so an idle loop reads the 10 ms
      // resolution itself: the delay beyond schedule is the reading minus 10 ms.
      note: 'eventLoopDelayMs values include the 10 ms sampling interval (an idle loop reads ~10 ms)',
      phases: [idle, training],
      ratios: {
        latencyP99TrainingOverIdle: round(training.latencyMs.p99 / idle.latencyMs.p99),
        notificationsTrainingOverIdle: round(training.notificationsPerSecond / idle.notificationsPerSecond),
      },
      meetsTarget: training.eventLoopDelayMs.p99 < 50,
    };
    const table = [
      'phase      req p50  req p99  req max  loop p50  loop p99  loop max  notif/s  steps',
      ...[idle, training].map((p) =>
        [p.phase.padEnd(9), ...[p.latencyMs.p50, p.latencyMs.p99, p.latencyMs.max, p.eventLoopDelayMs.p50, p.eventLoopDelayMs.p99, p.eventLoopDelayMs.max].map((x) => x.toFixed(1).padStart(8)), p.notificationsPerSecond.toFixed(0).padStart(8), String(p.stepsCommitted).padStart(6)].join(' '),
      ),
    ];
    process.stdout.write(`${table.join('\n')}\n(ms; target: event-loop p99 < 50 ms while training → ${result.meetsTarget ? 'met' : 'NOT met'})\n`);
    await mkdir(join(root, 'bench/results'), { recursive: true });
    await writeFile(join(root, 'bench/results/server.json'), `${JSON.stringify(result, null, 2)}\n`);
    process.stdout.write('wrote bench/results/server.json\n');
  } finally {
    await server.close();
    rmSync(ws, { recursive: true, force: true });
  }
}

await main();
