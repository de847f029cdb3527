/**
 * Finding the workspace's training server, as pure functions: reading `.troupe/server.json`,
 * recognising the line `troupe serve` prints when it listens, choosing the command that starts it,
 * and checking URLs and protocol versions. `server-process.ts` does the file system and process
 * work around them.
 */
import { join } from 'node:path';
import { z } from 'zod';
import { SERVER_FILE_RELATIVE, serverFileSchema, type ServerFile } from '../../server/protocol/server-file.ts';

export { SERVER_FILE_RELATIVE, type ServerFile } from '../../server/protocol/server-file.ts';

export type Parsed<T> = { readonly ok: true; readonly value: T } | { readonly ok: false; readonly reason: string };

/** Parses the text of a server file; the reason names the file's problem. */
export function parseServerFile(text: string): Parsed<ServerFile> {
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch {
    return { ok: false, reason: `${SERVER_FILE_RELATIVE} is not JSON` };
  }
  const parsed = serverFileSchema.safeParse(json);
  if (!parsed.success) return { ok: false, reason: `${SERVER_FILE_RELATIVE} is malformed: ${z.prettifyError(parsed.error)}` };
  return { ok: true, value: parsed.data };
}

/**
 * The URL in the line `troupe serve` prints once it listens ("troupe server listening on
 * ws://127.0.0.1:PORT"), or null for any other line. That line on stdout is the server's contract
 * with whoever started it (server/cli/serve-command.ts).
 */
export function parseListeningLine(line: string): string | null {
  const m = /^troupe server listening on (wss?:\/\/\S+)\s*$/.exec(line);
  return m ? m[1]! : null;
}

/** The major part of a `major.minor` protocol version, or null if it has another form. */
export function protocolMajor(version: string): number | null {
  const m = /^(\d+)\.\d+$/.exec(version);
  return m ? Number(m[1]) : null;
}

/** Why a server's protocol version cannot be spoken by this client, or null when it can (same major). */
export function protocolMismatch(server: string, client: string): string | null {
  const s = protocolMajor(server);
  if (s !== null && s === protocolMajor(client)) return null;
  return `the server speaks Troupe protocol ${server} and this extension ${client}: update whichever is older`;
}

/** Whether a WebSocket URL points at this machine's loopback interface. */
export function isLoopbackUrl(url: string): boolean {
  let host: string;
  try {
    host = new URL(url).hostname;
  } catch {
    return false;
  }
  return host === 'localhost' || host === '[::1]' || host === '::1' || /^127\.\d+\.\d+\.\d+$/.test(host);
}

/**
 * A user-given server address as a WebSocket URL: `ws:`/`wss:` as they are, `http:`/`https:`
 * mapped to them (what a port-forwarding panel shows), and a bare `host:port` taken as `ws:`.
 */
export function normalizeServerUrl(input: string): Parsed<string> {
  const text = input.trim();
  if (text === '') return { ok: false, reason: 'the server URL is empty' };
  const withScheme = /^[a-z][a-z0-9+.-]*:\/\//i.test(text) ? text : `ws://${text}`;
  let url: URL;
  try {
    url = new URL(withScheme);
  } catch {
    return { ok: false, reason: `"${input}" is not a URL (expected ws://HOST:PORT)` };
  }
  const schemes: Record<string, string> = { 'ws:': 'ws:', 'wss:': 'wss:', 'http:': 'ws:', 'https:': 'wss:' };
  const scheme = schemes[url.protocol];
  if (scheme === undefined) return { ok: false, reason: `"${input}" uses ${url.protocol}; the Troupe server speaks ws: or wss:` };
  url.protocol = scheme;
  return { ok: true, value: url.toString().replace(/\/$/, '') };
}

/** Expands `${workspaceFolder}` and a leading `~` in a setting's value. */
export function expandVariables(value: string, workspace: string | undefined, home: string): string {
  let out = value.replace(/^~(?=$|[\\/])/, home);
  if (workspace !== undefined) out = out.replaceAll('${workspaceFolder}', workspace);
  return out;
}

/** A process to spawn: the program, its arguments, and whether it needs a shell (Windows .cmd shims). */
export interface CommandLine {
  readonly command: string;
  readonly args: readonly string[];
  readonly shell: boolean;
}

