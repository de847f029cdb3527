/**
 * The engine: the main thread's handle on one worker thread that runs ONNX Runtime.
 *
 * Everything heavy happens in the worker: sessions, resident tensors (weights, optimizer state,
 * gradients), whole generations. The main thread sends batches and receives small results, with
 * buffers transferred rather than copied, so the event loop that serves the editor stays free
 * while a train step or a rollout runs.
 */
import { availableParallelism } from 'node:os';
import { join } from 'node:path';
import { Worker } from 'node:worker_threads';
import type { GenerateRequest, GenerateResult, GenerateStep } from './generate.ts';
import type {
  ExecutionProviderChoice,
  ExecutionProviderName,
  Feed,
  Fetch,
  Reply,
  EngineStats,
  Request,
  RowRange,
  SessionInfo,
  SessionOptions,
  WorkerMessage,
} from './messages.ts';
import type { ProviderReport } from './provider-choice.ts';
import { elementCount, type HostTensor } from './tensor.ts';

export type { EngineStats, ExecutionProviderChoice, ExecutionProviderName, Feed, Fetch, RowRange, SessionInfo, SessionOptions } from './messages.ts';
export type { ProviderReport, ProviderStatus, WebGpuStatus } from './provider-choice.ts';

export interface EngineOptions {
  /** Which execution provider to use; anything unavailable falls back to CPU with a log line. */
  readonly executionProvider?: ExecutionProviderChoice;
  /** Intra-op threads for ONNX Runtime (default: all cores). */
  readonly threads?: number;
  /** Receives the engine's log lines (provider choice, fallbacks). Default: stderr. */
  readonly log?: (line: string) => void;
  /**
   * Profile every session this engine creates: ONNX Runtime writes `<dir>/<session>_<date>.json`
   * (Chrome trace; the session's name with characters other than letters, digits, `.`, `-` kept
   * as `_`) when the session is released, so release sessions (`Policy.dispose`) before `close`.
   * A session created with its own `profileFilePrefix` keeps it.
   */
  readonly profileDir?: string;
}

/**
 * A session name as a file name: runs of other characters than letters, digits, `.` and `-` as
 * one `_`; past 120 characters its first 40 and last 79 (a policy's shared sessions carry a JSON
 * scope in the middle, their graph's key at the end).
 */
function profileFileName(session: string): string {
  const s = session.replace(/[^A-Za-z0-9.-]+/g, '_');
  return s.length <= 120 ? s : `${s.slice(0, 40)}_${s.slice(-79)}`;
}

function workerEntry(): { url: URL; workerData?: unknown } {
  const self = import.meta.url;
  // From TypeScript sources the worker needs tsx's loader registered in its own thread.
  if (self.endsWith('.ts')) {
    return { url: new URL('./tsx-worker-boot.mjs', self), workerData: { entry: new URL('./engine-worker.ts', self).href } };
  }
  return { url: new URL('./engine-worker.js', self) };
}

/**
 * Refuses tensors whose data is gone: a buffer transferred to the worker by an earlier call is
 * detached (length 0), and sending it again used to hang the call instead of failing it.
 */
function checkSendable(what: string, tensors: Iterable<[string, HostTensor]>): void {
  for (const [name, t] of tensors) {
    const want = elementCount(t.dims);
    if (t.data.length !== want) {
      const why = t.data.length === 0 && t.data.buffer.byteLength === 0 ? ': its buffer was transferred to the engine by an earlier call (make a new array for each call)' : '';
      throw new Error(`${what}: tensor '${name}' has ${t.data.length} elements for dims [${t.dims.join(', ')}] (${want})${why}`);
    }
  }
}

function buffersOf(tensors: Iterable<HostTensor>): ArrayBuffer[] {
  const out: ArrayBuffer[] = [];
  for (const t of tensors) {
    const b = t.data.buffer;
    // Only whole, non-shared buffers can be transferred; views are sent by copy.
    if (b instanceof ArrayBuffer && t.data.byteOffset === 0 && t.data.byteLength === b.byteLength && !out.includes(b)) out.push(b);
  }
  return out;
}

export class Engine {
  private nextId = 1;
  private readonly pending = new Map<number, { resolve: (r: Reply) => void; reject: (e: Error) => void; what: string; onStep?: (step: GenerateStep) => void }>();
  private closed = false;
  /** Worker-side things several users hold (see `acquireShared`), by key. */
  private readonly shared = new Map<string, { users: number; fingerprint: string; ready: Promise<void>; destroy: () => Promise<void> }>();

