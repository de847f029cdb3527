/** What the extension's unit tests share. */
import type { RpcClient } from '../../server/protocol/rpc-client.ts';
import type { ServerClient } from './server-client.ts';

/**
 * A ServerClient whose connection the test sets (the connection manager's event, without a
 * socket); counts its listeners to check they are removed.
 */
export function fakeServer(): ServerClient & { connect(c: RpcClient | undefined): void; readonly listeners: number } {
  let client: RpcClient | undefined;
  const listeners = new Set<(c: RpcClient | undefined) => void>();
  return {
    get client() {
      return client;
    },
    get listeners() {
      return listeners.size;
    },
    onDidChangeConnection: (listener) => {
      listeners.add(listener);
      return { dispose: () => listeners.delete(listener) };
    },
    require() {
      if (client) return client;
      throw new Error('server not running');
    },
    connect(c) {
      client = c;
      for (const l of [...listeners]) l(c);
    },
  };
}
