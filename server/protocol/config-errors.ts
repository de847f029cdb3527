/**
 * Problems in a config file, as the CLI prints them and the editor shows them as diagnostics.
 *
 * A `ConfigIssue` is a JSON path into the file plus a message. Paths point at the culprit itself,
 * so an editor can underline it: an unknown key's path ends with that key, a bad value's path ends
 * at the value. Messages name what is allowed (the enum values, the known keys, the bound), because
 * "Invalid input" alone sends the user back to the docs, and the kind of value found ("got a
 * string"), but never the value itself: configs hold paths and names, a file may hold anything, and
 * a message travels to logs, clients and the run store. Keys are structure and may be named.
 *
 * zod's issues are rewritten here rather than through a zod error map: the rewrite needs the input
 * value at the issue's path (zod only reports it when asked, and not for every code) and the keys
 * the schema allows at that path (which zod never reports).
 */
import type { z } from 'zod';

export type ConfigPath = ReadonlyArray<string | number>;

/** One problem: where (a JSON path; empty for the whole file) and what. */
export interface ConfigIssue {
  readonly path: ConfigPath;
  readonly message: string;
}

/** `algorithm.filters.dropZeroVariance`, `policies.tool.lora.targets[1]`; `(root)` for the file itself. */
export function formatConfigPath(path: ConfigPath): string {
  if (path.length === 0) return '(root)';
  let out = '';
  for (const p of path) out += typeof p === 'number' ? `[${p}]` : out === '' ? p : `.${p}`;
  return out;
}

/** One line per issue: `source: path: message`. */
export function formatConfigIssues(issues: readonly ConfigIssue[], source: string): string {
  return issues.map((i) => `${source}: ${formatConfigPath(i.path)}: ${i.message}`).join('\n');
}

/** A config that failed validation; the message lists every issue, one per line. */
export class ConfigError extends Error {
  override readonly name = 'ConfigError';
  constructor(
    /** The file (or other origin) the config came from. */
    readonly source: string,
    readonly issues: readonly ConfigIssue[],
  ) {
    const n = issues.length;
    super(`invalid config ${source} (${n} ${n === 1 ? 'problem' : 'problems'}):\n${formatConfigIssues(issues, source)}`);
  }
}

/** The kind of a value as it appears in a message ("a string", "a fractional number"), never the value. */
export function kindOfValue(value: unknown): string {
  if (value === undefined) return 'nothing';
  if (value === null) return 'null';
  if (Array.isArray(value)) return 'an array';
  switch (typeof value) {
    case 'object':
      return 'an object';
    case 'string':
      return value === '' ? 'an empty string' : 'a string';
    case 'boolean':
      return 'true or false';
    case 'number':
      if (!Number.isFinite(value)) return 'a non-finite number';
      return Number.isInteger(value) ? 'an integer' : 'a fractional number';
    default:
      return `a ${typeof value}`;
  }
}

/** `"a", "b", "c"`. */
export const quoteList = (xs: readonly unknown[]): string => xs.map((x) => JSON.stringify(x)).join(', ');

/**
 * The candidate a probable typo was meant to be: the closest within a few edits (swapped letters
 * count as one), else the only candidate it abbreviates (`minLr` for `minLrRatio`); or undefined.
 */
export function closestMatch(word: string, candidates: readonly string[]): string | undefined {
  const w = word.toLowerCase();
  let best: string | undefined;
  let bestDistance = Math.max(1, Math.floor(word.length / 3)) + 1;
  for (const c of candidates) {
    const d = editDistance(w, c.toLowerCase());
    if (d < bestDistance) [best, bestDistance] = [c, d];
  }
  if (best !== undefined || w.length < 3) return best;
  const extending = candidates.filter((c) => c.toLowerCase().startsWith(w));
  return extending.length === 1 ? extending[0] : undefined;
}

/** ` (did you mean "x"?)` or nothing. */
export function didYouMean(word: string, candidates: readonly string[]): string {
  const m = closestMatch(word, candidates);
  return m === undefined ? '' : ` (did you mean ${JSON.stringify(m)}?)`;
}

/** Levenshtein distance, with a swap of adjacent letters counting as one edit. */
function editDistance(a: string, b: string): number {
  const rows: number[][] = [Array.from({ length: b.length + 1 }, (_, j) => j)];
  for (let i = 1; i <= a.length; i++) {
    const row = [i];
    const prev = rows[i - 1]!;
    for (let j = 1; j <= b.length; j++) {
      let d = Math.min(prev[j]! + 1, row[j - 1]! + 1, prev[j - 1]! + (a[i - 1] === b[j - 1] ? 0 : 1));
      if (i > 1 && j > 1 && a[i - 1] === b[j - 2] && a[i - 2] === b[j - 1]) d = Math.min(d, rows[i - 2]![j - 2]! + 1);
      row.push(d);
    }
    rows.push(row);
  }
  return rows[a.length]![b.length]!;
}

/** Rewrites zod's issues for `input` (validated against `schema`) into config issues. */
export function issuesFromZod(error: z.core.$ZodError, schema: z.core.$ZodType, input: unknown): ConfigIssue[] {
  return error.issues.flatMap((issue) => rewriteIssue(issue, schema, input));
}

const typeNames: Record<string, string> = {
  int: 'an integer',
  number: 'a number',
  string: 'a string',
  boolean: 'true or false',
  object: 'an object',
  record: 'an object',
  array: 'an array',
};