  private constructor(
    private readonly worker: Worker,
    private readonly log: (line: string) => void,
    private readonly profileDir: string | undefined,
    /** The execution provider actually in use. */
    public provider: ExecutionProviderName = 'cpu',
    /** Why that provider (the line logged at start). */
    public providerReason = '',
    /** What probing the candidate providers found (none are probed for 'cpu'). */
    public providerReport: ProviderReport | null = null,
  ) {
    worker.on('message', (m: WorkerMessage) => {
      if ('log' in m) {
        this.log(`[engine] ${m.log}`);
        return;
      }
      const p = this.pending.get(m.id);
      if (!p) return;
      if ('step' in m) {
        p.onStep?.(m.step);
        return;
      }
      this.pending.delete(m.id);
      if ('reply' in m) p.resolve(m.reply);
      else p.reject(new Error(`${p.what}: ${m.error}`));
    });
    const failAll = (err: Error) => {
      for (const p of this.pending.values()) p.reject(new Error(`${p.what}: engine worker failed: ${err.message}`));
      this.pending.clear();
    };
    worker.on('error', failAll);
    worker.on('exit', (code) => {
      if (!this.closed) failAll(new Error(`worker exited with code ${code}`));
    });
  }

  /** Starts a worker and selects the execution provider (logging what was used and why). */
  static async start(options: EngineOptions = {}): Promise<Engine> {
    const entry = workerEntry();
    const worker = new Worker(entry.url, entry.workerData === undefined ? {} : { workerData: entry.workerData });
    const log = options.log ?? ((line: string) => process.stderr.write(`${line}\n`));
    const engine = new Engine(worker, log, options.profileDir);
    const choice = options.executionProvider ?? 'cpu';
    const reply = await engine.call({ kind: 'init', provider: choice, threads: options.threads ?? availableParallelism() }, 'init');
    if (reply.kind !== 'init') throw new Error('engine init: unexpected reply');
    engine.provider = reply.provider;
    engine.providerReason = reply.reason;
    engine.providerReport = reply.report;
    log(`[engine] execution provider: ${reply.provider} (${reply.reason})`);
    return engine;
  }

  private call(req: Request, what: string, transfer: ArrayBuffer[] = [], onStep?: (step: GenerateStep) => void): Promise<Reply> {
    if (this.closed) return Promise.reject(new Error(`${what}: engine is closed`));
    const id = this.nextId++;
    return new Promise<Reply>((resolve, reject) => {
      this.pending.set(id, { resolve, reject, what, ...(onStep ? { onStep } : {}) });
      this.worker.postMessage({ id, req }, transfer);
    });
  }

  /**
   * Creates (or replaces) a session in the worker. `model` is copied there, or with `transfer`
   * handed over (the caller must not use it after; no copy of a model of hundreds of MB).
   */
  async createSession(session: string, model: Uint8Array, options: SessionOptions = {}, { transfer = false }: { readonly transfer?: boolean } = {}): Promise<SessionInfo> {
    // Only a whole, non-shared buffer can be handed over; a view is copied.
    const b = model.buffer;
    const moved = transfer && b instanceof ArrayBuffer && model.byteOffset === 0 && model.byteLength === b.byteLength ? [b] : [];
    const profiled = this.profileDir !== undefined && options.profileFilePrefix === undefined ? { ...options, profileFilePrefix: join(this.profileDir, profileFileName(session)) } : options;
    const r = await this.call({ kind: 'createSession', session, model, options: profiled }, `create session '${session}'`, moved);
    if (r.kind !== 'session') throw new Error('createSession: unexpected reply');
    return r.info;
  }

  async releaseSession(session: string): Promise<void> {
    await this.call({ kind: 'releaseSession', session }, `release session '${session}'`);
  }

  /** Makes a tensor resident in the worker. Its buffer is transferred: do not use `tensor` after. */
  async upload(name: string, tensor: HostTensor): Promise<void> {
    checkSendable(`upload '${name}'`, [[name, tensor]]);
    await this.call({ kind: 'upload', name, tensor }, `upload '${name}'`, buffersOf([tensor]));
  }

