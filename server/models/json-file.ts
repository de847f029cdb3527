/**
 * Parsing JSON at the boundary: files are read, parsed and validated with zod in one step, and
 * every failure names the file and the offending field.
 */
import { readFile } from 'node:fs/promises';
import type { z } from 'zod';
import { writeTextFileAtomic } from './atomic-write.ts';

/** Formats zod issues as one line per field: `  a.b.0: message`. */
export function formatIssues(error: z.ZodError): string {
  return error.issues
    .map((i) => `  ${i.path.length ? i.path.map(String).join('.') : '(root)'}: ${i.message}`)
    .join('\n');
}

/** Validates `value` with `schema`, throwing an error naming `source` and every bad field. */
export function parseWithSchema<S extends z.ZodType>(schema: S, value: unknown, source: string): z.output<S> {
  const r = schema.safeParse(value);
  if (r.success) return r.data;
  throw new Error(`invalid ${source}:\n${formatIssues(r.error)}`);
}

/** Reads a JSON file and validates it; errors name the path (missing file, bad JSON, bad field). */
export async function readJsonFile<S extends z.ZodType>(path: string, schema: S): Promise<z.output<S>> {
  let text: string;
  try {
    text = await readFile(path, 'utf8');
  } catch (e) {
    throw new Error(`cannot read ${path}: ${(e as Error).message}`, { cause: e });
  }
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch (e) {
    throw new Error(`${path} is not valid JSON: ${(e as Error).message}`, { cause: e });
  }
  return parseWithSchema(schema, value, path);
}

/** Writes `value` as pretty-printed JSON (2 spaces, trailing newline) atomically. */
export async function writeJsonFile(path: string, value: unknown): Promise<void> {
  await writeTextFileAtomic(path, `${JSON.stringify(value, null, 2)}\n`);
}
