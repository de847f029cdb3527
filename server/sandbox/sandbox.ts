/**
 * The one place model-written code is executed (ARCHITECTURE.md, "Model-written code runs only in the sandbox"). `Sandbox.open` checks once that
 * bubblewrap works here and refuses to open otherwise (`SandboxUnavailableError`, never a silent
 * fall back to the host); `runAll` is a `ProgramRunner` that runs a step's programs through a
 * pool of child processes, so the event loop stays free while they run. Nothing a program does
 * (bad code, bad input, a crash, a hang) makes `run` throw: every request gets an Execution.
 */
import { chown, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { availableParallelism, tmpdir } from 'node:os';
import { join } from 'node:path';
import type { SandboxConfig } from '../protocol/experiment-config.ts';
import type { Execution, ProgramRequest } from '../protocol/trajectory.ts';
import { BATCH_HARNESS_SOURCE } from './batch-harness.ts';
import { MAX_BATCH_CASES, batchHarnessArgs, batchInput, batchOutcomes, batchOutputBytes, batchWallMs, bubblewrapBatchSpec } from './batch.ts';
import { probeSandbox } from './probe.ts';
import { startProcess, type ProcessOutcome, type RunningProcess } from './program-process.ts';
import { bubblewrapSpec, programEnv, programIds, unsandboxedArgs } from './sandbox-command.ts';

/** Largest source or stdin accepted, in UTF-8 bytes: far beyond any program a model writes, small enough to never hurt the server. */
export const MAX_INPUT_BYTES = 1024 * 1024;

/** bubblewrap cannot start here; `reason` says why and `remedy` what to do. */
export class SandboxUnavailableError extends Error {
  constructor(
    readonly reason: string,
    readonly remedy: string,
  ) {
    super(`model-written code cannot run sandboxed on this machine: ${reason}. To fix: ${remedy}. (troupe doctor checks this; config sandbox.mode "unsandboxed" runs code without isolation, only for disposable machines.)`);
    this.name = 'SandboxUnavailableError';
  }
}

/** A run asked of a closed sandbox: a caller's bug, not a program's. */
export class SandboxClosedError extends Error {
  constructor() {
    super('the sandbox is closed: no more programs can run in it');
    this.name = 'SandboxClosedError';
  }
}

const refused = (req: ProgramRequest, why: string): Execution => ({
  language: 'python',
  code: typeof req.code === 'string' ? req.code : '',
  stdin: typeof req.stdin === 'string' ? req.stdin : '',
  status: 'refused',
  exitCode: null,
  signal: null,
  stdout: '',
  stderr: why,
  truncated: false,
  durationMs: 0,
});

/** Why `req` cannot run, or null. Requests come from model output through environments, so nothing is assumed. */
function refusal(req: ProgramRequest): string | null {
  if (req.language !== 'python') return `language '${String(req.language)}' is not supported (python only)`;
  if (typeof req.code !== 'string' || typeof req.stdin !== 'string') return 'code and stdin must be strings';
  // A NUL byte cannot be in Python source; refusing it here keeps the interpreter's error out of the reward.
  if (req.code.includes('\0')) return 'the code contains a NUL byte';
  const codeBytes = Buffer.byteLength(req.code, 'utf8');
  if (codeBytes > MAX_INPUT_BYTES) return `the code is ${codeBytes} bytes, over the ${MAX_INPUT_BYTES}-byte limit`;
  const stdinBytes = Buffer.byteLength(req.stdin, 'utf8');
  if (stdinBytes > MAX_INPUT_BYTES) return `stdin is ${stdinBytes} bytes, over the ${MAX_INPUT_BYTES}-byte limit`;
  return null;
}

export class Sandbox {
  private readonly concurrency: number;
  private active = 0;
  private readonly waiting: (() => void)[] = [];
  private readonly running = new Set<RunningProcess>();
  private closed = false;

  private constructor(
    readonly config: SandboxConfig,
    private readonly log: (line: string) => void,
  ) {
    this.concurrency = config.concurrency ?? availableParallelism();
  }

  /**
   * A sandbox for `config`. Mode bubblewrap probes first and throws `SandboxUnavailableError`
   * if a trivial program cannot run through it; mode unsandboxed says loudly what it means.
   */
  static async open(config: SandboxConfig, opts: { log?: (line: string) => void } = {}): Promise<Sandbox> {
    const log = opts.log ?? ((line: string) => process.stderr.write(`${line}\n`));
    if (config.mode === 'bubblewrap') {
      const probe = await probeSandbox(config.limits);
      if (!probe.available) throw new SandboxUnavailableError(probe.detail, probe.remedy ?? 'see troupe doctor');
    } else {
      log(
        'WARNING: sandbox.mode is "unsandboxed": model-written code runs directly on this machine with resource limits only. ' +
          'It can read and write your files, see your processes and use the network. Use this only on a disposable machine.',
      );
    }
    return new Sandbox(config, log);
  }

  /** Programs running now (for tests and diagnostics). */
  get runningCount(): number {
    return this.running.size;
  }

  /** Runs one program; resolves with its Execution whatever the program does. Rejects only when closed. */
  async run(req: ProgramRequest): Promise<Execution> {
    if (this.closed) throw new SandboxClosedError();
    const why = refusal(req);
    if (why !== null) return refused(req, why);
    await this.slot();
    try {
      if (this.closed) return refused(req, 'the sandbox was closed before this program started');
      const outcome = this.config.mode === 'bubblewrap' ? await this.runSandboxed(req) : await this.runUnsandboxed(req);
      return { language: 'python', code: req.code, stdin: req.stdin, ...outcome };
    } finally {
      this.release();
    }
  }

  /**
   * Runs one program on each request's stdin in ONE sandbox process (`batch.ts`): every request
   * must carry the same code. Each case keeps a run's own limits and gets the Execution a run of
   * its own would (its status, output and time); only the processes started are fewer. Requests
   * the sandbox refuses come back refused; executions in request order. Rejects only when closed.
   */
  async runBatch(reqs: readonly ProgramRequest[]): Promise<Execution[]> {
    if (this.closed) throw new SandboxClosedError();
    const code = reqs[0]?.code;
    if (reqs.some((r) => r.code !== code)) throw new Error('Sandbox.runBatch: every request of a batch must have the same code');
    const results: (Execution | null)[] = reqs.map((r) => {
      const why = refusal(r);
      return why === null ? null : refused(r, why);
    });
    const cases = reqs.filter((_, i) => results[i] === null);
    if (cases.length === 0) return results as Execution[];
    await this.slot();
    try {
      const outcomes = this.closed
        ? cases.map(() => ({ ...refused(cases[0]!, 'the sandbox was closed before this program started') }))
        : this.config.mode === 'bubblewrap'
          ? await this.trackBatch(startProcess(bubblewrapBatchSpec(this.config.limits, Buffer.from(cases[0]!.code, 'utf8'), cases.map((c) => c.stdin))), cases.length)
          : await this.runBatchUnsandboxed(cases[0]!.code, cases.map((c) => c.stdin));
      let at = 0;
      return results.map((r, i) => r ?? { language: 'python', code: reqs[i]!.code, stdin: reqs[i]!.stdin, ...outcomes[at++]! });
    } finally {
      this.release();
    }
  }

  /**
   * Runs every request through the pool; executions in request order. A `ProgramRunner`. Requests
   * that share their code (a coder's program on its hidden tests) run as batches of at most
   * `MAX_BATCH_CASES` in one sandbox process each (`runBatch`); the rest one process each.
   */
  runAll = (reqs: readonly ProgramRequest[]): Promise<Execution[]> => {
    if (this.closed) return Promise.reject(new SandboxClosedError());
    // Calls made in the same turn of the event loop (concurrent episodes' acts) are run as one,
    // so their programs that share code share batches too; each call gets its own slice back.
    return new Promise((resolve, reject) => {
      this.pending.push({ reqs, resolve, reject });
      if (this.pending.length === 1) setImmediate(() => void this.flush());
    });
  };

  private pending: { reqs: readonly ProgramRequest[]; resolve: (es: Execution[]) => void; reject: (e: unknown) => void }[] = [];

  private async flush(): Promise<void> {
    const calls = this.pending.splice(0);
    try {
      const all = await this.runGrouped(calls.flatMap((c) => c.reqs));
      let at = 0;
      for (const c of calls) {
        c.resolve(all.slice(at, at + c.reqs.length));
        at += c.reqs.length;
      }
    } catch (e) {
      for (const c of calls) c.reject(e);
    }
  }

  private runGrouped = async (reqs: readonly ProgramRequest[]): Promise<Execution[]> => {
    if (this.closed) throw new SandboxClosedError();
    const byCode = new Map<unknown, number[]>();
    reqs.forEach((r, i) => {
      const key = typeof r.code === 'string' ? r.code : i;
      byCode.set(key, [...(byCode.get(key) ?? []), i]);
    });
    const results: Execution[] = new Array(reqs.length);
    const jobs: Promise<void>[] = [];
    for (const group of byCode.values()) {
      for (let at = 0; at < group.length; at += MAX_BATCH_CASES) {
        const chunk = group.slice(at, at + MAX_BATCH_CASES);
        if (chunk.length === 1) jobs.push(this.run(reqs[chunk[0]!]!).then((e) => void (results[chunk[0]!] = e)));
        else jobs.push(this.runBatch(chunk.map((i) => reqs[i]!)).then((es) => es.forEach((e, k) => (results[chunk[k]!] = e))));
      }
    }
    await Promise.all(jobs);
    return results;
  };

  /** Kills every running program, refuses queued and later ones. */
  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    const done = [...this.running].map((p) => {
      p.kill('killed: the sandbox was closed');
      return p.done;
    });
    // Queued runs wake, see `closed` and resolve as refused.
    for (const wake of this.waiting.splice(0)) wake();
    await Promise.all(done);
  }

  private async slot(): Promise<void> {
    if (this.active < this.concurrency) {
      this.active++;
      return;
    }
    // The releasing run hands its slot over directly, so `active` never drops and rises again.
    await new Promise<void>((resolve) => this.waiting.push(resolve));
  }

  private release(): void {
    const next = this.waiting.shift();
    if (next) next();
    else this.active--;
  }

  private async track(p: RunningProcess): Promise<ProcessOutcome> {
    this.running.add(p);
    try {
      return await p.done;
    } finally {
      this.running.delete(p);
    }
  }

  private async trackBatch(p: RunningProcess, cases: number): Promise<ProcessOutcome[]> {
    return batchOutcomes(await this.track(p), cases, p.stoppedBy());
  }

  private runSandboxed(req: ProgramRequest): Promise<ProcessOutcome> {
    return this.track(startProcess(bubblewrapSpec(this.config.limits, Buffer.from(req.code, 'utf8'), Buffer.from(req.stdin, 'utf8'))));
  }

  /**
   * The same program on the host: a fresh temporary folder as its working and home folder
   * (deleted after), the same prlimit limits, the same group kill. Not a security boundary:
   * a program can leave its process group (setsid) and outlive the kill.
   */
  private async runUnsandboxed(req: ProgramRequest): Promise<ProcessOutcome> {
    const limits = this.config.limits;
    return this.inTempFolder(req.code, async (dir, main, ids) =>
      this.track(
        startProcess({
          argv: unsandboxedArgs(limits, main),
          env: programEnv(dir),
          cwd: dir,
          ...(ids ? { ids } : {}),
          stdin: Buffer.from(req.stdin, 'utf8'),
          wallMs: limits.wallMs,
          outputBytes: limits.outputBytes,
          exitCodeCarriesSignal: false,
        }),
      ),
    );
  }

  /** A batch on the host: the harness beside the program in the temporary folder, group kills only (no pid namespace to clear). */
  private async runBatchUnsandboxed(code: string, stdins: readonly string[]): Promise<ProcessOutcome[]> {
    const limits = this.config.limits;
    return this.inTempFolder(code, async (dir, main, ids) => {
      const harness = join(dir, 'troupe-harness.py');
      await writeFile(harness, BATCH_HARNESS_SOURCE);
      return this.trackBatch(
        startProcess({
          argv: [...unsandboxedArgs(limits, harness), ...batchHarnessArgs(limits, main, false)],
          env: programEnv(dir),
          cwd: dir,
          ...(ids ? { ids } : {}),
          stdin: batchInput(stdins),
          wallMs: batchWallMs(limits, stdins.length),
          outputBytes: batchOutputBytes(limits, stdins.length),
          exitCodeCarriesSignal: false,
        }),
        stdins.length,
      );
    });
  }

  /** Runs `body` with a fresh temporary folder holding `code` as main.py (its working and home folder), deleted after. */
  private async inTempFolder<T>(code: string, body: (dir: string, main: string, ids: ReturnType<typeof programIds>) => Promise<T>): Promise<T> {
    const dir = await mkdtemp(join(tmpdir(), 'troupe-unsandboxed-'));
    try {
      const main = join(dir, 'main.py');
      await writeFile(main, code);
      const ids = programIds();
      // Root hands the program to nobody (see programIds), who needs to own its folder.
      if (ids) await chown(dir, ids.uid, ids.gid);
      return await body(dir, main, ids);
    } finally {
      await rm(dir, { recursive: true, force: true }).catch((e: unknown) => this.log(`sandbox: could not delete ${dir}: ${String(e)}`));
    }
  }
}
