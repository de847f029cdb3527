/**
 * What every panel does with the server connection: tells its webview whether a server is
 * connected (a `connection` message, which the webview's banner shows), keeps the panel's
 * notification listeners on the live client (moved to the new client after a reconnection, none
 * while disconnected) and lets the panel catch up after a change. Imports nothing of vscode at
 * run time, so it is tested against a real RpcClient.
 */
import type { Disposable, RpcClient } from '../../../server/protocol/rpc-client.ts';
import type { HostStatus } from '../../../webview/src/messages.ts';
import type { ServerClient } from '../server-client.ts';

export interface ConnectionFollowing {
  /** Posts to the webview (the panel's own `post`, which skips a hidden webview). */
  readonly post: (m: Extract<HostStatus, { type: 'connection' }>) => void;
  /** The panel's listeners on a connected client; disposed when that client goes. */
  readonly listen?: (client: RpcClient) => Disposable[];
  /** After each change (not the first attach), with the new client or undefined, once its listeners are on. */
  readonly changed?: (client: RpcClient | undefined) => void;
}

/** Follows `server`'s connection from now on (attaching to the live client at once) until disposed. */
export function followConnection(server: ServerClient, o: ConnectionFollowing): Disposable {
  let listeners: Disposable[] = [];
  const drop = () => {
    for (const l of listeners) l.dispose();
    listeners = [];
  };
  const attach = (client: RpcClient | undefined) => {
    drop();
    o.post({ type: 'connection', connected: client !== undefined });
    if (client && o.listen) listeners = o.listen(client);
  };
  attach(server.client);
  const subscription = server.onDidChangeConnection((client) => {
    attach(client);
    o.changed?.(client);
  });
  return {
    dispose: () => {
      subscription.dispose();
      drop();
    },
  };
}
