/**
 * One program on many inputs in one sandbox process: the harness's arguments and input, the
 * batch's own ceilings, and its output read back into one outcome per case (`batch-harness.ts`
 * has the protocol). Pure: no process is started here.
 *
 * Limits: each case keeps every limit a run of its own has (wall clock and CPU seconds, address
 * space, processes, file size, open files, the output cap on stdout + stderr), enforced by the
 * harness (wall, output) and by prlimit (the rest: resource limits are per process and each case
 * is a fork). The batch as a whole runs under a wall clock of `batchWallMs` (every case at its
 * limit, plus each case's pipe grace and the start) and an output ceiling of `batchOutputBytes`
 * (every case at its cap, base64-encoded), enforced from outside by `program-process.ts`; a batch
 * stopped there gives its unfinished cases a timeout or an error, never a pass.
 */
import type { SandboxLimits } from '../protocol/experiment-config.ts';
import { BATCH_HARNESS_SOURCE } from './batch-harness.ts';
import { signalName, statusOf, type ProcessOutcome, type ProcessSpec, type RunningProcess } from './program-process.ts';
import { BWRAP, SANDBOX_MAIN, SANDBOX_WORK, bubblewrapBatchArgs, programEnv, programIds } from './sandbox-command.ts';

/** Most cases in one batch: larger groups are split, so the pool still runs batches side by side. */
export const MAX_BATCH_CASES = 16;

/** What the harness allows a case's pipes after it exits (its GRACE), and what a batch allows the interpreter to start. */
const CASE_GRACE_MS = 1000;
const START_MS = 5000;

/** The harness's arguments after its own path. `contained`: it runs in bubblewrap's pid namespace (and may kill(-1) in it). */
export function batchHarnessArgs(limits: SandboxLimits, mainPath: string, contained: boolean): string[] {
  return [mainPath, String(limits.wallMs), String(limits.outputBytes), contained ? '1' : '0'];
}

/** The harness's standard input: the cases' stdins, each as base64 of its UTF-8 bytes (what a run of its own is fed). */
export function batchInput(stdins: readonly string[]): Buffer {
  return Buffer.from(JSON.stringify(stdins.map((s) => Buffer.from(s, 'utf8').toString('base64'))), 'utf8');
}

/** The whole batch's wall clock: every case at its limit, plus grace and start. */
export function batchWallMs(limits: SandboxLimits, cases: number): number {
  return cases * (limits.wallMs + CASE_GRACE_MS) + START_MS;
}

/** The whole batch's output ceiling: every case's cap in base64 with its JSON frame, plus room for the harness's own error. */
export function batchOutputBytes(limits: SandboxLimits, cases: number): number {
  return cases * (Math.ceil(limits.outputBytes / 3) * 4 + 1024) + 64 * 1024;
}

interface CaseLine {
  exit: number | null;
  signal: number | null;
  ended: 'timeout' | 'output-limit' | null;
  truncated: boolean;
  ms: number;
  out: string;
  err: string;
}

const nullableInt = (v: unknown): v is number | null => v === null || Number.isSafeInteger(v);
const base64 = (v: unknown): v is string => typeof v === 'string' && /^[A-Za-z0-9+/]*={0,2}$/.test(v);

function caseLine(text: string): CaseLine | null {
  let v: unknown;
  try {
    v = JSON.parse(text);
  } catch {
    return null;
  }
  if (typeof v !== 'object' || v === null) return null;
  const o = v as Record<string, unknown>;
  if (!nullableInt(o['exit']) || !nullableInt(o['signal'])) return null;
  if (!(o['ended'] === null || o['ended'] === 'timeout' || o['ended'] === 'output-limit')) return null;
  if (typeof o['truncated'] !== 'boolean' || typeof o['ms'] !== 'number' || !Number.isFinite(o['ms']) || o['ms'] < 0) return null;
  if (!base64(o['out']) || !base64(o['err'])) return null;
  return o as unknown as CaseLine;
}

/**
 * The outcome of each of `cases` cases from the harness process's `outcome`. Cases the harness
 * reported are read as a run of their own would be (`statusOf`); cases it did not reach, because
 * the batch was stopped from outside or the harness failed, are a timeout when the batch ran out
 * of time and an error otherwise, with the reason in stderr.
 */
export function batchOutcomes(outcome: ProcessOutcome, cases: number, stoppedBy: ReturnType<RunningProcess['stoppedBy']>): ProcessOutcome[] {
  const lines = outcome.stdout.split('\n');
  // Only whole lines count: the last piece has no newline yet when the batch was cut.
  lines.pop();
  const out: ProcessOutcome[] = [];
  for (let i = 0; i < cases; i++) {
    const line = i < lines.length ? caseLine(lines[i]!) : null;
    if (line === null) {
      const why =
        stoppedBy === 'timeout' ? 'ran out of time' : stoppedBy === 'output-limit' ? 'wrote more than its output ceiling' : stoppedBy === 'killed' ? 'was stopped' : `ended (${outcome.exitCode === null ? (outcome.signal ?? 'killed') : `exit ${outcome.exitCode}`})`;
      const said = outcome.stderr.trim().split('\n').at(-1) ?? '';
      out.push({
        // Only the batch's own wall clock makes an unreached case a timeout; anything else that
        // ended the harness early (a case killing it, say) is an error.
        status: stoppedBy === 'timeout' ? 'timeout' : 'error',
        exitCode: null,
        signal: null,
        stdout: '',
        stderr: `[troupe] the batch ${why} before this case finished${said ? `: ${said.slice(0, 500)}` : ''}\n`,
        truncated: false,
        durationMs: 0,
      });
      continue;
    }
    const signal = line.signal === null ? null : signalName(line.signal);
    out.push({
      status: statusOf(line.ended, line.exit, signal),
      exitCode: line.exit,
      signal,
      stdout: Buffer.from(line.out, 'base64').toString('utf8'),
      stderr: Buffer.from(line.err, 'base64').toString('utf8'),
      truncated: line.truncated,
      durationMs: line.ms,
    });
  }
  return out;
}

/** Everything `startProcess` needs to run `code` on `stdins` in bubblewrap, through the harness. */
export function bubblewrapBatchSpec(limits: SandboxLimits, code: Buffer, stdins: readonly string[]): ProcessSpec {
  const ids = programIds();
  return {
    argv: [BWRAP, ...bubblewrapBatchArgs(limits, batchHarnessArgs(limits, SANDBOX_MAIN, true))],
    env: programEnv(SANDBOX_WORK),
    cwd: '/',
    ...(ids ? { ids } : {}),
    stdin: batchInput(stdins),
    files: [code, Buffer.from(BATCH_HARNESS_SOURCE, 'utf8')],
    wallMs: batchWallMs(limits, stdins.length),
    outputBytes: batchOutputBytes(limits, stdins.length),
    exitCodeCarriesSignal: true,
  };
}
