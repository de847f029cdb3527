/**
 * The main thread's side of the query thread (query-worker.ts): the editor's store queries leave
 * the event loop, so `server/status`, run control and progress relay stay fast however many clients
 * browse trajectories and charts while a run trains.
 *
 *   Connection ─▶ QueryThread.run ─▶ fair queue (one FIFO per client, served round-robin)
 *                                        └─▶ worker (read-only store connection) ─▶ JSON text ─▶ answer
 *
 * The queue is fair between clients: one that pipelines thousands of requests delays only itself,
 * and a request whose client cancelled it or went away before its turn is never run. At most
 * `IN_FLIGHT` queries are at the worker at once (two, so the next is there as one finishes).
 *
 * If the worker dies (out of memory on a huge answer, a bug), the queries it held fail with
 * InternalError and the next query starts a fresh one; the server stays up.
 */
import { Worker, type ResourceLimits } from 'node:worker_threads';
import { ErrorCodes, RpcError, type ErrorCode } from '../protocol/json-rpc.ts';
import type { RequestParams, RequestResult } from '../protocol/methods.ts';
import { SerializedResult } from './connection.ts';
import type { QueryMethod } from './query-handlers.ts';
import { fromQueryWorkerSchema, type QueryWorkerData, type ToQueryWorker } from './query-messages.ts';

const IN_FLIGHT = 2;
/** How long close() waits for the worker to finish its query and exit before terminating it. */
const CLOSE_GRACE_MS = 5000;

interface Job {
  readonly id: number;
  readonly method: QueryMethod;
  readonly params: unknown;
  readonly signal: AbortSignal | undefined;
  resolve(json: string): void;
  reject(e: unknown): void;
}

function workerEntry(): { url: URL; data: Record<string, unknown> } {
  const self = import.meta.url;
  // From TypeScript sources the worker needs tsx's loader registered in its own thread.
  if (self.endsWith('.ts')) return { url: new URL('../runtime/tsx-worker-boot.mjs', self), data: { entry: new URL('./query-worker.ts', self).href } };
  return { url: new URL('./query-worker.js', self), data: {} };
}

const knownCodes = new Set<number>(Object.values(ErrorCodes));

const cancelled = (job: Job): RpcError =>
  job.signal?.reason instanceof RpcError ? job.signal.reason : new RpcError(ErrorCodes.RequestCancelled, `'${job.method}' was cancelled`);

export class QueryThread {
  private worker: Worker | null = null;
  private ready: Promise<void> | null = null;
  /** Queued jobs per client, and the clients with jobs in round-robin order. */
  private readonly queues = new Map<unknown, Job[]>();
  private readonly turn: unknown[] = [];
  private readonly sent = new Map<number, Job>();
  private nextId = 0;
  private closed = false;

  private constructor(
    private readonly databasePath: string,
    private readonly log: (line: string) => void,
    private readonly resourceLimits: ResourceLimits | undefined,
  ) {}

  /**
   * Starts the query thread on an open store (the main thread's connection created and migrated
   * it). `resourceLimits` bound its JavaScript heap (default: Node's); a query whose answer does
   * not fit fails alone and the next query starts a new thread.
   */
  static async open(databasePath: string, log: (line: string) => void, o: { resourceLimits?: ResourceLimits } = {}): Promise<QueryThread> {
    const t = new QueryThread(databasePath, log, o.resourceLimits);
    await t.start();
    return t;
  }

  /** Queries that have not been answered yet (queued or at the worker). */
  get pending(): number {
    let n = this.sent.size;
    for (const q of this.queues.values()) n += q.length;
    return n;
  }

  /**
   * Runs one query for `client` (any key: the connection) and answers its result as JSON text. A
   * signal aborted before the query's turn rejects with its reason and the query never runs.
   */
  run<M extends QueryMethod>(client: unknown, method: M, params: RequestParams<M>, signal?: AbortSignal): Promise<SerializedResult<RequestResult<M>>> {
    if (this.closed) return Promise.reject(new RpcError(ErrorCodes.InternalError, 'the server is shutting down'));
    return new Promise<string>((resolve, reject) => {
      const job: Job = { id: this.nextId++, method, params, signal, resolve, reject };
      let q = this.queues.get(client);
      if (q === undefined) {
        q = [];
        this.queues.set(client, q);
        this.turn.push(client);
      }
      q.push(job);
      // Cancelled (or its client gone) while queued: it leaves the queue at once and never runs.
      signal?.addEventListener('abort', () => this.dequeue(client, job), { once: true });
      this.pump();
    }).then((json) => new SerializedResult<RequestResult<M>>(json));
  }

