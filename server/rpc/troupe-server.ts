/**
 * The training server: one workspace, one run manager, any number of clients.
 *
 *   clients ──ws──▶ websocket-listener (token + origin) ──▶ Connection (parse, dispatch)
 *                                                             ├─ run-handlers ──▶ RunManager ──▶ run workers
 *                                                             ├─ config-handlers (LSP for configs)
 *                                                             └─ export-handler
 *   RunManager events (state, progress, log) ──▶ every initialized connection
 *
 * Runs belong to the server, not to a connection: a client that disconnects leaves its runs
 * training, and a client that connects later finds them with `runs/list` and the notifications that
 * follow. Training happens in the run manager's worker threads and the editor's store queries in the
 * query thread (query-thread.ts), so this thread only parses, records run states and forwards events.
 */
import type { IncomingMessage } from 'node:http';
import { resolve } from 'node:path';
import type { ResourceLimits } from 'node:worker_threads';
import type { WebSocket } from 'ws';
import { ErrorCodes, RpcError } from '../protocol/json-rpc.ts';
import { PROTOCOL_VERSION, type ServerNotificationMethod, type ServerNotificationParams } from '../protocol/methods.ts';
import { TextDocumentSyncKind } from '../protocol/lsp.ts';
import { PathConfinement } from '../runs/path-confinement.ts';
import { RunManager } from '../runs/run-manager.ts';
import { configHandlers } from './config-handlers.ts';
import { Connection, type NotificationHandlers, type RequestHandlers } from './connection.ts';
import { exportHandler } from './export-handler.ts';
import { QueryThread } from './query-thread.ts';
import { runHandlers } from './run-handlers.ts';
import { acquireServerLock, createToken, removeServerFile, writeServerFile } from './server-info-file.ts';
import type { LockFile } from '../runs/run-lock.ts';
import { isLoopback, listen, type Listener } from './websocket-listener.ts';

export const SERVER_VERSION = '0.1.0';
/** Largest frame accepted; an experiment config or an open document is far below it. */
export const DEFAULT_MAX_PAYLOAD_BYTES = 4 * 1024 * 1024;

export interface ServeOptions {
  /** Folder holding `.troupe/` (database, run folders, server.json). */
  readonly workspace: string;
  /** Default 127.0.0.1. Anything not loopback is allowed but logged as a warning. */
  readonly host?: string;
  /** Default 0: a free port. */
  readonly port?: number;
  readonly maxPayloadBytes?: number;
  readonly maxConcurrentRuns?: number;
  /**
   * Folders besides the workspace where paths a client names may lead (`--allow-path`): config
   * files, checkpoint folders in configs, export destinations. Each must exist.
   */
  readonly allowPaths?: readonly string[];
  /** Limits of each run worker's JavaScript heap (RunManager's `workerResourceLimits`, and its default). */
  readonly workerResourceLimits?: ResourceLimits;
  /** The most memory the server may hold while runs train before it fails them (RunManager's `memoryLimitBytes`). */
  readonly memoryLimitBytes?: number;
  readonly log?: (line: string) => void;
}

export class TroupeServer {
  private readonly connections = new Set<Connection>();
  private nextConnectionId = 1;
  private closing: Promise<void> | null = null;
  private readonly startedAt = performance.now();

  private constructor(
    readonly workspace: string,
    readonly manager: RunManager,
    private readonly listener: Listener,
    /** Absolute path of the token file. */
    readonly tokenFile: string,
    private readonly log: (line: string) => void,
    private readonly requests: RequestHandlers,
    private readonly queries: QueryThread,
    private readonly notifications: NotificationHandlers,
    /** `.troupe/server.lock`, held from start to the end of close(). */
    private readonly lock: LockFile,
  ) {}

  /** `ws://127.0.0.1:PORT`. */
  get url(): string {
    return this.listener.url;
  }

  get clientCount(): number {
    return this.connections.size;
  }

  /** Store queries not answered yet, queued or running in the query thread. */
  get pendingQueries(): number {
    return this.queries.pending;
  }

