/**
 * An error as a person reads it in a notification, a view or a webview banner: the server's own
 * words, without the protocol method the request went to (`run/resume: …`) or the JSON-RPC code
 * (`(code -32001)`), which say nothing to someone using the editor. The Troupe Server output keeps
 * the whole text for whoever needs it. Pure: unit tested.
 */
import { clientRequests } from '../../server/protocol/methods.ts';
import { RpcResponseError } from '../../server/protocol/rpc-client.ts';

const methodNames = Object.keys(clientRequests).sort((a, b) => b.length - a.length);

export function userMessage(e: unknown): string {
  let text = e instanceof Error ? e.message : String(e);
  if (e instanceof RpcResponseError) text = text.replace(/ \(code -?\d+\)$/, '');
  // RpcClient names the method first, on answers and on results that do not parse.
  for (const method of methodNames) {
    if (text.startsWith(`${method}: `)) {
      text = text.slice(method.length + 2);
      break;
    }
  }
  return text;
}
