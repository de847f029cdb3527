/**
 * Joins concurrent requests into one engine call. Requests for the same policy that arrive while
 * its previous call runs wait, then go together as one `Policy.generate` batch: the engine decodes
 * a batch of 128 rows several times faster than 32 calls of 4 (bench/openai). Requests join when
 * their sampling settings and stop ids are equal; each row keeps the random stream it would have
 * alone (`rowSeeds`: the stream of (its request's seed, its row in the request)), and a row of a
 * request with fewer `max_tokens` than the batch's is cut to its own (a row's tokens depend only
 * on its own prefix and stream), so joining changes no sample beyond float rounding of the
 * batched products. A call asks for the most top alternatives any of its requests wants, and each
 * request gets its own first k (they are best first). A request with `onStep` receives its rows'
 * tokens as the engine samples them (its rows numbered from 0, its own `max_tokens` respected).
 *
 * A request whose `signal` aborts (its HTTP client left) is rejected with a `RequestCancelled`
 * at once: taken out of the queue if it waits, and if its call runs, its rows' cancellation flags
 * are set (`GenerateRequest.cancel`), so the engine stops decoding them at its next step and the
 * call ends as soon as no other request's rows are left in it.
 */
import type { Policy } from '../models/policy.ts';
import type { GenerateStep, TopAlternatives } from '../runtime/generate.ts';
import { streamSeed, type SamplingParams } from '../runtime/sampler.ts';

export interface RowsRequest {
  readonly rows: readonly Int32Array[];
  readonly maxNewTokens: number;
  readonly sampling: SamplingParams;
  readonly seed: number;
  /** Index of row 0 in the caller's batch (`troupe_row_offset`). */
  readonly firstRow: number;
  readonly stopTokens: readonly number[];
  readonly padToken: number;
  /** Alternatives per token (`GenerateRequest.topLogprobs`); 0 or absent: none. */
  readonly topLogprobs?: number;
  /** Receives each decoding step's tokens of this request's rows while the call runs. */
  readonly onStep?: (step: GenerateStep) => void;
  /** Aborted when the caller no longer wants the rows (a client that disconnected). */
  readonly signal?: AbortSignal;
}

/** A request given up by its caller (its signal aborted) before its rows finished. */
export class RequestCancelled extends Error {
  constructor() {
    super('the request was cancelled by its client');
    this.name = 'RequestCancelled';
  }
}

export interface RowsResult {
  readonly tokens: Int32Array[];
  readonly logprobs: Float32Array[];
  readonly finish: Array<'stop' | 'length'>;
  /** With `topLogprobs`: each row's alternatives, k per token. */
  readonly top?: TopAlternatives[];
}

interface Waiting {
  readonly request: RowsRequest;
  readonly key: string;
  readonly done: (r: RowsResult) => void;
  readonly fail: (e: unknown) => void;
  /** Its rows' cancellation flags in the running call (a view of the call's shared flags); null while it waits. */
  flags: Int32Array | null;
  /** Answered or cancelled: nothing more is sent to it. */
  settled: boolean;
}

const joinKey = (r: RowsRequest): string => JSON.stringify([r.sampling.temperature, r.sampling.topP, r.sampling.topK, [...new Set(r.stopTokens)].sort((a, b) => a - b), r.padToken]);

export class BatchingGenerator {
  private readonly waiting = new Map<Policy, Waiting[]>();
  private readonly running = new Set<Policy>();
  /** Engine calls made, requests served, requests cancelled and tokens the engine generated, for tests and logs. */
  calls = 0;
  requests = 0;
  cancelled = 0;
  tokens = 0;
  /** Requests whose engine call is running now. */
  active = 0;

  constructor(
    /** The most rows one engine call may take. */
    private readonly maxRows = 1024,
  ) {}

  generate(policy: Policy, request: RowsRequest): Promise<RowsResult> {
    return new Promise<RowsResult>((done, fail) => {
      const signal = request.signal;
      if (signal?.aborted) {
        this.cancelled++;
        return fail(new RequestCancelled());
      }
      const queue = this.waiting.get(policy) ?? [];
      const w: Waiting = { request, key: joinKey(request), done, fail, flags: null, settled: false };
      queue.push(w);
      this.waiting.set(policy, queue);
      signal?.addEventListener('abort', () => this.cancel(policy, w), { once: true });
      if (!this.running.has(policy)) void this.drain(policy);
    });
  }

  /** Gives up `w`: out of the queue if it waits, its rows flagged if its call runs. */
  private cancel(policy: Policy, w: Waiting): void {
    if (w.settled) return;
    w.settled = true;
    this.cancelled++;
    if (w.flags) w.flags.fill(1);
    else {
      const queue = this.waiting.get(policy);
      if (queue) this.waiting.set(policy, queue.filter((x) => x !== w));
    }
    w.fail(new RequestCancelled());
  }

  private async drain(policy: Policy): Promise<void> {
    this.running.add(policy);
    try {
      for (;;) {
        const queue = this.waiting.get(policy);
        if (!queue || queue.length === 0) break;
        // The oldest request and every waiting one it can join, up to maxRows.
        const key = queue[0]!.key;
        const batch: Waiting[] = [];
        let rows = 0;
        for (const w of queue) {
          if (w.key !== key || (batch.length > 0 && rows + w.request.rows.length > this.maxRows)) continue;
          batch.push(w);
          rows += w.request.rows.length;
        }
        this.waiting.set(policy, queue.filter((w) => !batch.includes(w)));
        await this.run(policy, batch);
      }
    } finally {
      this.running.delete(policy);
      this.waiting.delete(policy);
    }
  }

