/**
 * The server's rule for paths a client names (a config file to train, a checkpoint folder inside a
 * config, a folder to export into): each must lie inside the workspace or inside a folder the user
 * allowed (`troupe serve --allow-path DIR`), after symbolic links are resolved. A token holder
 * reaching a server started with `--host` must learn nothing about the rest of the machine: not
 * whether a file exists, not its first bytes in a JSON error.
 *
 * The check runs in two stages, so a refusal never depends on the file system outside:
 *   1. the path as written (made absolute, `..` folded) must be under a root; otherwise it is
 *      refused before anything is touched;
 *   2. its real path (the deepest existing ancestor through realpath, plus the part not created
 *      yet) must be under a root's real path, so a link inside the workspace cannot lead out.
 * The real path is what the caller then uses, so a link swapped after the check cannot redirect
 * the read or write (short of someone with write access to the workspace racing it, who could
 * write the file directly anyway).
 *
 * The CLI reading a path the user typed in a terminal is not a client and does not go through this.
 */
import { constants } from 'node:fs';
import { open, realpath, stat } from 'node:fs/promises';
import { dirname, isAbsolute, join, relative, resolve, sep, win32 } from 'node:path';
import { STORE_DIR_NAME } from '../store/index.ts';

/** A path a client named that the rule refuses, or a file it named that cannot be read; `field` is the request or config field that named it. */
export class ClientPathError extends Error {
  override readonly name = 'ClientPathError';
  readonly code = 'client-path';
  constructor(
    readonly field: string,
    /** The message without the leading field name, for a config issue that is placed at the field already. */
    readonly detail: string,
  ) {
    super(`${field} ${detail}`);
  }
}

export interface ConfinedPathOptions {
  /** What a relative path is relative to; default the workspace. */
  readonly base?: string;
  /** The path will be written: refused inside the store folder (`.troupe/`), which only the server writes. */
  readonly write?: boolean;
}

/** Largest config file the server reads for a client; a config is a few KiB. */
export const MAX_CLIENT_FILE_BYTES = 4 * 1024 * 1024;

const isInside = (root: string, path: string): boolean => {
  const rel = relative(root, path);
  return rel === '' || (rel !== '..' && !rel.startsWith(`..${sep}`) && !isAbsolute(rel));
};

/**
 * Whether a path, relative to the workspace's real path, lies in the store folder: compared the
 * way a case-insensitive file system (macOS, Windows) compares names, and with the trailing dots
 * and spaces Windows drops, so `.TROUPE/` and `.troupe./` are refused as `.troupe/` is (on such a
 * system they are the same folder; on Linux, no export needs such a name).
 */
const inStoreFolder = (workspace: string, path: string): boolean => {
  if (!isInside(workspace, path)) return false;
  const first = relative(workspace, path).split(sep)[0] ?? '';
  return first.replace(/[. ]+$/, '').toLowerCase() === STORE_DIR_NAME.toLowerCase();
};

/**
 * Why a path is in a form this platform cannot take as a folder name, or null. On POSIX a client
 * naming `C:\Windows\win.ini`, `\\server\share` or `exports\run` means a Windows path, which
 * resolve() would turn into one oddly named folder inside the workspace; on Windows a
 * drive-relative `C:file` depends on the process's current folder on that drive.
 */
function foreignPathForm(path: string): string | null {
  if (/^[A-Za-z]:/.test(path) && !(process.platform === 'win32' && win32.isAbsolute(path))) return 'starts with a drive letter: name a folder inside the workspace';
  if (process.platform !== 'win32' && path.includes('\\')) return `contains a backslash: paths on this server (${process.platform}) use / between folders, and a Windows path (drive letter, UNC \\\\server) is not a folder here`;
  return null;
}

const errnoCode = (e: unknown): string | undefined => (e instanceof Error && 'code' in e && typeof e.code === 'string' ? e.code : undefined);

/** Real path of `path`, whose tail may not exist yet: realpath of the deepest existing ancestor plus the rest. */
async function realPathOf(path: string): Promise<string> {
  const missing: string[] = [];
  let at = path;
  for (;;) {
    try {
      return join(await realpath(at), ...missing.reverse());
    } catch (e) {
      const code = errnoCode(e);
      const parent = dirname(at);
      if ((code !== 'ENOENT' && code !== 'ENOTDIR') || parent === at) throw e;
      missing.push(at.slice(parent.length).replace(/^[\\/]+/, ''));
      at = parent;
    }
  }
}

