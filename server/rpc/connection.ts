/**
 * One client's JSON-RPC session, independent of the socket under it: frames in, frames out.
 *
 * Every inbound frame is parsed at this boundary, in order: JSON (ParseError), envelope
 * (InvalidRequest), method name (MethodNotFound), params against the method's schema
 * (InvalidParams with the zod issues). Handlers therefore only ever see parsed params, and nothing
 * a client sends reaches them otherwise. A handler that throws an `RpcError` answers with its code;
 * any other exception is answered InternalError with its message, logged, and never escapes.
 *
 * LSP lifecycle: requests before `initialize` get ServerNotInitialized; after `shutdown` only `exit`
 * is accepted; `exit` closes the connection. Shutting one connection down never stops the server or
 * its runs: other editors may be watching them.
 */
import { z } from 'zod';
import {
  ErrorCodes,
  notificationMessageSchema,
  requestIdSchema,
  requestMessageSchema,
  RpcError,
  type RequestId,
  type ResponseError,
} from '../protocol/json-rpc.ts';
import {
  clientNotifications,
  clientRequests,
  serverNotifications,
  type ClientNotificationMethod,
  type ClientNotificationParams,
  type ClientRequestMethod,
  type RequestParams,
  type RequestResult,
  type ServerNotificationMethod,
  type ServerNotificationParams,
} from '../protocol/methods.ts';

/** What a request handler gets besides its params. */
export interface RequestContext {
  /** Aborted by `$/cancelRequest` for this request, or when the connection closes. */
  readonly signal: AbortSignal;
  /** Reports `$/progress` when the client passed a `workDoneToken`; a no-op otherwise. */
  readonly progress: ProgressReporter;
  readonly connection: Connection;
}

export interface ProgressReporter {
  begin(title: string, message?: string): void;
  report(message: string, percentage?: number): void;
  end(message?: string): void;
}

/**
 * A result already serialised as JSON text (by the query thread, off the event loop): the
 * connection splices it into its answer as is. `T` is the result it stands for, so handler tables
 * stay typed.
 */
export class SerializedResult<T> {
  declare private readonly stands: T;
  constructor(readonly json: string) {}
}

type Answer<M extends ClientRequestMethod> = RequestResult<M> | SerializedResult<RequestResult<M>>;
export type RequestHandlers = { readonly [M in ClientRequestMethod]: (params: RequestParams<M>, ctx: RequestContext) => Promise<Answer<M>> | Answer<M> };
export type NotificationHandlers = { readonly [M in ClientNotificationMethod]: (params: ClientNotificationParams<M>, connection: Connection) => void };

/** The socket side, as the connection needs it. */
export interface FrameSink {
  send(text: string): void;
  close(code: number, reason: string): void;
  /** Bytes queued for sending and not yet written to the socket. */
  bufferedAmount(): number;
}

export interface ConnectionOptions {
  readonly id: number;
  readonly requests: RequestHandlers;
  readonly notifications: NotificationHandlers;
  readonly log: (line: string) => void;
  /**
   * A client that stops reading must not make the server buffer without bound: past this many queued
   * bytes the connection is closed (1008) and the client reconnects and re-queries.
   */
  readonly maxBufferedBytes?: number;
}

type Phase = 'new' | 'initializing' | 'initialized' | 'shutdown' | 'closed';

const DEFAULT_MAX_BUFFERED = 32 * 1024 * 1024;
/** zod issues sent back with InvalidParams; capped so a huge bad payload gets a bounded answer. */
const MAX_ISSUES = 20;

const hasOwn = <T extends object>(table: T, key: string): key is Extract<keyof T, string> => Object.hasOwn(table, key);

function issuesOf(error: z.ZodError): Array<{ path: string; message: string }> {
  return error.issues.slice(0, MAX_ISSUES).map((i) => ({ path: i.path.map(String).join('.'), message: i.message }));
}

export class Connection {
  private phase: Phase = 'new';
  private readonly inFlight = new Map<RequestId, AbortController>();
  /** The client's name from `initialize`, for logs. */
  clientName = 'client';
  /**
   * Whether the client wants `run/*` notifications: Troupe clients (which send a protocol version
   * at `initialize`) do; a plain language client, which would only drop them, does not.
   */
  receivesRunEvents = false;

  constructor(
    private readonly sink: FrameSink,
    private readonly o: ConnectionOptions,
  ) {}

  get id(): number {
    return this.o.id;
  }

  get isOpen(): boolean {
    return this.phase !== 'closed';
  }

