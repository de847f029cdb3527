/**
 * Crash-safe file replacement: write a temporary file beside the target, fsync it, rename it over
 * the target, then fsync the folder. A reader sees either the old file or the complete new one,
 * never a torn write, which is what checkpoint resume relies on.
 *
 * Errors name the file: Node's write errors name none ("ENOSPC: no space left on device, write"),
 * and a full or failing disk mid-checkpoint must say which file it could not write. The errno
 * `code` is kept on the error, and the original is its `cause`.
 */
import { open, rename, unlink } from 'node:fs/promises';
import { randomBytes } from 'node:crypto';
import { basename, dirname, join } from 'node:path';

/** Writes chunks in order to `path` atomically. */
export async function writeFileAtomic(path: string, chunks: Iterable<Uint8Array> | Uint8Array): Promise<void> {
  const dir = dirname(path);
  const tmp = join(dir, `.${basename(path)}.${process.pid}.${randomBytes(4).toString('hex')}.tmp`);
  const parts = chunks instanceof Uint8Array ? [chunks] : chunks;
  let renamed = false;
  try {
    await write(tmp, parts);
    await rename(tmp, path);
    renamed = true;
    await syncDir(dir);
  } catch (e) {
    throw namingFile(path, e);
  } finally {
    if (!renamed) await unlink(tmp).catch(() => undefined);
  }
}

/**
 * A file-system error (one with an errno code: ENOSPC, EIO, EDQUOT, EACCES…) saying which file it
 * could not write, with the code kept; anything else (the data failing to serialise) as it was.
 */
export function namingFile(path: string, e: unknown): unknown {
  const code = e instanceof Error ? (e as NodeJS.ErrnoException).code : undefined;
  if (!(e instanceof Error) || typeof code !== 'string') return e;
  return Object.assign(new Error(`cannot write ${path}: ${e.message}`, { cause: e }), { code });
}

async function write(tmp: string, parts: Iterable<Uint8Array>): Promise<void> {
  const fh = await open(tmp, 'wx', 0o644);
  try {
    for (const part of parts) {
      let written = 0;
      while (written < part.byteLength) {
        const { bytesWritten } = await fh.write(part, written, part.byteLength - written);
        written += bytesWritten;
      }
    }
    await fh.sync();
  } finally {
    await fh.close();
  }
}

/** Writes UTF-8 text to `path` atomically. */
export async function writeTextFileAtomic(path: string, text: string): Promise<void> {
  await writeFileAtomic(path, new TextEncoder().encode(text));
}

/**
 * Makes the rename durable. Opening a directory for fsync is not possible on Windows (EPERM/EISDIR),
 * where the rename is already as durable as the platform offers, so failures are ignored.
 */
async function syncDir(dir: string): Promise<void> {
  try {
    const fh = await open(dir, 'r');
    try {
      await fh.sync();
    } finally {
      await fh.close();
    }
  } catch {
    // best effort, see above
  }
}