export class PathConfinement {
  private constructor(
    readonly workspace: string,
    /** The workspace first, then the allowed folders, as given (absolute). */
    readonly roots: readonly string[],
    /** The same, through realpath. */
    private readonly realRoots: readonly string[],
  ) {}

  /**
   * The rule for `workspace` plus `allowed` folders (absolute, or relative to the current
   * folder, as a command line gives them). Every allowed folder must exist: a typo must not
   * silently allow nothing.
   */
  static async create(workspace: string, allowed: readonly string[] = []): Promise<PathConfinement> {
    const roots = [resolve(workspace), ...allowed.map((a) => resolve(a))];
    const realRoots: string[] = [];
    for (const [i, root] of roots.entries()) {
      const what = i === 0 ? 'workspace' : '--allow-path';
      let s;
      try {
        s = await stat(root);
      } catch (e) {
        throw new Error(`${what} ${root}: ${errnoCode(e) === 'ENOENT' ? 'no such folder' : e instanceof Error ? e.message : String(e)}`);
      }
      if (!s.isDirectory()) throw new Error(`${what} ${root}: not a folder`);
      realRoots.push(await realpath(root));
    }
    return new PathConfinement(roots[0]!, roots, realRoots);
  }

  private refuse(field: string, path: string, why: string): ClientPathError {
    const allowed = this.roots.length > 1 ? ` or the allowed folders (${this.roots.slice(1).join(', ')})` : '';
    return new ClientPathError(
      field,
      `${JSON.stringify(path)} ${why} the workspace ${this.workspace}${allowed}; the server only reads and writes there (start it with --allow-path DIR to allow another folder)`,
    );
  }

  /** The real absolute path of `path` if the rule allows it; a ClientPathError naming `field` otherwise. */
  async resolve(path: string, field: string, o: ConfinedPathOptions = {}): Promise<string> {
    if (path.includes('\0')) throw new ClientPathError(field, 'contains a NUL character');
    const foreign = foreignPathForm(path);
    if (foreign !== null) throw new ClientPathError(field, foreign);
    const abs = resolve(o.base ?? this.workspace, path);
    if (!this.roots.some((r) => isInside(r, abs)) && !this.realRoots.some((r) => isInside(r, abs))) throw this.refuse(field, path, 'is outside');
    let real: string;
    try {
      real = await realPathOf(abs);
    } catch (e) {
      throw new ClientPathError(field, `${JSON.stringify(path)}: cannot resolve it (${errnoCode(e) ?? (e instanceof Error ? e.message : String(e))})`);
    }
    // Named without the link's target: where it points is the outside this rule keeps private.
    if (!this.realRoots.some((r) => isInside(r, real))) throw this.refuse(field, path, 'leads through a symbolic link outside');
    if (o.write && inStoreFolder(this.realRoots[0]!, real)) {
      throw new ClientPathError(field, `${JSON.stringify(path)} is inside ${STORE_DIR_NAME}/, which only the server writes`);
    }
    return real;
  }

  /**
   * Reads a text file a client named, once: confined, a regular file (a named pipe or a device
   * could block or never end), at most MAX_CLIENT_FILE_BYTES. Returns its real path and text.
   */
  async readTextFile(path: string, field: string): Promise<{ path: string; text: string }> {
    const real = await this.resolve(path, field);
    let fh;
    try {
      // O_NONBLOCK: opening a named pipe must not wait for a writer; the fstat below refuses it.
      fh = await open(real, constants.O_RDONLY | constants.O_NONBLOCK);
    } catch (e) {
      throw new ClientPathError(field, `${JSON.stringify(path)} cannot be read: ${errnoCode(e) === 'ENOENT' ? 'no such file' : (errnoCode(e) ?? 'error')}`);
    }
    try {
      const s = await fh.stat();
      if (!s.isFile()) throw new ClientPathError(field, `${JSON.stringify(path)} is not a regular file`);
      if (s.size > MAX_CLIENT_FILE_BYTES) throw new ClientPathError(field, `${JSON.stringify(path)} is ${s.size} bytes; a config is at most ${MAX_CLIENT_FILE_BYTES}`);
      return { path: real, text: await fh.readFile('utf8') };
    } finally {
      await fh.close();
    }
  }
}
