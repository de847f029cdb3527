/**
 * A fleet of inference servers (vLLM, SGLang, or `troupe serve-openai`) the trainer samples on:
 * plain JSON over HTTP (Node's fetch), one request per chunk of a generate call.
 *
 * - Load: each request goes to the live server with the fewest rows in flight (ties: the lowest
 *   index), so a batch split into as many chunks as there are live servers spreads over all.
 * - Failures: a refused or reset connection, a timeout (`timeoutMs`), a 404 or a 5xx answer marks the
 *   server down for the rest of the step and the same request (same seed, same rows) goes to
 *   another live server, up to `retries` more tries. Each chunk's answer is taken once, by row,
 *   so a retried chunk is neither lost nor counted twice. A 4xx answer is the request's fault and
 *   is thrown at once with the server's message. Servers marked down are tried again at the next
 *   `revive()` (the trainer calls it at each step).
 * - The API key comes from the environment variable the config names, never from the config.
 */
import { errorMessage } from '../protocol/openai-api.ts';
import { engineKeyEnvPattern, type RolloutBackendConfig } from '../protocol/experiment-config.ts';

export type EngineFleetConfig = Exclude<RolloutBackendConfig, { kind: 'in-process' }>;

/** What one server did since the last `takeStats()`. */
export interface ServerStats {
  readonly url: string;
  readonly requests: number;
  readonly failures: number;
  readonly generatedTokens: number;
  /** Wall time of its successful requests, ms. */
  readonly busyMs: number;
  readonly down: boolean;
}

/** A request no server could answer, or one a server refused (4xx). */
export class EngineFleetError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'EngineFleetError';
  }
}

/** A request the server refused as bad (4xx): not retried elsewhere. */
class RefusedRequest extends Error {
  constructor(
    message: string,
    readonly status: number,
  ) {
    super(message);
  }
}

interface Server {
  readonly index: number;
  readonly url: string;
  rowsInFlight: number;
  down: boolean;
  requests: number;
  failures: number;
  generatedTokens: number;
  busyMs: number;
}

export class EngineFleet {
  private readonly servers: Server[];
  private readonly headers: Record<string, string>;

  constructor(
    readonly config: EngineFleetConfig,
    private readonly log: (line: string) => void = () => {},
    env: NodeJS.ProcessEnv = process.env,
  ) {
    this.servers = config.urls.map((url, index) => ({ index, url: url.replace(/\/+$/, ''), rowsInFlight: 0, down: false, requests: 0, failures: 0, generatedTokens: 0, busyMs: 0 }));
    this.headers = { 'content-type': 'application/json' };
    if (config.apiKeyEnv !== undefined) {
      // The schema refuses other names; a config built in code is held to the same rule.
      if (!engineKeyEnvPattern.test(config.apiKeyEnv)) throw new EngineFleetError('rollout.backend.apiKeyEnv: not an engine key variable (TROUPE_, VLLM_ or SGLANG_ … KEY or TOKEN)');
      const key = env[config.apiKeyEnv];
      if (!key) throw new EngineFleetError(`rollout.backend.apiKeyEnv: the environment variable ${config.apiKeyEnv} is unset or empty`);
      this.headers.authorization = `Bearer ${key}`;
    }
  }

  get size(): number {
    return this.servers.length;
  }

  /** Servers that are not marked down. */
  liveCount(): number {
    return this.servers.filter((s) => !s.down).length;
  }

  /** Marks every server live again (the next request finds out whether it is). */
  revive(): void {
    for (const s of this.servers) s.down = false;
  }

  /**
   * POSTs `body` to `path` on the least-loaded live server, retrying elsewhere on failure;
   * `rows` is what the request weighs in the load count.
   */
  async request(path: string, body: unknown, rows: number, tokensOf: (answer: unknown) => number = () => 0): Promise<unknown> {
    const tried: string[] = [];
    for (let attempt = 0; attempt <= this.config.retries; attempt++) {
      const live = this.servers.filter((s) => !s.down);
      if (live.length === 0) break;
      const server = live.reduce((a, b) => (b.rowsInFlight < a.rowsInFlight ? b : a));
      server.rowsInFlight += rows;
      server.requests++;
      const t0 = performance.now();
      try {
        const answer = await this.post(server, path, body);
        server.busyMs += performance.now() - t0;
        server.generatedTokens += tokensOf(answer);
        return answer;
      } catch (e) {
        if (e instanceof RefusedRequest) throw new EngineFleetError(`${server.url}${path} refused the request (${e.status}): ${e.message}`);
        server.failures++;
        server.down = true;
        const why = e instanceof Error ? e.message : String(e);
        tried.push(`${server.url}: ${why}`);
        this.log(`rollout backend: ${server.url} failed (${why}); marked down for this step, retrying on another server`);
      } finally {
        server.rowsInFlight -= rows;
      }
    }
    throw new EngineFleetError(`no server answered ${path} (${tried.length} tries${tried.length ? `: ${tried.join('; ')}` : ', every server is down'})`);
  }

