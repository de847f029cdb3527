/**
 * Crash-safe file replacement: write a temporary file beside the target, fsync it, rename it over
 * the target, then fsync the folder. A reader sees either the old file or the complete new one,
 * never a torn write, which is what checkpoint resume relies on.
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
    await rename(tmp, path);
    renamed = true;
    await syncDir(dir);
  } finally {
    if (!renamed) await unlink(tmp).catch(() => undefined);
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
