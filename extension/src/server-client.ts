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
