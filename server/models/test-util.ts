/** Assertions shared by the model tests: errors are checked on their message, not `String(error)`. */
import assert from 'node:assert/strict';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

/** Asserts that fn throws an Error whose message matches re. */
export function throwsMessage(fn: () => unknown, re: RegExp, what?: string): void {
  assert.throws(fn, (e: unknown) => {
    assert.ok(e instanceof Error, what);
    assert.match(e.message, re, what);
    return true;
  });
}

/** Asserts that p rejects with an Error whose message matches re. */
export async function rejectsMessage(p: Promise<unknown>, re: RegExp, what?: string): Promise<void> {
  await assert.rejects(p, (e: unknown) => {
    assert.ok(e instanceof Error, what);
    assert.match(e.message, re, what);
    return true;
  });
}

/** Runs fn with a fresh temporary folder, removed afterwards. */
export async function withTempDir<T>(fn: (dir: string) => Promise<T>): Promise<T> {
  const dir = await mkdtemp(join(tmpdir(), 'troupe-models-'));
  try {
    return await fn(dir);
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}

/** Escapes a string for use inside a RegExp. */
export const escapeRe = (s: string): string => s.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');

/** The raw bits of a float array, so NaN and -0 compare exactly. */
export const bitsOf = (a: Float32Array): number[] => [...new Uint32Array(a.buffer, a.byteOffset, a.length)];
