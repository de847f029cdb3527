/**
 * One program as a child process: spawned asynchronously in its own process group, fed its
 * stdin (and, for bubblewrap, its source on an extra pipe), its output counted as it arrives,
 * killed as a whole group at the wall-clock limit, at the output limit, or when the sandbox
 * closes. Knows nothing about bubblewrap beyond how bwrap reports a signal.
 */
import { spawn } from 'node:child_process';
import { constants } from 'node:os';
import { Writable } from 'node:stream';
import type { Execution, ExecutionStatus } from '../protocol/trajectory.ts';

export interface ProcessSpec {
  readonly argv: readonly [string, ...string[]];
  /** The whole environment, to which `startProcess` adds only `SANDBOX_OWNER_VAR`. */
  readonly env: Record<string, string>;
  readonly cwd: string;
  /** Run as this uid/gid (set by the spawn, before exec; supplementary groups are dropped). */
  readonly ids?: { readonly uid: number; readonly gid: number };
  readonly stdin: Buffer;
  /**
   * Written to fds 3, 4, ... and closed: bwrap's `--ro-bind-data 3` reads the program's source
   * from the first (and, for a batch, `--ro-bind-data 4` the harness from the second).
   */
  readonly files?: readonly Buffer[];
  readonly wallMs: number;
  readonly outputBytes: number;
  /**
   * bwrap runs the program under its own init and exits with the program's status, 128 + n for
   * a program killed by signal n; with this set, such an exit is read back as that signal.
   */
  readonly exitCodeCarriesSignal: boolean;
}

/** What the sandbox needs to know to build an Execution. */
export type ProcessOutcome = Pick<Execution, 'status' | 'exitCode' | 'signal' | 'stdout' | 'stderr' | 'truncated' | 'durationMs'>;

export interface RunningProcess {
  readonly done: Promise<ProcessOutcome>;
  /** Kills the whole group now; the outcome is an error that says `why`. */
  kill(why: string): void;
  /** What stopped it from outside, if anything: the wall clock, the output cap or a `kill`. */
  stoppedBy(): 'timeout' | 'output-limit' | 'killed' | null;
}

/**
 * Set in the environment of every process the sandbox starts, to the pid of the process that runs
 * the sandbox: bwrap's own environment (not the contained program's, which `--clearenv` empties,
 * so nothing of the server reaches it) or, unsandboxed, the program's. A program that outlives
 * its kill, even one reparented away from the server, can be traced to the server that started it
 * (by the variable in its /proc/<pid>/environ), and the sandbox tests count as leaks
 * only their own process's programs, not those of a training run beside them (`test-util.ts`).
 */
export const SANDBOX_OWNER_VAR = 'TROUPE_SANDBOX_OWNER';

/** After the program exits, how long its pipes may stay open (a straggler that escaped the group) before they are cut. */
const PIPE_GRACE_MS = 1000;

/** Kills the process group led by `pid`; a group already gone is fine. */
function killGroup(pid: number | undefined): void {
  if (pid === undefined) return;
  try {
    process.kill(-pid, 'SIGKILL');
  } catch {
    // ESRCH: every member has exited already.
  }
}

/** A pipe to the child may break when it exits without reading; that is the program's business, not an error. */
function feed(stream: Writable | null | undefined, data: Buffer): void {
  if (!stream) return;
  stream.on('error', () => {});
  stream.end(data);
}

/**
 * How a run ended, in the order the sandbox decides it (see `executionStatuses`): what stopped it
 * (the wall clock, the output cap, a kill by the sandbox), else the signal or exit status. One
 * rule for a program run as its own process and for a case of a batch (`batch.ts`).
 */
export function statusOf(ending: 'timeout' | 'output-limit' | 'killed' | null, exitCode: number | null, signal: string | null): ExecutionStatus {
  if (ending === 'output-limit') return 'output-limit';
  if (ending === 'timeout') return 'timeout';
  if (ending === 'killed') return 'error';
  // RLIMIT_CPU: SIGKILL at the hard limit (SIGXCPU if the soft one were lower). The kernel's
  // OOM killer also sends SIGKILL, but RLIMIT_AS stops a program long before that.
  if (signal === 'SIGXCPU' || signal === 'SIGKILL') return 'timeout';
  if (signal !== null) return 'error';
  return exitCode === 0 ? 'ok' : 'error';
}

