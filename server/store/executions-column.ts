/**
 * The `turns.executions` column (schema version 3): the programs a turn's act ran, as the JSON text
 * of an array of protocol `Execution`s, or NULL when it ran none.
 *
 * Written only from validated step input, but read back through the protocol's zod schema anyway:
 * the column's CHECK proves the text is JSON, not that it is a list of executions, and a damaged or
 * hand-edited cell must fail with the turn's id instead of reaching the editor as a wrong value.
 */
import { z } from 'zod';
import { executionSchema, type Execution } from '../protocol/trajectory.ts';
import { RunStoreError } from './store-error.ts';

/**
 * The most one turn's executions may take as stored JSON. The sandbox already cuts each program's
 * output at its output limit, so only a sandbox or rollout bug (or a huge program) gets near it;
 * refusing keeps one bad act from making a step, and every read of its trajectory, enormous.
 */
export const MAX_EXECUTIONS_BYTES = 4 * 1024 * 1024;

const storedExecutionsSchema = z.array(executionSchema.strict());

/** The column's text for a turn's executions; NULL for none (absent or empty), as rows before version 3 have. */
export function encodeExecutions(executions: readonly Execution[] | undefined): string | null {
  return executions === undefined || executions.length === 0 ? null : JSON.stringify(executions);
}

/** Bytes the executions take in the column (UTF-8 JSON); 0 for none. */
export function executionsBytes(executions: readonly Execution[] | undefined): number {
  const text = encodeExecutions(executions);
  return text === null ? 0 : Buffer.byteLength(text, 'utf8');
}

/**
 * Parses a stored cell; undefined for NULL (the turn ran no program). Throws a 'corrupt'
 * RunStoreError naming the turn row when the cell is not a list of executions.
 */
export function decodeExecutions(text: string | null, turnId: number): Execution[] | undefined {
  if (text === null) return undefined;
  const what = `turn row ${turnId} executions`;
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch (error) {
    throw new RunStoreError('corrupt', `${what}: the stored value is not JSON (${error instanceof Error ? error.message : String(error)})`, { cause: error });
  }
  const parsed = storedExecutionsSchema.safeParse(json);
  if (!parsed.success) {
    const issues = parsed.error.issues.slice(0, 5).map((i) => `${i.path.map(String).join('.') || '(root)'}: ${i.message}`);
    throw new RunStoreError('corrupt', `${what}: the stored value is not a list of executions (${issues.join('; ')})`);
  }
  return parsed.data.length === 0 ? undefined : parsed.data;
}
