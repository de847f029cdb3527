/**
 * JSON-RPC 2.0 envelopes and error codes, with the Language Server Protocol's conventions
 * (https://www.jsonrpc.org/specification, LSP 3.17 "Base Protocol"): one message per WebSocket
 * text frame, requests carry an `id`, notifications do not, a response carries `result` or `error`.
 *
 * Envelopes are parsed in two stages: first the envelope (this file), then the params of the named
 * method (methods.ts). So a frame with a good envelope and bad params gets InvalidParams naming the
 * bad field, while a frame that is not even an envelope gets InvalidRequest.
 */
import { z } from 'zod';

/** Request ids: LSP allows integers and strings. */
export const requestIdSchema = z.union([z.int(), z.string()]);
export type RequestId = z.infer<typeof requestIdSchema>;

/** A request: a method name, params, and an id the response echoes. */
export const requestMessageSchema = z.object({
  jsonrpc: z.literal('2.0'),
  id: requestIdSchema,
  method: z.string().min(1),
  params: z.unknown().optional(),
});

/** A notification: a method name and params; nothing answers it. */
export const notificationMessageSchema = z.object({
  jsonrpc: z.literal('2.0'),
  method: z.string().min(1),
  params: z.unknown().optional(),
});

/** The error object of a failed response. */
export const responseErrorSchema = z.object({
  /** One of `ErrorCodes`. */
  code: z.int(),
  /** A sentence naming what was wrong. */
  message: z.string(),
  /** Details, e.g. the zod issues of InvalidParams or the config issues of a refused run. */
  data: z.unknown().optional(),
});
export type ResponseError = z.infer<typeof responseErrorSchema>;

/** A response: `result` on success, `error` on failure. `id` is null when the request's id could not be read. */
export const responseMessageSchema = z.union([
  z.object({ jsonrpc: z.literal('2.0'), id: requestIdSchema.nullable(), result: z.unknown() }),
  z.object({ jsonrpc: z.literal('2.0'), id: requestIdSchema.nullable(), error: responseErrorSchema }),
]);

/**
 * Error codes. The first block is JSON-RPC's and LSP's; application codes live in −32000…−32099
 * (LSP's own −32000-range codes, −32002 and −32800…−32803, are kept).
 */
export const ErrorCodes = {
  ParseError: -32700,
  InvalidRequest: -32600,
  MethodNotFound: -32601,
  InvalidParams: -32602,
  InternalError: -32603,
  /** LSP: a request other than `initialize` arrived before it. */
  ServerNotInitialized: -32002,
  /** LSP: the request was cancelled by `$/cancelRequest`. */
  RequestCancelled: -32800,
  /** The named run does not exist. */
  UnknownRun: -32010,
  /** The run's state does not allow the operation (pausing a finished run, ...). */
  InvalidRunState: -32011,
  /** The experiment config is invalid; `data.issues` lists `{ path, message }` for every problem. */
  InvalidConfig: -32012,
  /** The named trajectory, checkpoint or document does not exist. */
  NotFound: -32013,
  /** The client's protocol version is incompatible with the server's. */
  IncompatibleProtocol: -32014,
  /** A file the request named could not be read or written. */
  FileError: -32016,
} as const;
export type ErrorCode = (typeof ErrorCodes)[keyof typeof ErrorCodes];

/**
 * The `data` of an InvalidConfig error: every problem of the config, each where it is. Clients
 * list the messages and put the cursor at the first problem's path.
 */
export const invalidConfigDataSchema = z.object({
  /** The file (or `inline config`) that was refused. */
  source: z.string(),
  issues: z.array(
    z.object({
      /** Dotted path of the culprit, e.g. `algorithm.branches`; empty for the whole file. */
      path: z.string(),
      /** The same path as segments, for locating it in the document. */
      segments: z.array(z.union([z.string(), z.number()])),
      /** What is wrong and what is allowed. */
      message: z.string(),
    }),
  ),
});
export type InvalidConfigData = z.infer<typeof invalidConfigDataSchema>;

/** An error a handler throws to answer with a specific code; anything else becomes InternalError. */
export class RpcError extends Error {
  override readonly name = 'RpcError';
  constructor(
    readonly code: ErrorCode,
    message: string,
    readonly data?: unknown,
  ) {
    super(message);
  }

  toResponseError(): ResponseError {
    return this.data === undefined ? { code: this.code, message: this.message } : { code: this.code, message: this.message, data: this.data };
  }
}
