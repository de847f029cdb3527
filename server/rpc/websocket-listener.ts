/**
 * The server's socket: an HTTP server that only upgrades to WebSocket, and only for clients that
 * prove they are the user's own tools. The one module that imports `ws` on the server side.
 *
 * The upgrade is refused before any JSON-RPC is spoken:
 *   - 403 when the request carries an `Origin` header. Browsers always send one on WebSocket
 *     upgrades and Node clients (the extension host, the CLI, tests) do not, so this keeps any web
 *     page the user visits from driving the local trainer, token or not.
 *   - 401 when `Authorization: Bearer <token>` is missing or wrong (compared in constant time).
 * Frames larger than `maxPayloadBytes` close the socket with 1009 ("Max payload size exceeded").
 */
import { timingSafeEqual } from 'node:crypto';
import { createServer, type IncomingMessage, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Duplex } from 'node:stream';
import { WebSocketServer, type WebSocket } from 'ws';

export interface ListenOptions {
  readonly host: string;
  /** 0 picks a free port. */
  readonly port: number;
  readonly token: string;
  readonly maxPayloadBytes: number;
  readonly log: (line: string) => void;
  readonly onConnection: (socket: WebSocket, request: IncomingMessage) => void;
}

export interface Listener {
  /** `ws://host:port`. */
  readonly url: string;
  readonly port: number;
  /** Stops accepting, closes every socket with 1001 and the HTTP server. */
  close(): Promise<void>;
}

/** Why an upgrade request is refused, or null when it is allowed. */
export function refuseUpgrade(req: IncomingMessage, token: string): { status: 401 | 403; reason: string } | null {
  if (req.headers.origin !== undefined) {
    return { status: 403, reason: `browser origin ${JSON.stringify(req.headers.origin)} refused: a web page may not drive a local trainer` };
  }
  const header = req.headers.authorization;
  const match = header === undefined ? null : /^Bearer (\S+)$/.exec(header);
  if (!match) return { status: 401, reason: 'missing "Authorization: Bearer <token>" (the token is in the file named by .troupe/server.json)' };
  const given = Buffer.from(match[1]!);
  const expected = Buffer.from(token);
  if (given.length !== expected.length || !timingSafeEqual(given, expected)) return { status: 401, reason: 'wrong token' };
  return null;
}

function reject(socket: Duplex, status: 401 | 403, reason: string): void {
  const title = status === 401 ? 'Unauthorized' : 'Forbidden';
  const body = `${reason}\n`;
  // The client may already be gone: the write's error is consumed by the upgrade handler's listener.
  socket.write(`HTTP/1.1 ${status} ${title}\r\nConnection: close\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: ${Buffer.byteLength(body)}\r\n\r\n${body}`);
  socket.destroy();
}

export function isLoopback(host: string): boolean {
  return host === 'localhost' || host === '::1' || host === '[::1]' || /^127\.\d+\.\d+\.\d+$/.test(host);
}

export async function listen(o: ListenOptions): Promise<Listener> {
  const wss = new WebSocketServer({ noServer: true, maxPayload: o.maxPayloadBytes, clientTracking: true });
  const http: Server = createServer((_req, res) => {
    res.writeHead(426, { 'Content-Type': 'text/plain; charset=utf-8', Upgrade: 'websocket' });
    res.end('Troupe training server: connect with a WebSocket (JSON-RPC 2.0) and a bearer token.\n');
  });
  http.on('upgrade', (req, socket, head) => {
    // Node hands the raw socket over without an error listener: a client that resets the
    // connection mid-handshake would otherwise raise an unhandled 'error' and kill the server.
    const onSocketError = (e: Error) => o.log(`connection from ${req.socket.remoteAddress ?? '?'} failed during the upgrade: ${e.message}`);
    socket.on('error', onSocketError);
    const refusal = refuseUpgrade(req, o.token);
    if (refusal) {
      o.log(`refused a connection from ${req.socket.remoteAddress ?? '?'}: ${refusal.status} ${refusal.reason}`);
      reject(socket, refusal.status, refusal.reason);
      return;
    }
    wss.handleUpgrade(req, socket, head, (ws) => {
      // From here ws owns the socket and reports its errors on the WebSocket.
      socket.off('error', onSocketError);
      o.onConnection(ws, req);
    });
  });
  // A client error on the raw socket (a half-open connection, garbage before the upgrade) must not
  // become an unhandled 'error' event on the server.
  http.on('clientError', (_err, socket) => socket.destroy());

  await new Promise<void>((resolve, reject) => {
    http.once('error', reject);
    http.listen(o.port, o.host, () => {
      http.off('error', reject);
      resolve();
    });
  });
  const address = http.address() as AddressInfo;
  const hostForUrl = address.family === 'IPv6' ? `[${address.address}]` : address.address;
  return {
    url: `ws://${hostForUrl}:${address.port}`,
    port: address.port,
    close: async () => {
      for (const ws of wss.clients) ws.close(1001, 'server shutting down');
      await new Promise<void>((resolve) => wss.close(() => resolve()));
      // Sockets that do not finish the close handshake promptly are cut.
      const timer = setTimeout(() => {
        for (const ws of wss.clients) ws.terminate();
        http.closeAllConnections();
      }, 2000);
      await new Promise<void>((resolve) => http.close(() => resolve()));
      clearTimeout(timer);
    },
  };
}