export interface ServeCommandOptions {
  /** The `troupe.server.command` setting: program and arguments, or empty to find troupe in the workspace. */
  readonly configured: readonly string[];
  /** Absolute path of the workspace folder to serve. */
  readonly workspace: string;
  readonly home: string;
  readonly platform: NodeJS.Platform;
  readonly exists: (path: string) => boolean;
  /** The Troupe clone the extension was built from (`npm run package` records it), if known. */
  readonly clone?: string | undefined;
}

/**
 * The command that runs `troupe serve` for a workspace.
 *
 * A configured command runs the Troupe CLI; `serve --workspace <folder>` is appended, or only
 * `--workspace <folder>` when the command already says `serve` (so `serve --max-runs 2` can be
 * configured). Without one: the workspace's installed package (`node_modules/.bin/troupe`), else
 * the CLI source when the workspace is the Troupe repository itself, else the CLI of the clone the
 * extension was built from (so a fresh clone's `npm ci && npm run package` serves any folder of
 * configs with no setting). All run on the `node` found
 * on PATH, never on the editor's own runtime: the server's native modules (SQLite, ONNX Runtime)
 * are built for Node, and VS Code's Electron has another ABI.
 */
export function serveCommandLine(o: ServeCommandOptions): Parsed<CommandLine> {
  const windows = o.platform === 'win32';
  const serveArgs = (given: readonly string[]): string[] => {
    const args = given.includes('serve') ? [...given] : [...given, 'serve'];
    return args.includes('--workspace') ? args : [...args, '--workspace', o.workspace];
  };
  if (o.configured.length > 0) {
    const [command, ...args] = o.configured.map((a) => expandVariables(a, o.workspace, o.home));
    if (command === undefined || command.trim() === '') return { ok: false, reason: 'troupe.server.command is set but its first entry (the program) is empty' };
    // A .cmd/.bat shim cannot be spawned without a shell on Windows.
    return { ok: true, value: { command, args: serveArgs(args), shell: windows && /\.(cmd|bat)$/i.test(command) } };
  }
  const installed = join(o.workspace, 'node_modules', '.bin', windows ? 'troupe.cmd' : 'troupe');
  if (o.exists(installed)) return { ok: true, value: { command: installed, args: serveArgs([]), shell: windows } };
  const repoCli = join(o.workspace, 'server', 'cli', 'troupe.mjs');
  if (o.exists(repoCli)) return { ok: true, value: { command: 'node', args: serveArgs([repoCli]), shell: false } };
  const cloneCli = o.clone === undefined ? undefined : join(o.clone, 'server', 'cli', 'troupe.mjs');
  if (cloneCli !== undefined && o.exists(cloneCli)) return { ok: true, value: { command: 'node', args: serveArgs([cloneCli]), shell: false } };
  return {
    ok: false,
    reason:
      `no Troupe CLI found for ${o.workspace} (no node_modules/.bin/troupe there${cloneCli === undefined ? '' : `, and the clone this extension was built from is gone`}): ` +
      'set troupe.server.command to ["node", "<your Troupe clone>/server/cli/troupe.mjs"], or connect to a running server with "Troupe: Connect to Server"',
  };
}

/** A command line as one string for the log, quoting arguments that contain spaces. */
export function formatCommandLine(c: CommandLine): string {
  return [c.command, ...c.args].map((a) => (/[\s"]/.test(a) ? JSON.stringify(a) : a)).join(' ');
}

/**
 * Why a server this window started is gone, for the Runs view and the status bar. A server killed
 * by a signal said nothing about it: its last stderr line is whatever it logged before (a step's
 * progress), which would read as the cause, so it is quoted only for a failing exit code.
 */
export function serverExitReason(pid: number | undefined, code: number | null, signal: string | null, lastStderrLine: string | undefined): string {
  const who = `troupe serve (pid ${pid ?? '?'})`;
  if (signal !== null) return `${who} was killed (${signal})`;
  return `${who} exited (code ${code ?? '?'})${code !== 0 && lastStderrLine !== undefined ? `: ${lastStderrLine}` : ''}`;
}
