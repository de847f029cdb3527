/**
 * The extension's connection to the training server: a WebSocket carrying JSON-RPC through the
 * protocol's typed RpcClient. It opens with `initialize` (protocol version checked), reconnects
 * with backoff when the socket drops, and publishes its state (status bar, Runs view, the
 * `troupe.connection` context key). The only module that imports `ws` in the extension.
 *
 * Every attempt asks ServerProcess for the address again, so a server that restarted on another
 * port with a new token is found. Attempts after a drop never start a server: a crashing server
 * would otherwise be restarted forever. Starting happens on activation, when trust is granted, and
 * from "Troupe: Connect to Server".
 */
import * as vscode from 'vscode';
import { WebSocket, type RawData } from 'ws';
import { PROTOCOL_VERSION } from '../../server/protocol/methods.ts';
import { RpcClient } from '../../server/protocol/rpc-client.ts';
import { describeConnection, type ConnectionState, type ServerEndpoint } from './connection-state.ts';
import { connectionContextKey } from './contributions.ts';
import { ReconnectBackoff } from './reconnect-backoff.ts';
import type { ServerClient } from './server-client.ts';
import type { EndpointChange, EndpointResult, ResolveOptions } from './server-process.ts';
import { protocolMismatch } from './server-discovery.ts';

/** What the connection needs from ServerProcess. */
export interface EndpointSource {
  resolve(o: ResolveOptions): Promise<EndpointResult>;
  readonly onDidChange: vscode.Event<EndpointChange>;
}

const HANDSHAKE_TIMEOUT_MS = 10_000;
const INITIALIZE_TIMEOUT_MS = 15_000;

/** A text frame's payload (the server sends JSON as text; binary frames are not part of the protocol). */
export function rawDataToText(data: RawData): string {
  if (Array.isArray(data)) return Buffer.concat(data).toString('utf8');
  if (data instanceof ArrayBuffer) return Buffer.from(data).toString('utf8');
  return data.toString('utf8');
}

/** Explains a failed upgrade in the user's terms (ws reports "Unexpected server response: 401"). */
function describeSocketError(e: Error, url: string): string {
  if (/\b401\b/.test(e.message)) return `the server at ${url} refused the token (a server makes a new token each time it starts)`;
  if (/\b403\b/.test(e.message)) return `the server at ${url} refused the connection (403)`;
  if (/ECONNREFUSED/.test(e.message)) return `nothing is listening at ${url}`;
  return `cannot connect to ${url}: ${e.message}`;
}

/**
 * Opens an authenticated WebSocket to the server. Node's `ws` sends no Origin header, which is what
 * the server requires of non-browser clients. Shared with the config language client, which
 * speaks LSP over a socket of its own.
 */
export function openServerSocket(endpoint: ServerEndpoint): Promise<WebSocket> {
  return new Promise((resolve, reject) => {
    const socket = new WebSocket(endpoint.url, { headers: { Authorization: `Bearer ${endpoint.token}` }, handshakeTimeout: HANDSHAKE_TIMEOUT_MS });
    const onError = (e: Error) => {
      socket.off('open', onOpen);
      reject(new Error(describeSocketError(e, endpoint.url)));
    };
    const onOpen = () => {
      socket.off('error', onError);
      resolve(socket);
    };
    socket.once('error', onError);
    socket.once('open', onOpen);
  });
}

function withTimeout<T>(p: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => (timer = setTimeout(() => reject(new Error(`${what} got no answer within ${ms / 1000} s`)), ms)));
  return Promise.race([p, timeout]).finally(() => clearTimeout(timer));
}

interface Live {
  readonly socket: WebSocket;
  readonly client: RpcClient;
  readonly endpoint: ServerEndpoint;
}

/** A failure that no retry will fix (incompatible protocol). */
class FatalConnectError extends Error {}

export class ServerConnection implements ServerClient, vscode.Disposable {
  private live: Live | undefined;
  private stateValue: ConnectionState = { kind: 'idle' };
  private attempt: Promise<void> | undefined;
  private retryTimer: NodeJS.Timeout | undefined;
  private readonly backoff = new ReconnectBackoff();
  private disposed = false;
  private readonly clientEmitter = new vscode.EventEmitter<RpcClient | undefined>();
  private readonly stateEmitter = new vscode.EventEmitter<ConnectionState>();
  private readonly disposables: vscode.Disposable[] = [this.clientEmitter, this.stateEmitter];
  readonly onDidChangeConnection = this.clientEmitter.event;
  readonly onDidChangeState = this.stateEmitter.event;

  constructor(
    private readonly source: EndpointSource,
    private readonly log: (line: string) => void,
    private readonly clientInfo: { readonly name: string; readonly version: string },
  ) {
    this.disposables.push(
      source.onDidChange((c) => {
        if (c.replace) void this.reconnect({ start: c.start });
        else if (!this.live) void this.connect({ start: c.start });
      }),
    );
    void vscode.commands.executeCommand('setContext', connectionContextKey, this.stateValue.kind);
  }