/** A signal's name (`SIGKILL`) from its number, or null for a number that names none. */
export const signalName = (n: number): string | null => Object.entries(constants.signals).find(([, v]) => v === n)?.[0] ?? null;

export function startProcess(spec: ProcessSpec): RunningProcess {
  const started = performance.now();
  const [file, ...args] = spec.argv;
  // detached: the child leads a new process group, so one kill reaches everything it started
  // (bwrap's own init and, through --die-with-parent and the pid namespace, the whole sandbox).
  const child = spawn(file, args, {
    cwd: spec.cwd,
    env: { ...spec.env, [SANDBOX_OWNER_VAR]: String(process.pid) },
    detached: true,
    stdio: ['pipe', 'pipe', 'pipe', ...(spec.files ?? []).map(() => 'pipe' as const)],
    ...(spec.ids ? { uid: spec.ids.uid, gid: spec.ids.gid } : {}),
  });

  const out: Buffer[] = [];
  const err: Buffer[] = [];
  let kept = 0;
  let truncated = false;
  let ending: 'timeout' | 'output-limit' | { killed: string } | null = null;

  const stop = (why: typeof ending) => {
    if (ending === null) ending = why;
    killGroup(child.pid);
  };
  // Every byte of stdout and stderr counts against one budget, kept in arrival order; the byte
  // that crosses it cuts the output there and kills the run.
  const collect = (into: Buffer[]) => (chunk: Buffer) => {
    if (truncated) return;
    const room = spec.outputBytes - kept;
    if (chunk.length > room) {
      into.push(chunk.subarray(0, room));
      kept = spec.outputBytes;
      truncated = true;
      stop('output-limit');
      return;
    }
    into.push(chunk);
    kept += chunk.length;
  };
  child.stdout?.on('data', collect(out));
  child.stderr?.on('data', collect(err));
  feed(child.stdin, spec.stdin);
  (spec.files ?? []).forEach((data, i) => {
    const pipe = child.stdio[3 + i];
    if (pipe instanceof Writable) feed(pipe, data);
  });

  const timer = setTimeout(() => stop('timeout'), spec.wallMs);

  const done = new Promise<ProcessOutcome>((resolve) => {
    let exit: { code: number | null; signal: NodeJS.Signals | null } | null = null;
    let spawnError: Error | null = null;
    let grace: NodeJS.Timeout | undefined;
    child.on('error', (e) => {
      // Only a failed spawn reaches here with no exit to follow (ENOENT, EACCES on bwrap).
      spawnError = e;
      if (child.pid === undefined) finish();
    });
    child.on('exit', (code, signal) => {
      exit = { code, signal };
      clearTimeout(timer);
      // Whatever the program left behind in its group goes with it.
      killGroup(child.pid);
      grace = setTimeout(() => {
        child.stdout?.destroy();
        child.stderr?.destroy();
      }, PIPE_GRACE_MS);
    });
    child.on('close', () => finish());

    let finished = false;
    function finish(): void {
      if (finished) return;
      finished = true;
      clearTimeout(timer);
      clearTimeout(grace);
      const durationMs = performance.now() - started;
      const stdout = Buffer.concat(out).toString('utf8');
      let stderr = Buffer.concat(err).toString('utf8');
      if (spawnError && exit === null) {
        resolve({ status: 'refused', exitCode: null, signal: null, stdout: '', stderr: `could not start ${file}: ${spawnError.message}`, truncated: false, durationMs });
        return;
      }
      let exitCode = exit?.code ?? null;
      let signal: string | null = exit?.signal ?? null;
      if (exitCode !== null && spec.exitCodeCarriesSignal && exitCode > 128 && exitCode < 128 + 65) {
        // bwrap's 128 + n. A program that itself exits with such a code reads as signalled: Python
        // programs exit 0, 1 or 2 unless they choose otherwise, and the status is a failure either way.
        signal = signalName(exitCode - 128);
        if (signal !== null) exitCode = null;
      }
      if (ending !== null && typeof ending === 'object') stderr += `${stderr === '' || stderr.endsWith('\n') ? '' : '\n'}[troupe] ${ending.killed}\n`;
      const status = statusOf(ending === null || typeof ending === 'string' ? ending : 'killed', exitCode, signal);
      resolve({ status, exitCode, signal, stdout, stderr, truncated, durationMs });
    }
  });

  return { done, kill: (why) => stop({ killed: why }), stoppedBy: () => (ending === null || typeof ending === 'string' ? ending : 'killed') };
}
