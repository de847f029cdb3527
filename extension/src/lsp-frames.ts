/**
 * Which frames from the server reach the config language client (it has its own WebSocket). The
 * server sends run notifications (`run/*`) only to clients that sent a Troupe protocol version at
 * `initialize`, which the language client does not; a server of an older protocol minor broadcast
 * them to every client, and the language client would log each as unhandled, so any that arrive
 * are still dropped here. Everything else must be a well-formed JSON-RPC message.
 */
import { notificationMessageSchema, requestMessageSchema, responseMessageSchema } from '../../server/protocol/json-rpc.ts';

/** A JSON-RPC message as parsed at the boundary (a request, a notification or a response). */
export type JsonRpcFrame = { readonly jsonrpc: '2.0' } & Record<string, unknown>;

export type FrameVerdict = { readonly kind: 'forward'; readonly message: JsonRpcFrame } | { readonly kind: 'drop'; readonly reason: string };

/** Method prefixes of the Troupe notifications that are not for the language client. */
const notForLanguageClient = ['run/'];

export function classifyLanguageFrame(text: string): FrameVerdict {
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch {
    return { kind: 'drop', reason: `not JSON: ${text.slice(0, 120)}` };
  }
  const note = notificationMessageSchema.safeParse(json);
  const request = requestMessageSchema.safeParse(json);
  if (note.success && !request.success) {
    if (notForLanguageClient.some((p) => note.data.method.startsWith(p))) return { kind: 'drop', reason: `${note.data.method} is not for the language client` };
    return { kind: 'forward', message: note.data };
  }
  if (request.success) return { kind: 'forward', message: request.data };
  const response = responseMessageSchema.safeParse(json);
  if (response.success) return { kind: 'forward', message: response.data };
  return { kind: 'drop', reason: `not a JSON-RPC message: ${text.slice(0, 120)}` };
}