  get client(): RpcClient | undefined {
    return this.live?.client;
  }

  get state(): ConnectionState {
    return this.stateValue;
  }

  /** The endpoint of the live connection (the language client opens its own socket to it). */
  get endpoint(): ServerEndpoint | undefined {
    return this.live?.endpoint;
  }

  require(): RpcClient {
    if (this.live) return this.live.client;
    throw new Error(`${describeConnection(this.stateValue)}. Run "Troupe: Connect to Server" to start or choose one.`);
  }

  /** Connects unless connected; concurrent calls share one attempt. */
  connect(o: { readonly start: boolean }): Promise<void> {
    if (this.disposed || this.live) return Promise.resolve();
    if (this.attempt) return this.attempt;
    this.clearRetry();
    this.attempt = this.tryConnect(o).finally(() => (this.attempt = undefined));
    return this.attempt;
  }

  /** Drops the current connection (if any) and connects again, e.g. after the settings changed. */
  async reconnect(o: { readonly start: boolean }): Promise<void> {
    await this.attempt;
    this.backoff.reset();
    this.drop('reconnecting');
    return this.connect(o);
  }

  dispose(): void {
    this.disposed = true;
    this.clearRetry();
    this.drop('the extension is shutting down');
    for (const d of this.disposables) d.dispose();
  }

  private async tryConnect(o: { readonly start: boolean }): Promise<void> {
    const result = await this.source.resolve({ start: o.start, onStarting: (detail) => this.setState({ kind: 'starting', detail }) });
    if (this.disposed) return;
    if (!result.ok) {
      this.fail(result.reason, result.retry);
      return;
    }
    const endpoint = result.endpoint;
    this.setState({ kind: 'connecting', url: endpoint.url });
    try {
      const live = await this.open(endpoint);
      if (this.disposed) {
        live.socket.close(1000);
        return;
      }
      this.live = live;
      this.backoff.reset();
      this.log(`connected to ${endpoint.url} (${endpoint.origin})`);
      this.clientEmitter.fire(live.client);
    } catch (e) {
      this.fail(e instanceof Error ? e.message : String(e), !(e instanceof FatalConnectError));
    }
  }

  private async open(endpoint: ServerEndpoint): Promise<Live> {
    const socket = await openServerSocket(endpoint);
    const client = new RpcClient(
      (text) => socket.send(text),
      (message) => this.log(`protocol: ${message}`),
    );
    socket.on('message', (data, isBinary) => {
      if (!isBinary) client.receive(rawDataToText(data));
    });
    // Without a listener an 'error' event would throw inside the extension host.
    socket.on('error', (e) => this.log(`socket error: ${e.message}`));
    socket.on('close', (code, reason) => {
      const why = `connection closed (${code}${reason.length ? `: ${reason.toString('utf8')}` : ''})`;
      client.close(new Error(`the Troupe server ${why}`));
      if (this.live?.socket === socket) this.lost(why);
    });
    try {
      const init = await withTimeout(
        client.request('initialize', { protocolVersion: PROTOCOL_VERSION, processId: process.pid, clientInfo: this.clientInfo }),
        INITIALIZE_TIMEOUT_MS,
        'initialize',
      );
      const mismatch = protocolMismatch(init.protocolVersion, PROTOCOL_VERSION);
      if (mismatch !== null) throw new FatalConnectError(mismatch);
      client.notify('initialized', {});
      this.setState({ kind: 'connected', endpoint, serverVersion: init.serverInfo.version });
      return { socket, client, endpoint };
    } catch (e) {
      socket.close(1000);
      throw e;
    }
  }

  /** The live socket closed under us: tell everyone, then try again. */
  private lost(why: string): void {
    this.log(why);
    this.live = undefined;
    this.clientEmitter.fire(undefined);
    this.fail(why, true);
  }

  private drop(why: string): void {
    const live = this.live;
    if (!live) return;
    this.live = undefined;
    live.socket.close(1000, why);
    live.client.close(new Error(`the connection to the Troupe server was closed: ${why}`));
    this.clientEmitter.fire(undefined);
  }

  private fail(reason: string, retry: boolean): void {
    const delay = retry && !this.disposed ? this.backoff.next() : null;
    this.log(`not connected: ${reason}`);
    if (delay === null) {
      this.setState({ kind: 'notRunning', reason });
      return;
    }
    this.setState({ kind: 'notRunning', reason, retryInMs: delay });
    this.retryTimer = setTimeout(() => {
      this.retryTimer = undefined;
      void this.connect({ start: false });
    }, delay);
  }

  private clearRetry(): void {
    if (this.retryTimer !== undefined) clearTimeout(this.retryTimer);
    this.retryTimer = undefined;
  }

  private setState(s: ConnectionState): void {
    const kindChanged = s.kind !== this.stateValue.kind;
    this.stateValue = s;
    if (kindChanged) void vscode.commands.executeCommand('setContext', connectionContextKey, s.kind);
    this.stateEmitter.fire(s);
  }
}