  private async run(policy: Policy, batch: readonly Waiting[]): Promise<void> {
    const first = batch[0]!.request;
    const rows = batch.flatMap((w) => w.request.rows);
    const rowSeeds = batch.flatMap((w) => w.request.rows.map((_, b) => streamSeed(w.request.seed >>> 0, w.request.firstRow + b)));
    const K = Math.max(...batch.map((w) => w.request.topLogprobs ?? 0));
    const starts = batch.map((_, i) => batch.slice(0, i).reduce((a, w) => a + w.request.rows.length, 0));
    const streamed = batch.some((w) => w.request.onStep);
    // Shared with the engine worker: a cancelled request's rows are flagged while the call runs.
    const cancel = new Int32Array(new SharedArrayBuffer(4 * rows.length));
    batch.forEach((w, i) => (w.flags = cancel.subarray(starts[i]!, starts[i]! + w.request.rows.length)));
    // A request whose step callback throws is failed with that error when the call ends; the
    // other requests of the batch go on (the callback runs in the engine's message handler).
    const broken = new Map<Waiting, unknown>();
    const onStep = (step: GenerateStep): void =>
      batch.forEach((w, i) => {
        if (!w.request.onStep || broken.has(w) || w.settled) return;
        try {
          forward(step, w.request, starts[i]!, K);
        } catch (e) {
          broken.set(w, e);
        }
      });
    let gen;
    this.active += batch.length;
    try {
      gen = await policy.generate(rows, {
        maxNewTokens: Math.max(...batch.map((w) => w.request.maxNewTokens)),
        sampling: first.sampling,
        seed: first.seed >>> 0,
        rowSeeds,
        stopTokens: first.stopTokens,
        padToken: first.padToken,
        // Served as training rollouts sample it (the experiment's rollout weights and kernels).
        rollout: true,
        ...(K > 0 ? { topLogprobs: K } : {}),
        ...(streamed ? { onStep } : {}),
        cancel,
      });
    } catch (e) {
      for (const w of batch) settle(w, () => w.fail(e));
      return;
    } finally {
      this.active -= batch.length;
    }
    this.calls++;
    this.requests += batch.length;
    this.tokens += gen.tokens.reduce((a, t) => a + t.length, 0);
    let at = 0;
    for (const w of batch) {
      const max = w.request.maxNewTokens;
      const k = w.request.topLogprobs ?? 0;
      const out = { tokens: [] as Int32Array[], logprobs: [] as Float32Array[], finish: [] as Array<'stop' | 'length'>, top: [] as TopAlternatives[] };
      for (let b = 0; b < w.request.rows.length; b++, at++) {
        const tokens = gen.tokens[at]!;
        const cut = tokens.length > max;
        const n = Math.min(tokens.length, max);
        out.tokens.push(cut ? tokens.slice(0, max) : tokens);
        out.logprobs.push(cut ? gen.logprobs[at]!.slice(0, max) : gen.logprobs[at]!);
        out.finish.push(cut ? 'length' : gen.finish[at] === 'stop' ? 'stop' : 'length');
        if (k > 0) out.top.push(firstK(gen.top![at]!, n, K, k));
      }
      settle(w, () => (broken.has(w) ? w.fail(broken.get(w)) : w.done(k > 0 ? out : { tokens: out.tokens, logprobs: out.logprobs, finish: out.finish })));
    }
  }
}

/** Answers `w` unless it was cancelled (already rejected). */
function settle(w: Waiting, answer: () => void): void {
  if (w.settled) return;
  w.settled = true;
  answer();
}

/** The first k of each token's K alternatives, for n tokens. */
function firstK(top: TopAlternatives, n: number, K: number, k: number): TopAlternatives {
  const ids = new Int32Array(n * k);
  const logprobs = new Float32Array(n * k);
  for (let t = 0; t < n; t++) {
    ids.set(top.ids.subarray(t * K, t * K + k), t * k);
    logprobs.set(top.logprobs.subarray(t * K, t * K + k), t * k);
  }
  return { ids, logprobs };
}

/** Passes a request the part of a batch step that is its own: its rows (renumbered from 0), within its max_tokens. */
function forward(step: GenerateStep, r: RowsRequest, start: number, K: number): void {
  if (step.n >= r.maxNewTokens) return;
  const mine: number[] = [];
  step.rows.forEach((b, i) => {
    if (b >= start && b < start + r.rows.length) mine.push(i);
  });
  if (mine.length === 0) return;
  const k = r.topLogprobs ?? 0;
  const own: GenerateStep = {
    n: step.n,
    rows: Int32Array.from(mine, (i) => step.rows[i]! - start),
    tokens: Int32Array.from(mine, (i) => step.tokens[i]!),
    logprobs: Float32Array.from(mine, (i) => step.logprobs[i]!),
  };
  r.onStep!(k > 0 && step.top ? { ...own, top: firstK({ ids: Int32Array.from(mine.flatMap((i) => [...step.top!.ids.subarray(i * K, (i + 1) * K)])), logprobs: Float32Array.from(mine.flatMap((i) => [...step.top!.logprobs.subarray(i * K, (i + 1) * K)])) }, mine.length, K, k) } : own);
}