  /** Whether `initialize` has been answered; notifications go only to initialized clients. */
  get isInitialized(): boolean {
    return this.phase === 'initialized';
  }

  /** Sends a server notification; silently dropped once the connection is closed. */
  notify<M extends ServerNotificationMethod>(method: M, params: ServerNotificationParams<M>): void {
    // Outbound params are produced by the server from parsed data; the types check them statically.
    void serverNotifications[method];
    this.write({ jsonrpc: '2.0', method, params });
  }

  /** Handles one inbound text frame. Never throws. */
  receive(text: string): void {
    let json: unknown;
    try {
      json = JSON.parse(text);
    } catch (e) {
      this.respondError(null, { code: ErrorCodes.ParseError, message: `not valid JSON: ${e instanceof Error ? e.message : String(e)}` });
      return;
    }
    if (Array.isArray(json)) {
      // JSON-RPC batches exist but LSP does not use them; refuse clearly rather than half-support them.
      this.respondError(null, { code: ErrorCodes.InvalidRequest, message: 'batch requests are not supported: send one message per frame' });
      return;
    }
    const req = requestMessageSchema.safeParse(json);
    if (req.success) {
      void this.handleRequest(req.data.id, req.data.method, req.data.params);
      return;
    }
    const note = notificationMessageSchema.safeParse(json);
    if (note.success && !(typeof json === 'object' && json !== null && 'id' in json)) {
      this.handleNotification(note.data.method, note.data.params);
      return;
    }
    // Echo the id when one can be read, so the client can match the error to its request.
    const rawId = typeof json === 'object' && json !== null && 'id' in json ? requestIdSchema.safeParse((json as { id: unknown }).id) : null;
    const detail = req.error.issues.map((i) => `${i.path.map(String).join('.') || '(message)'}: ${i.message}`).join('; ');
    this.respondError(rawId?.success ? rawId.data : null, { code: ErrorCodes.InvalidRequest, message: `not a JSON-RPC 2.0 request or notification: ${detail}` });
  }

  /** The socket closed: abort what is in flight (handlers that watch their signal stop). */
  closed(): void {
    if (this.phase === 'closed') return;
    this.phase = 'closed';
    for (const c of this.inFlight.values()) c.abort(new Error('connection closed'));
    this.inFlight.clear();
  }

  /** Closes the socket with a reason the client sees. */
  close(code: number, reason: string): void {
    if (this.phase === 'closed') return;
    this.sink.close(code, reason);
    this.closed();
  }

  private async handleRequest(id: RequestId, method: string, rawParams: unknown): Promise<void> {
    if (!hasOwn(clientRequests, method)) {
      this.respondError(id, { code: ErrorCodes.MethodNotFound, message: `unknown method '${method}'` });
      return;
    }
    if ((this.phase === 'new' || this.phase === 'initializing') && method !== 'initialize') {
      this.respondError(id, { code: ErrorCodes.ServerNotInitialized, message: `'${method}' before 'initialize': send initialize first` });
      return;
    }
    if (method === 'initialize' && this.phase !== 'new') {
      this.respondError(id, { code: ErrorCodes.InvalidRequest, message: "'initialize' was already sent on this connection" });
      return;
    }
    if (this.phase === 'shutdown') {
      // LSP 3.17: requests after shutdown get InvalidRequest.
      this.respondError(id, { code: ErrorCodes.InvalidRequest, message: `'${method}' after 'shutdown': only 'exit' is accepted` });
      return;
    }
    if (this.inFlight.has(id)) {
      this.respondError(id, { code: ErrorCodes.InvalidRequest, message: `request id ${JSON.stringify(id)} is already in flight` });
      return;
    }
    const parsed = clientRequests[method].params.safeParse(rawParams);
    if (!parsed.success) {
      const issues = issuesOf(parsed.error);
      const summary = issues.map((i) => `${i.path || '(params)'}: ${i.message}`).join('; ');
      this.respondError(id, { code: ErrorCodes.InvalidParams, message: `invalid params for '${method}': ${summary}`, data: { issues } });
      return;
    }
    const controller = new AbortController();
    this.inFlight.set(id, controller);
    // Lifecycle changes take effect when the request is read, not when it is answered: frames that
    // arrive in the same chunk (initialize twice, or shutdown then a request) are judged in order.
    if (method === 'initialize') this.phase = 'initializing';
    if (method === 'shutdown') this.phase = 'shutdown';
    const token = typeof parsed.data === 'object' && parsed.data !== null && 'workDoneToken' in parsed.data ? (parsed.data.workDoneToken as string | number | undefined) : undefined;
    const ctx: RequestContext = { signal: controller.signal, progress: this.progressReporter(token), connection: this };
    try {
      // The table is exhaustive over the methods, so indexing it with a checked method name is sound;
      // TypeScript cannot correlate the method with its params type through the union, hence the cast.
      const handler = this.o.requests[method] as (p: unknown, c: RequestContext) => Promise<unknown> | unknown;
      // A handler that finished despite a cancellation answers with its result (LSP allows it):
      // its side effects (a run started) happened, and the client must learn of them.
      const result = await handler(parsed.data, ctx);
      if (method === 'initialize' && this.phase === 'initializing') this.phase = 'initialized';
      if (result instanceof SerializedResult) this.writeText(`{"jsonrpc":"2.0","id":${JSON.stringify(id)},"result":${result.json}}`);
      else this.write({ jsonrpc: '2.0', id, result: result === undefined ? null : result });
    } catch (e) {
      if (method === 'initialize' && this.phase === 'initializing') this.phase = 'new';
      if (e instanceof RpcError) {
        this.respondError(id, e.toResponseError());
      } else if (controller.signal.aborted) {
        this.respondError(id, { code: ErrorCodes.RequestCancelled, message: `'${method}' was cancelled` });
      } else {
        const message = e instanceof Error ? e.message : String(e);
        this.o.log(`connection ${this.id}: '${method}' failed: ${e instanceof Error && e.stack ? e.stack : message}`);
        this.respondError(id, { code: ErrorCodes.InternalError, message: `'${method}' failed: ${message}` });
      }
    } finally {
      this.inFlight.delete(id);
    }
  }

