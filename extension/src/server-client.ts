/**
 * What the extension's features need from the connection to the training server: the typed
 * JSON-RPC client while connected, and an event on every (re)connection. Features take this
 * interface rather than the connection manager, so they can be written and tested on their own.
 */
import type * as vscode from 'vscode';
import type { RpcClient } from '../../server/protocol/rpc-client.ts';

export interface ServerClient {
  /** The live client, or undefined while no server is connected. */
  readonly client: RpcClient | undefined;
  /** Fires with the new client after every (re)connection, and with undefined when the connection drops. */
  readonly onDidChangeConnection: vscode.Event<RpcClient | undefined>;
  /** The live client, or an error naming what to do ("server not running: run Troupe: Connect to Server"). */
  require(): RpcClient;
}

/**
 * How long a request made before the first connection waits for it: after a window reload,
 * restored `troupe:` tabs ask for their text while the server is still starting.
 */
export const FIRST_CONNECTION_TIMEOUT_MS = 60_000;

/**
 * The live client, or the next one to connect within `timeoutMs`; after that, `require()`'s error
 * (which says what to do).
 */
export function whenConnected(server: ServerClient, timeoutMs = FIRST_CONNECTION_TIMEOUT_MS): Promise<RpcClient> {
  const live = server.client;
  if (live) return Promise.resolve(live);
  return new Promise((resolve, reject) => {
    const subscription = server.onDidChangeConnection((client) => {
      if (client === undefined) return;
      clearTimeout(timer);
      subscription.dispose();
      resolve(client);
    });
    const timer = setTimeout(() => {
      subscription.dispose();
      try {
        resolve(server.require());
      } catch (e) {
        reject(e);
      }
    }, timeoutMs);
  });
}
