/**
 * Test helpers for the training server over a real socket: a typed client on a real WebSocket, a
 * server in a child process (so it can be killed with SIGKILL), and waits on notifications with a
 * deadline — never on sleeps.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import WebSocket from 'ws';
import { PROTOCOL_VERSION, serverNotifications, type ServerNotificationMethod, type ServerNotificationParams } from '../../server/protocol/methods.ts';
import { RpcClient } from '../../server/protocol/rpc-client.ts';

export const cliPath = fileURLToPath(new URL('../../server/cli/troupe.mjs', import.meta.url));

export interface TestClient {
  readonly rpc: RpcClient;
  readonly socket: WebSocket;
  /** Resolves with the first notification of `method` (from now on, or already received when `seen` is set) that satisfies `pred`. */
  waitFor<M extends ServerNotificationMethod>(method: M, pred?: (p: ServerNotificationParams<M>) => boolean, timeoutMs?: number): Promise<ServerNotificationParams<M>>;
  /** Every notification of `method` received so far. */
  received<M extends ServerNotificationMethod>(method: M): Array<ServerNotificationParams<M>>;
  /** Resolves when the socket is closed, with the code and reason. */
  readonly closed: Promise<{ code: number; reason: string }>;
  close(): Promise<void>;
}

/** Every notification the server sends (the method table's), so a new one is recorded without a change here. */
const watched = Object.keys(serverNotifications) as ServerNotificationMethod[];

/** Opens a socket with the given headers; resolves once open (rejects with the HTTP status on refusal). */
export function openSocket(url: string, headers: Record<string, string>): Promise<WebSocket> {
  return new Promise((resolve, reject) => {
    const socket = new WebSocket(url, { headers });
    socket.once('open', () => resolve(socket));
    socket.once('unexpected-response', (_req, res) => {
      let body = '';
      res.on('data', (c: Buffer) => (body += c.toString()));
      res.on('end', () => reject(Object.assign(new Error(`HTTP ${res.statusCode}: ${body.trim()}`), { status: res.statusCode, body })));
    });
    socket.once('error', reject);
  });
}

/** Connects and, unless told not to, sends `initialize`. */
export async function connect(url: string, token: string, o: { initialize?: boolean } = {}): Promise<TestClient> {
  const socket = await openSocket(url, { Authorization: `Bearer ${token}` });
  const protocolErrors: string[] = [];
  const rpc = new RpcClient((text) => socket.send(text), (m) => protocolErrors.push(m));
  const log = new Map<string, unknown[]>();
  const waiters = new Set<{ method: string; pred: (p: unknown) => boolean; resolve: (p: unknown) => void }>();
  for (const m of watched) {
    log.set(m, []);
    rpc.onNotification(m, (p) => {
      log.get(m)!.push(p);
      for (const w of [...waiters]) {
        if (w.method === m && w.pred(p)) {
          waiters.delete(w);
          w.resolve(p);
        }
      }
    });
  }
  socket.on('message', (data) => rpc.receive(data.toString()));
  const closed = new Promise<{ code: number; reason: string }>((resolve) =>
    socket.once('close', (code, reason) => {
      rpc.close(new Error(`socket closed (${code} ${reason.toString()})`));
      resolve({ code, reason: reason.toString() });
    }),
  );
  const client: TestClient = {
    rpc,
    socket,
    closed,
    received: (method) => [...(log.get(method) ?? [])] as never,
    waitFor: (method, pred = () => true, timeoutMs = 120_000) =>
      new Promise((resolve, reject) => {
        const w = { method, pred: pred as (p: unknown) => boolean, resolve: resolve as (p: unknown) => void };
        waiters.add(w);
        const timer = setTimeout(() => {
          waiters.delete(w);
          reject(new Error(`no ${method} matching ${pred.toString()} within ${timeoutMs} ms; received: ${JSON.stringify(log.get(method)).slice(0, 2000)}${protocolErrors.length ? `; protocol errors: ${protocolErrors.join('; ')}` : ''}`));
        }, timeoutMs);
        timer.unref();
        const origResolve = w.resolve;
        w.resolve = (p) => {
          clearTimeout(timer);
          origResolve(p);
        };
      }),
    close: async () => {
      if (socket.readyState === WebSocket.CLOSED) return;
      socket.close(1000, 'test done');
      await closed;
    },
  };
  if (o.initialize !== false) await rpc.request('initialize', { protocolVersion: PROTOCOL_VERSION, clientInfo: { name: 'test' } });
  return client;
}

export interface ServerProcess {
  readonly child: ChildProcess;
  readonly url: string;
  readonly token: string;
  /** Everything the server wrote to stderr so far. */
  stderr(): string;
  /** Resolves with the exit code/signal. */
  readonly exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
}

/** Starts `troupe serve` on port 0 in a child process and resolves once it printed its URL. */
export function startServerProcess(workspace: string, extraArgs: readonly string[] = []): Promise<ServerProcess> {
  const child = spawn(process.execPath, [cliPath, 'serve', '--workspace', workspace, ...extraArgs], { stdio: ['ignore', 'pipe', 'pipe'] });
  let err = '';
  child.stderr!.on('data', (c: Buffer) => (err += c.toString()));
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) => child.once('exit', (code, signal) => resolve({ code, signal })));
  return new Promise((resolve, reject) => {
    const lines = createInterface({ input: child.stdout! });
    lines.on('line', (line) => {
      const m = /^troupe server listening on (ws:\/\/\S+)$/.exec(line);
      if (!m) return;
      const info = JSON.parse(readFileSync(join(workspace, '.troupe', 'server.json'), 'utf8')) as { tokenFile: string };
      const token = readFileSync(info.tokenFile, 'utf8').trim();
      resolve({ child, url: m[1]!, token, stderr: () => err, exited });
    });
    void exited.then(({ code, signal }) => reject(new Error(`troupe serve exited (${code ?? signal}) before listening:\n${err}`)));
  });
}