  private handleNotification(method: string, rawParams: unknown): void {
    // Notifications get no answer, even when wrong (JSON-RPC 2.0 §4.1); unknown `$/` ones are
    // optional by LSP's rule and ignored quietly, the rest are logged so a buggy client is visible.
    if (!hasOwn(clientNotifications, method)) {
      if (!method.startsWith('$/')) this.o.log(`connection ${this.id}: ignored unknown notification '${method}'`);
      return;
    }
    if ((this.phase === 'new' || this.phase === 'initializing') && method !== 'exit') return;
    if (this.phase === 'shutdown' && method !== 'exit') return;
    const parsed = clientNotifications[method].params.safeParse(rawParams);
    if (!parsed.success) {
      this.o.log(`connection ${this.id}: ignored '${method}' with invalid params: ${issuesOf(parsed.error).map((i) => `${i.path}: ${i.message}`).join('; ')}`);
      return;
    }
    try {
      const handler = this.o.notifications[method] as (p: unknown, c: Connection) => void;
      handler(parsed.data, this);
    } catch (e) {
      this.o.log(`connection ${this.id}: '${method}' failed: ${e instanceof Error && e.stack ? e.stack : String(e)}`);
    }
  }

  /**
   * `$/cancelRequest`: aborts the request's signal. A handler that watches it stops and is answered
   * RequestCancelled; one that finishes anyway answers with its result.
   */
  cancel(id: RequestId): void {
    this.inFlight.get(id)?.abort(new RpcError(ErrorCodes.RequestCancelled, 'cancelled by the client'));
  }

  private progressReporter(token: string | number | undefined): ProgressReporter {
    if (token === undefined) return { begin() {}, report() {}, end() {} };
    const send = (value: ServerNotificationParams<'$/progress'>['value']) => this.notify('$/progress', { token, value });
    return {
      begin: (title, message) => send(message === undefined ? { kind: 'begin', title } : { kind: 'begin', title, message }),
      report: (message, percentage) => send(percentage === undefined ? { kind: 'report', message } : { kind: 'report', message, percentage }),
      end: (message) => send(message === undefined ? { kind: 'end' } : { kind: 'end', message }),
    };
  }

  private respondError(id: RequestId | null, error: ResponseError): void {
    this.write({ jsonrpc: '2.0', id, error });
  }

  private write(message: object): void {
    if (this.phase === 'closed') return;
    this.writeText(JSON.stringify(message));
  }

  private writeText(text: string): void {
    if (this.phase === 'closed') return;
    const max = this.o.maxBufferedBytes ?? DEFAULT_MAX_BUFFERED;
    if (this.sink.bufferedAmount() > max) {
      this.o.log(`connection ${this.id} (${this.clientName}): closed, ${this.sink.bufferedAmount()} bytes unread (the client stopped reading)`);
      this.close(1008, `client is not reading: more than ${max} bytes queued`);
      return;
    }
    this.sink.send(text);
  }
}
