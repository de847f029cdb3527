/**
 * The state of the connection to the training server, as the status bar, the Runs view and the
 * manifest's `when` clauses (through the `troupe.connection` context key, which holds `kind`) see
 * it. "Not running" always carries a reason, so the user is told why instead of seeing nothing.
 */

/** Where the server's address came from. */
export type EndpointOrigin =
  /** This window started `troupe serve` for the workspace. */
  | 'started'
  /** A live server was found in the workspace's `.troupe/server.json`. */
  | 'found'
  /** The `troupe.server.url` setting. */
  | 'configured'
  /** Given in "Troupe: Connect to Server" for this session. */
  | 'session';

/** A server to connect to. */
export interface ServerEndpoint {
  /** WebSocket URL. */
  readonly url: string;
  /** Bearer token. */
  readonly token: string;
  readonly origin: EndpointOrigin;
}

export type ConnectionState =
  | { readonly kind: 'idle' }
  | { readonly kind: 'starting'; readonly detail: string }
  | { readonly kind: 'connecting'; readonly url: string }
  | { readonly kind: 'connected'; readonly endpoint: ServerEndpoint; readonly serverVersion: string }
  | { readonly kind: 'notRunning'; readonly reason: string; /** Set while a reconnection is scheduled. */ readonly retryInMs?: number };


const originText: Record<EndpointOrigin, string> = {
  started: 'started by this window',
  found: "the workspace's running server",
  configured: 'from troupe.server.url',
  session: 'connected by hand',
};

/** One line for tooltips and the Runs view's message. */
export function describeConnection(s: ConnectionState): string {
  switch (s.kind) {
    case 'idle':
      return 'Troupe server: not connected yet';
    case 'starting':
      return `Starting the Troupe server: ${s.detail}`;
    case 'connecting':
      return `Connecting to the Troupe server at ${s.url}`;
    case 'connected':
      return `Connected to Troupe server ${s.serverVersion} at ${s.endpoint.url} (${originText[s.endpoint.origin]})`;
    case 'notRunning': {
      const retry = s.retryInMs === undefined ? '' : ` (retrying in ${Math.max(1, Math.round(s.retryInMs / 1000))} s)`;
      return `Troupe server not running: ${s.reason}${retry}`;
    }
  }
}
