/**
 * One program as a child process: spawned asynchronously in its own process group, fed its
 * stdin (and, for bubblewrap, its source on an extra pipe), its output counted as it arrives,
 * killed as a whole group at the wall-clock limit, at the output limit, or when the sandbox
 * closes. Knows nothing about bubblewrap beyond how bwrap reports a signal.
 */
import { spawn } from 'node:child_process';
import { constants } from 'node:os';
import { Writable } from 'node:stream';
import type { Execution } from '../protocol/trajectory.ts';

export interface ProcessSpec {
  readonly argv: readonly [string, ...string[]];
  readonly env: Record<string, string>;
  readonly cwd: string;
  /** Run as this uid/gid (set by the spawn, before exec; supplementary groups are dropped). */
  readonly ids?: { readonly uid: number; readonly gid: number };
  readonly stdin: Buffer;
  /** Written to fd 3 and closed: bwrap's `--ro-bind-data 3` reads the program's source from it. */
  readonly source?: Buffer;
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
}

/** After the program exits, how long its pipes may stay open (a straggler that escaped the group) before they are cut. */
const PIPE_GRACE_MS = 1000;

const signalName = (n: number): string | null => Object.entries(constants.signals).find(([, v]) => v === n)?.[0] ?? null;

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

export function startProcess(spec: ProcessSpec): RunningProcess {
  const started = performance.now();
  const [file, ...args] = spec.argv;
  // detached: the child leads a new process group, so one kill reaches everything it started
  // (bwrap's own init and, through --die-with-parent and the pid namespace, the whole sandbox).
  const child = spawn(file, args, {
    cwd: spec.cwd,
    env: spec.env,
    detached: true,
    stdio: spec.source ? ['pipe', 'pipe', 'pipe', 'pipe'] : ['pipe', 'pipe', 'pipe'],
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
  const sourcePipe = child.stdio[3];
  if (spec.source && sourcePipe instanceof Writable) feed(sourcePipe, spec.source);

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
      let status: Execution['status'];
      if (ending === 'output-limit') status = 'output-limit';
      else if (ending === 'timeout') status = 'timeout';
      else if (ending !== null) {
        status = 'error';
        stderr += `${stderr === '' || stderr.endsWith('\n') ? '' : '\n'}[troupe] ${ending.killed}\n`;
      } else if (signal === 'SIGXCPU' || signal === 'SIGKILL') {
        // RLIMIT_CPU: SIGKILL at the hard limit (SIGXCPU if the soft one were lower). The kernel's
        // OOM killer also sends SIGKILL, but RLIMIT_AS stops a program long before that.
        status = 'timeout';
      } else if (signal !== null) status = 'error';
      else status = exitCode === 0 ? 'ok' : 'error';
      resolve({ status, exitCode, signal, stdout, stderr, truncated, durationMs });
    }
  });

  return { done, kill: (why) => stop({ killed: why }) };
}