  /** Fails what is queued, lets the worker finish its query, and stops it. */
  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    for (const q of this.queues.values()) for (const job of q) job.reject(new RpcError(ErrorCodes.InternalError, 'the server is shutting down'));
    this.queues.clear();
    this.turn.length = 0;
    const worker = this.worker;
    if (!worker) return;
    const exited = new Promise<void>((r) => worker.once('exit', () => r()));
    worker.postMessage({ kind: 'close' } satisfies ToQueryWorker);
    const timer = setTimeout(() => void worker.terminate(), CLOSE_GRACE_MS);
    await exited;
    clearTimeout(timer);
  }

  private start(): Promise<void> {
    const entry = workerEntry();
    const data: QueryWorkerData = { databasePath: this.databasePath };
    const worker = new Worker(entry.url, { workerData: { ...entry.data, ...data }, ...(this.resourceLimits ? { resourceLimits: this.resourceLimits } : {}) });
    this.worker = worker;
    this.ready = new Promise<void>((resolve, reject) => {
      worker.on('message', (raw: unknown) => {
        const parsed = fromQueryWorkerSchema.safeParse(raw);
        if (!parsed.success) {
          this.log(`query thread: malformed message: ${parsed.error.message}`);
          void worker.terminate();
          return;
        }
        const m = parsed.data;
        if (m.kind === 'ready') return resolve();
        if (m.kind === 'open-failed') return reject(new Error(`the query thread cannot open the run store: ${m.error}`));
        const job = this.sent.get(m.id);
        if (!job) return;
        this.sent.delete(m.id);
        if (m.kind === 'result') job.resolve(m.json);
        else job.reject(new RpcError(knownCodes.has(m.code) ? (m.code as ErrorCode) : ErrorCodes.InternalError, m.message));
        this.pump();
      });
      let failure: Error | null = null;
      worker.on('error', (e: Error) => {
        failure ??= e;
        reject(e);
      });
      worker.on('exit', (code) => {
        if (this.worker === worker) this.worker = null;
        reject(new Error(`the query thread exited (code ${code}) before it was ready`));
        const why = failure ? failure.message : `it exited with code ${code}`;
        if (this.sent.size > 0 || failure) this.log(`query thread stopped: ${why}${this.closed ? '' : '; the next query starts a new one'}`);
        for (const job of this.sent.values()) job.reject(new RpcError(ErrorCodes.InternalError, `the query thread stopped: ${why}`));
        this.sent.clear();
        if (!this.closed) this.pump();
      });
    });
    return this.ready;
  }

  /** Sends queued jobs to the worker, round-robin over clients, up to IN_FLIGHT at a time. */
  private pump(): void {
    if (this.closed) return;
    if (this.worker === null) {
      if (this.turn.length === 0) return;
      // The last worker died: a new one serves the rest of the queue.
      this.start().then(
        () => this.pump(),
        (e: unknown) => this.failQueued(e),
      );
      return;
    }
    const worker = this.worker;
    while (this.sent.size < IN_FLIGHT && this.turn.length > 0) {
      const client = this.turn.shift()!;
      const q = this.queues.get(client)!;
      const job = q.shift()!;
      if (q.length === 0) this.queues.delete(client);
      else this.turn.push(client);
      if (job.signal?.aborted) {
        job.reject(cancelled(job));
        continue;
      }
      this.sent.set(job.id, job);
      worker.postMessage({ kind: 'query', id: job.id, method: job.method, params: job.params } satisfies ToQueryWorker);
    }
  }

  private dequeue(client: unknown, job: Job): void {
    const q = this.queues.get(client);
    const i = q?.indexOf(job) ?? -1;
    if (q === undefined || i < 0) return;
    q.splice(i, 1);
    if (q.length === 0) {
      this.queues.delete(client);
      this.turn.splice(this.turn.indexOf(client), 1);
    }
    job.reject(cancelled(job));
  }

  private failQueued(e: unknown): void {
    const error = new RpcError(ErrorCodes.InternalError, `the query thread cannot start: ${e instanceof Error ? e.message : String(e)}`);
    for (const q of this.queues.values()) for (const job of q) job.reject(error);
    this.queues.clear();
    this.turn.length = 0;
  }
}
