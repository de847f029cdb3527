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

/**
 * Why `text` is not JSON, with the line and column where V8 reports one, and never a piece of the
 * text: V8's messages for an unexpected token quote the input around it, and a file's first bytes
 * must not reach a client that merely named the file (it may hold a secret; see the server's path
 * rules in server/runs/path-confinement.ts).
 */
export function jsonSyntaxProblem(text: string, e: unknown): string {
  const message = e instanceof Error ? e.message : String(e);
  if (/Unexpected end of JSON input/.test(message)) return 'not valid JSON: it ends before the value is complete';
  // V8's structural messages ("Expected ',' or '}' after property value in JSON at position 12")
  // name only JSON syntax; keep their wording and turn the offset into a line and column.
  const at = /^(Expected [^"]*?|Bad (?:control|escaped) character[^"]*?|Unexpected non-whitespace character after JSON)(?: in JSON)? at position (\d+)$/.exec(message);
  if (at) {
    const offset = Math.min(Number(at[2]), text.length);
    const before = text.slice(0, offset);
    const line = before.split('\n').length;
    const column = offset - (before.lastIndexOf('\n') + 1) + 1;
    const what = at[1]!;
    return `not valid JSON: ${what[0]!.toLowerCase()}${what.slice(1)} at line ${line}, column ${column}`;
  }
  return 'not valid JSON: an unexpected token (the parser does not say where; an editor will)';
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
    // Not the parser's message: it quotes the file's text (see jsonSyntaxProblem).
    throw new Error(`${path} is ${jsonSyntaxProblem(text, e)}`);
  }
  return parseWithSchema(schema, value, path);
}

/** Writes `value` as pretty-printed JSON (2 spaces, trailing newline) atomically. */
export async function writeJsonFile(path: string, value: unknown): Promise<void> {
  await writeTextFileAtomic(path, `${JSON.stringify(value, null, 2)}\n`);
}