  static async start(o: ServeOptions): Promise<TroupeServer> {
    const workspace = resolve(o.workspace);
    const log = o.log ?? ((line: string) => process.stderr.write(`${line}\n`));
    const host = o.host ?? '127.0.0.1';
    // The lock, not server.json, makes the server the workspace's only one (server-info-file.ts).
    const lock = await acquireServerLock(workspace);
    if (!isLoopback(host)) log(`warning: listening on ${host}, not loopback: anyone who can reach this address and has the token can drive training`);

    let manager: RunManager;
    let paths: PathConfinement;
    let queries: QueryThread;
    try {
      // Every path a client names is confined, on loopback too: the rule is the same wherever the
      // client is, and a folder outside the workspace is one --allow-path away.
      paths = await PathConfinement.create(workspace, o.allowPaths ?? []);
      manager = await RunManager.open({
        workspace,
        log,
        paths,
        ...(o.maxConcurrentRuns !== undefined ? { maxConcurrentRuns: o.maxConcurrentRuns } : {}),
        ...(o.workerResourceLimits !== undefined ? { workerResourceLimits: o.workerResourceLimits } : {}),
        ...(o.memoryLimitBytes !== undefined ? { memoryLimitBytes: o.memoryLimitBytes } : {}),
      });
    } catch (e) {
      lock.release();
      throw e;
    }
    try {
      // After the manager: its connection has created and migrated the store the thread reads.
      queries = await QueryThread.open(manager.store.path, log);
    } catch (e) {
      await manager.close();
      lock.release();
      throw e;
    }
    let listener: Listener | undefined;
    try {
      const { token, tokenFile } = await createToken(workspace);
      // The handler tables need the server (status, connections) and the server needs the tables;
      // `self` is assigned before the listener accepts its first connection.
      let self: TroupeServer | undefined;
      const server = (): TroupeServer => self!;
      const config = configHandlers({ log, paths });
      const requests = {
        initialize: (p, ctx) => {
          const major = p.protocolVersion?.split('.')[0];
          if (major !== undefined && major !== PROTOCOL_VERSION.split('.')[0]) {
            throw new RpcError(ErrorCodes.IncompatibleProtocol, `client speaks protocol ${p.protocolVersion}, this server ${PROTOCOL_VERSION}: update the extension or the server`);
          }
          ctx.connection.receivesRunEvents = p.protocolVersion !== undefined;
          if (p.clientInfo) ctx.connection.clientName = p.clientInfo.name;
          return {
            protocolVersion: PROTOCOL_VERSION,
            serverInfo: { name: 'troupe', version: SERVER_VERSION },
            capabilities: {
              textDocumentSync: { openClose: true, change: TextDocumentSyncKind.Incremental },
              completionProvider: { triggerCharacters: ['"', ':'] },
              hoverProvider: true,
            },
            workspace,
          };
        },
        shutdown: () => null,
        // Answered from memory, never from the store: this is the request that must stay fast.
        'server/status': () => ({
          protocolVersion: PROTOCOL_VERSION,
          pid: process.pid,
          uptimeMs: performance.now() - server().startedAt,
          activeRuns: manager.activeRuns(),
          clients: server().clientCount,
          rssBytes: process.memoryUsage.rss(),
        }),
        ...runHandlers(manager, queries),
        'adapters/export': exportHandler(manager, paths),
        ...config.requests,
      } satisfies RequestHandlers;
      const notifications = {
        initialized: () => {},
        exit: (_p, c) => c.close(1000, 'exit'),
        '$/cancelRequest': (p, c) => c.cancel(p.id),
        ...config.notifications,
      } satisfies NotificationHandlers;

      listener = await listen({
        host,
        port: o.port ?? 0,
        token,
        maxPayloadBytes: o.maxPayloadBytes ?? DEFAULT_MAX_PAYLOAD_BYTES,
        log,
        onConnection: (ws, req) => server().accept(ws, req),
      });
      self = new TroupeServer(workspace, manager, listener, tokenFile, log, requests, queries, notifications, lock);
      manager.onDidChangeState((e) => self?.broadcast('run/didChangeState', { runId: e.runId, state: e.state, previous: e.previous, run: e.run }));
      manager.onDidProgress((e) => self?.broadcast('run/didProgress', { runId: e.runId, step: e.step, steps: e.steps, stepMs: e.stepMs, etaMs: e.etaMs, metrics: [...e.metrics] }));
      manager.onDidLog((e) => self?.broadcast('run/didLog', { runId: e.runId, line: e.line }));
      manager.onDidWarmUp((e) => self?.broadcast('run/didWarmUp', e));
      manager.onDidChangeList((e) => (e.kind === 'renamed' ? self?.broadcast('run/didRename', { runId: e.run.id, run: e.run }) : self?.broadcast('run/didDelete', { runId: e.runId })));
      await writeServerFile(workspace, { url: listener.url, pid: process.pid, protocolVersion: PROTOCOL_VERSION, tokenFile, workspace, startedAt: new Date().toISOString() });
      log(`troupe server ${SERVER_VERSION} (protocol ${PROTOCOL_VERSION}) serving ${workspace} at ${listener.url}`);
      return self;
    } catch (e) {
      await listener?.close();
      await queries.close();
      await manager.close();
      lock.release();
      throw e;
    }
  }

  private accept(ws: WebSocket, req: IncomingMessage): void {
    if (this.closing) {
      ws.close(1001, 'server shutting down');
      return;
    }
    const connection = new Connection(
      {
        send: (text) => ws.send(text),
        close: (code, reason) => ws.close(code, reason),
        bufferedAmount: () => ws.bufferedAmount,
      },
      { id: this.nextConnectionId++, requests: this.requests, notifications: this.notifications, log: this.log },
    );
    this.connections.add(connection);
    this.log(`client ${connection.id} connected from ${req.socket.remoteAddress ?? '?'}`);
    ws.on('message', (data, isBinary) => {
      if (isBinary) {
        connection.close(1003, 'binary frames are not accepted: send JSON-RPC as text');
        return;
      }
      connection.receive(Array.isArray(data) ? Buffer.concat(data).toString('utf8') : Buffer.from(data as ArrayBuffer).toString('utf8'));
    });
    ws.on('close', (code, reason) => {
      connection.closed();
      this.connections.delete(connection);
      this.log(`client ${connection.id} disconnected (${code}${reason.length > 0 ? ` ${reason.toString()}` : ''})`);
    });
    // ws reports protocol violations (oversized frames, bad opcodes) here and then closes the socket
    // with the matching code; the error must be consumed so it does not crash the process.
    ws.on('error', (e) => this.log(`client ${connection.id}: ${e.message}`));
  }

  /** Run events go to every initialized client that asked for them at `initialize`. */
  private broadcast<M extends ServerNotificationMethod>(method: M, params: ServerNotificationParams<M>): void {
    for (const c of this.connections) if (c.isInitialized && c.receivesRunEvents) c.notify(method, params);
  }

  /** Pauses live runs at their step boundary, closes every client, removes server.json and releases the lock. Idempotent. */
  close(): Promise<void> {
    this.closing ??= (async () => {
      this.log('shutting down: live runs pause at their next step boundary');
      // Runs first, so connected clients see them pause; then the sockets.
      await this.manager.close();
      await this.listener.close();
      await this.queries.close();
      await removeServerFile(this.workspace);
      // Last: until server.json is gone a new server must not start and write its own.
      this.lock.release();
    })();
    return this.closing;
  }
}
