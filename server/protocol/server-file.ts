/**
 * How a client finds a running server: `<workspace>/.troupe/server.json`, written by
 * `troupe serve` and read by the extension (and anyone else who wants to connect).
 */
import { z } from 'zod';

/** Where the server file lives, relative to the workspace. */
export const SERVER_FILE_RELATIVE = '.troupe/server.json';

export const serverFileSchema = z.object({
  /** WebSocket URL, `ws://127.0.0.1:PORT`. */
  url: z.string(),
  /** Server process id. */
  pid: z.int().positive(),
  /** Troupe protocol version the server speaks. */
  protocolVersion: z.string(),
  /** Absolute path of the file holding the bearer token (mode 0600). */
  tokenFile: z.string(),
  /** The workspace served. */
  workspace: z.string(),
  /** Start time, ISO 8601. */
  startedAt: z.string(),
});
export type ServerFile = z.infer<typeof serverFileSchema>;