  /**
   * A copy of a resident tensor, or of `rows` of it along its first axis: a large weight can be
   * read a slice at a time, so the main thread never holds all of it.
   */
  async download(name: string, rows?: RowRange): Promise<HostTensor> {
    const what = rows ? `download rows ${rows.start}..${rows.start + rows.count - 1} of '${name}'` : `download '${name}'`;
    const r = await this.call({ kind: 'download', name, ...(rows ? { rows } : {}) }, what);
    if (r.kind !== 'tensor') throw new Error('download: unexpected reply');
    return r.tensor;
  }

  async drop(names: readonly string[]): Promise<void> {
    await this.call({ kind: 'drop', names }, 'drop');
  }

  /** Exchanges resident tensors pairwise (double buffering: the optimizer writes B from A, then swap). */
  async swap(pairs: ReadonlyArray<readonly [string, string]>): Promise<void> {
    await this.call({ kind: 'swap', pairs }, 'swap');
  }

  /** into += scale · from, elementwise, for each pair (gradient accumulation across micro-batches). */
  async accumulate(pairs: ReadonlyArray<readonly [into: string, from: string]>, scale = 1): Promise<void> {
    await this.call({ kind: 'accumulate', pairs, scale }, 'accumulate');
  }

  /** Runs a session. Feeds are sent tensors or resident names; fetches are returned or written into residents. */
  async run(session: string, feeds: Record<string, Feed>, fetches: Record<string, Fetch>): Promise<Record<string, HostTensor>> {
    const sentEntries = Object.entries(feeds).filter((e): e is [string, HostTensor] => !('resident' in e[1]));
    checkSendable(`run '${session}'`, sentEntries);
    const sent = sentEntries.map(([, t]) => t);
    const r = await this.call({ kind: 'run', session, feeds, fetches }, `run '${session}'`, buffersOf(sent));
    if (r.kind !== 'outputs') throw new Error('run: unexpected reply');
    return r.outputs;
  }

  /**
   * Generates a batch in the worker. `onStep` receives each decoding step's tokens as the worker
   * samples them (messages arrive in order, all before the result).
   */
  async generate(request: GenerateRequest, onStep?: (step: GenerateStep) => void): Promise<GenerateResult> {
    const r = await this.call({ kind: 'generate', request, ...(onStep ? { steps: true } : {}) }, `generate with '${request.session}'`, [], onStep);
    if (r.kind !== 'generated') throw new Error('generate: unexpected reply');
    return r.result;
  }

  /** Resident tensor count and bytes, and session count, in the worker. */
  async stats(): Promise<EngineStats> {
    const r = await this.call({ kind: 'stats' }, 'stats');
    if (r.kind !== 'stats') throw new Error('stats: unexpected reply');
    return r.stats;
  }

  /**
   * Holds a worker-side resource that several users share — the frozen base weights under every
   * agent's LoRA adapter at L2, a session of one graph — created by the first user and destroyed
   * when the last one releases it, so it lives in the worker once instead of once per user.
   * `fingerprint` says what the resource holds; a second user with a different fingerprint under
   * the same key is a wiring mistake (two different bases under one name) and is refused.
   */
  async acquireShared(key: string, fingerprint: string, create: () => Promise<void>, destroy: () => Promise<void>): Promise<void> {
    let entry = this.shared.get(key);
    if (entry && entry.fingerprint !== fingerprint) {
      throw new Error(`shared '${key}' already holds different contents (${entry.fingerprint.slice(0, 16)}… vs ${fingerprint.slice(0, 16)}…)`);
    }
    if (!entry) {
      entry = { users: 0, fingerprint, ready: create(), destroy };
      this.shared.set(key, entry);
      entry.ready.catch(() => this.shared.delete(key));
    }
    entry.users++;
    try {
      await entry.ready;
    } catch (e) {
      entry.users--;
      throw e;
    }
  }

  /** Releases one hold on a shared resource; the last release destroys it. */
  async releaseShared(key: string): Promise<void> {
    const entry = this.shared.get(key);
    if (!entry) throw new Error(`releaseShared: '${key}' is not held`);
    if (--entry.users > 0) return;
    this.shared.delete(key);
    await entry.destroy();
  }

  /** How many users hold a shared resource (0 when none). */
  sharedUsers(key: string): number {
    return this.shared.get(key)?.users ?? 0;
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    for (const p of this.pending.values()) p.reject(new Error(`${p.what}: engine closed`));
    this.pending.clear();
    await this.worker.terminate();
  }
}
