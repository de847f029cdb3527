/**
 * The typed client side of the protocol, independent of any transport: give it a function that
 * sends a text frame and feed it the frames that arrive. The extension wraps it around its
 * WebSocket, the tests and benchmarks around theirs.
 *
 * Results and notifications are parsed with the method's schema before anyone sees them, so a
 * server that sends something else fails loudly at this boundary (the error names the method).
 */
import { z } from 'zod';
import { notificationMessageSchema, responseMessageSchema, type RequestId, type ResponseError } from './json-rpc.ts';
import {
  clientRequests,
  serverNotifications,
  type ClientNotificationMethod,
  type ClientRequestMethod,
  type RequestParamsIn,
  type RequestResult,
  type ServerNotificationMethod,
  type ServerNotificationParams,
} from './methods.ts';
import type { ClientNotifications } from './methods.ts';

/** A request the server answered with an error. */
export class RpcResponseError extends Error {
  override readonly name = 'RpcResponseError';
  readonly code: number;
  readonly data: unknown;
  constructor(
    readonly method: string,
    error: ResponseError,
  ) {
    super(`${method}: ${error.message} (code ${error.code})`);
    this.code = error.code;
    this.data = error.data;
  }
}

export interface Disposable {
  dispose(): void;
}

export interface RequestOptions {
  /**
   * Sends `$/cancelRequest` when aborted. The promise then rejects with the server's RequestCancelled
   * if the request could stop, or resolves with its result if it had already finished.
   */
  readonly signal?: AbortSignal;
}

interface Pending {
  readonly method: ClientRequestMethod;
  readonly resolve: (v: unknown) => void;
  readonly reject: (e: Error) => void;
}

export class RpcClient {
  private nextId = 1;
  private readonly pending = new Map<RequestId, Pending>();
  private readonly listeners = new Map<string, Set<(params: unknown) => void>>();
  private closedWith: Error | null = null;

  constructor(
    private readonly send: (text: string) => void,
    /** Called with frames the client cannot use (malformed, or a result for no request). */
    private readonly onProtocolError: (message: string) => void = () => {},
  ) {}

  request<M extends ClientRequestMethod>(method: M, params: RequestParamsIn<M>, o: RequestOptions = {}): Promise<RequestResult<M>> {
    if (this.closedWith) return Promise.reject(this.closedWith);
    const id = this.nextId++;
    return new Promise<RequestResult<M>>((resolve, reject) => {
      this.pending.set(id, { method, resolve: resolve as (v: unknown) => void, reject });
      if (o.signal) {
        const onAbort = () => {
          if (this.pending.has(id)) this.notify('$/cancelRequest', { id });
        };
        if (o.signal.aborted) queueMicrotask(onAbort);
        else o.signal.addEventListener('abort', onAbort, { once: true });
      }
      this.send(JSON.stringify({ jsonrpc: '2.0', id, method, params: params ?? {} }));
    });
  }

  notify<M extends ClientNotificationMethod>(method: M, params: z.input<ClientNotifications[M]['params']>): void {
    if (this.closedWith) return;
    this.send(JSON.stringify({ jsonrpc: '2.0', method, params }));
  }

  /** Listens to one server notification; params arrive parsed. */
  onNotification<M extends ServerNotificationMethod>(method: M, listener: (params: ServerNotificationParams<M>) => void): Disposable {
    let set = this.listeners.get(method);
    if (!set) this.listeners.set(method, (set = new Set()));
    const l = listener as (params: unknown) => void;
    set.add(l);
    return { dispose: () => set.delete(l) };
  }

  /** Feeds one inbound text frame. */
  receive(text: string): void {
    let json: unknown;
    try {
      json = JSON.parse(text);
    } catch {
      this.onProtocolError(`server sent a frame that is not JSON: ${text.slice(0, 200)}`);
      return;
    }
    const response = responseMessageSchema.safeParse(json);
    if (response.success && response.data.id !== null && this.pending.has(response.data.id)) {
      const p = this.pending.get(response.data.id)!;
      this.pending.delete(response.data.id);
      if ('error' in response.data) {
        p.reject(new RpcResponseError(p.method, response.data.error));
        return;
      }
      const parsed = clientRequests[p.method].result.safeParse(response.data.result);
      if (parsed.success) p.resolve(parsed.data);
      else p.reject(new Error(`${p.method}: the server's result does not match the protocol: ${z.prettifyError(parsed.error)}`));
      return;
    }
    const note = notificationMessageSchema.safeParse(json);
    if (note.success && Object.hasOwn(serverNotifications, note.data.method)) {
      const method = note.data.method as ServerNotificationMethod;
      const parsed = serverNotifications[method].params.safeParse(note.data.params);
      if (!parsed.success) {
        this.onProtocolError(`${method}: params do not match the protocol: ${z.prettifyError(parsed.error)}`);
        return;
      }
      for (const l of this.listeners.get(method) ?? []) l(parsed.data);
      return;
    }
    this.onProtocolError(`unexpected frame from the server: ${text.slice(0, 200)}`);
  }

  /** The transport closed: every pending request rejects with `reason`. */
  close(reason: Error): void {
    this.closedWith ??= reason;
    for (const p of this.pending.values()) p.reject(reason);
    this.pending.clear();
  }

  get pendingCount(): number {
    return this.pending.size;
  }
}