  /**
   * POSTs `body` to `path` on every live server (adapter loads and unloads); a server that fails
   * is marked down. Returns the servers that succeeded. A 4xx answer throws.
   */
  async broadcast(path: string, body: unknown, okStatus: (status: number) => boolean = () => false): Promise<number[]> {
    const done: number[] = [];
    await Promise.all(
      this.servers
        .filter((s) => !s.down)
        .map(async (s) => {
          try {
            await this.post(s, path, body, okStatus);
            done.push(s.index);
          } catch (e) {
            this.markDown(s, path, e);
          }
        }),
    );
    return done.sort((a, b) => a - b);
  }

  /**
   * GETs `path` from every live server (or server `index` alone): a weight version. A server that
   * fails is marked down; a 404 (no such route) is returned with its status.
   */
  async getEach(path: string, index?: number): Promise<Array<{ index: number; answer: unknown; status: number }>> {
    const out: Array<{ index: number; answer: unknown; status: number }> = [];
    await Promise.all(
      this.servers
        .filter((s) => !s.down && (index === undefined || s.index === index))
        .map(async (s) => {
          try {
            // A 404 is answered, not a failure: the route is what the caller asks about.
            out.push({ index: s.index, ...(await this.send(s, path, undefined, (status) => status === 404)) });
          } catch (e) {
            this.markDown(s, path, e);
          }
        }),
    );
    return out.sort((a, b) => a.index - b.index);
  }

  /** POSTs `body` to `path` on server `index` alone; false (and the server marked down) when it fails. A 4xx answer throws. */
  async postTo(index: number, path: string, body: unknown): Promise<boolean> {
    const s = this.servers[index];
    if (!s || s.down) return false;
    try {
      await this.post(s, path, body);
      return true;
    } catch (e) {
      this.markDown(s, path, e);
      return false;
    }
  }

  /** Marks `s` down for the step after a failure; a refusal (4xx) is the request's fault, not the server's, and is thrown instead. */
  private markDown(s: Server, path: string, e: unknown): void {
    if (e instanceof RefusedRequest) throw new EngineFleetError(`${s.url}${path} refused the request (${e.status}): ${e.message}`);
    s.failures++;
    s.down = true;
    this.log(`rollout backend: ${s.url}${path} failed (${e instanceof Error ? e.message : String(e)}); marked down for this step`);
  }

  /** Per-server counts since the last call, then zeroed. */
  takeStats(): ServerStats[] {
    return this.servers.map((s) => {
      const out = { url: s.url, requests: s.requests, failures: s.failures, generatedTokens: s.generatedTokens, busyMs: s.busyMs, down: s.down };
      s.requests = s.failures = s.generatedTokens = s.busyMs = 0;
      return out;
    });
  }

  private async post(s: Server, path: string, body: unknown, okStatus: (status: number) => boolean = () => false): Promise<unknown> {
    return (await this.send(s, path, body, okStatus)).answer;
  }

  /** POSTs `body` to `path` on `s` (a GET when `body` is undefined) and reads the answer. */
  private async send(s: Server, path: string, body: unknown, okStatus: (status: number) => boolean): Promise<{ answer: unknown; status: number }> {
    const init = body === undefined ? { method: 'GET', headers: this.headers } : { method: 'POST', headers: this.headers, body: JSON.stringify(body) };
    const res = await fetch(`${s.url}${path}`, { ...init, signal: AbortSignal.timeout(this.config.timeoutMs) });
    const text = await res.text();
    let parsed: unknown = text;
    try {
      parsed = JSON.parse(text) as unknown;
    } catch {
      // vLLM answers adapter loads in plain text.
    }
    if (res.ok || okStatus(res.status)) return { answer: parsed, status: res.status };
    const message = errorMessage(parsed) ?? `HTTP ${res.status}`;
    // 404: the model (an adapter version) is missing on this server (restarted since it was
    // loaded) or the route is: another server may have it, so it counts as this server's failure.
    if (res.status >= 400 && res.status < 500 && res.status !== 404) throw new RefusedRequest(message, res.status);
    throw new Error(`HTTP ${res.status}: ${message}`);
  }
}