function rewriteIssue(issue: z.core.$ZodIssue, schema: z.core.$ZodType, input: unknown): ConfigIssue[] {
  const path = issue.path.filter((p): p is string | number => typeof p !== 'symbol');
  const value = valueAt(input, path);
  // The kind of value found, never the value: an enum mismatch says what is allowed, a bound says
  // the bound, and the user can see their own value in the file.
  const got = value === undefined ? 'but it is missing' : `got ${kindOfValue(value)}`;
  switch (issue.code) {
    case 'invalid_type':
      return [{ path, message: `expected ${typeNames[issue.expected] ?? issue.expected}, ${got}` }];
    case 'invalid_value':
      return [{ path, message: value === undefined ? `${expectedValues(issue.values)}, ${got}` : expectedValues(issue.values) }];
    case 'invalid_union':
      // A discriminated union whose discriminator matched no option (zod points the path at it).
      if ('options' in issue && issue.options !== undefined) return [{ path, message: value === undefined ? `${expectedValues(issue.options)}, ${got}` : expectedValues(issue.options) }];
      return [{ path, message: `matches none of the allowed forms, ${got}` }];
    case 'unrecognized_keys': {
      const allowed = allowedKeys(schema, input, path);
      const list = allowed === undefined ? '' : allowed.length === 0 ? '; no keys are allowed here' : `; allowed: ${quoteList(allowed)}`;
      return issue.keys.map((key) => ({
        path: [...path, key],
        message: `unknown key ${JSON.stringify(key)}${allowed === undefined ? '' : didYouMean(key, allowed)}${list}`,
      }));
    }
    case 'invalid_key': {
      const reasons = issue.issues.map((i) => i.message).join('; ');
      return [{ path, message: `invalid name ${JSON.stringify(path[path.length - 1])}: ${reasons}` }];
    }
    case 'too_small':
    case 'too_big':
      return [{ path, message: boundMessage(issue) }];
    default:
      // Custom refinements are ours and name fields, not values; zod's default texts for the other
      // codes (invalid_format names the pattern, not_multiple_of the divisor) do not quote the input.
      return [{ path, message: issue.message }];
  }
}

function expectedValues(values: readonly unknown[]): string {
  return values.length === 1 ? `expected ${quoteList(values)}` : `expected one of ${quoteList(values)}`;
}

function boundMessage(issue: z.core.$ZodIssueTooSmall | z.core.$ZodIssueTooBig): string {
  const small = issue.code === 'too_small';
  const bound = Number(small ? issue.minimum : issue.maximum);
  const op = small ? (issue.inclusive ? '>=' : '>') : issue.inclusive ? '<=' : '<';
  switch (issue.origin) {
    case 'string':
      if (small && bound === 1) return 'must not be empty';
      return `must have ${small ? 'at least' : 'at most'} ${bound} characters`;
    case 'array':
    case 'set':
      return `must have ${small ? 'at least' : 'at most'} ${bound} ${bound === 1 ? 'item' : 'items'}`;
    default:
      return `must be ${op} ${bound}`;
  }
}

function valueAt(input: unknown, path: ConfigPath): unknown {
  let v = input;
  for (const p of path) {
    if (typeof v !== 'object' || v === null) return undefined;
    v = (v as Record<string | number, unknown>)[p];
  }
  return v;
}

/**
 * The keys the object schema at `path` allows, or undefined when the schema there is not a plain
 * object (or cannot be told apart: a union without a discriminator). The walk follows the input
 * alongside, to pick the option of a discriminated union that the input selects.
 */
function allowedKeys(root: z.core.$ZodType, input: unknown, path: ConfigPath): string[] | undefined {
  let s: z.core.$ZodType | undefined = root;
  let v = input;
  for (let i = 0; ; i++) {
    s = unwrap(s, v);
    if (s === undefined) return undefined;
    const def = (s as z.core.$ZodTypes)._zod.def;
    if (i === path.length) return def.type === 'object' ? Object.keys(def.shape) : undefined;
    const key = path[i]!;
    v = typeof v === 'object' && v !== null ? (v as Record<string | number, unknown>)[key] : undefined;
    if (def.type === 'object') s = def.shape[key];
    else if (def.type === 'record') s = def.valueType;
    else if (def.type === 'array') s = def.element;
    else return undefined;
  }
}

/** Strips wrappers (optional, default, pipe...) and resolves a discriminated union by the input. */
function unwrap(schema: z.core.$ZodType | undefined, value: unknown): z.core.$ZodType | undefined {
  let s = schema;
  for (let guard = 0; s !== undefined && guard < 32; guard++) {
    const def = (s as z.core.$ZodTypes)._zod.def;
    switch (def.type) {
      case 'optional':
      case 'nullable':
      case 'default':
      case 'prefault':
      case 'nonoptional':
      case 'readonly':
      case 'catch':
        s = def.innerType;
        break;
      case 'pipe':
        s = def.in;
        break;
      case 'union': {
        const key = 'discriminator' in def && typeof def.discriminator === 'string' ? def.discriminator : undefined;
        if (key === undefined || typeof value !== 'object' || value === null) return undefined;
        const tag = (value as Record<string, unknown>)[key];
        s = def.options.find((o) => {
          const od = (o as z.core.$ZodTypes)._zod.def;
          if (od.type !== 'object') return false;
          const field = od.shape[key] as z.core.$ZodTypes | undefined;
          return field?._zod.def.type === 'literal' && field._zod.def.values.includes(tag as never);
        });
        if (s === undefined) return undefined;
        break;
      }
      default:
        return s;
    }
  }
  return s;
}
