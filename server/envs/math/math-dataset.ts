/**
 * Loading math problems from files on disk, in the shapes the reference's math data comes in
 * (PettingLLMs' `math_env`): JSONL (one object per line) or Parquet, with the question in `question` or
 * `problem` and the gold in `answer` and/or `solution`. Shapes seen in practice:
 *  - GSM8K: `question`, `answer` = worked solution ending in a line `#### 72`;
 *  - MATH-500: `problem`, `solution` (with `\boxed{}`), `answer` (short), `unique_id`;
 *  - AIME 2024 as published: capitalised `ID`, `Problem`, `Solution`, `Answer` (an INT64 in Parquet);
 *  - OlympiadBench / the reference's standardised files: `question`, `solution`.
 * Field names are matched case-insensitively. Nothing is downloaded: the file must be there.
 *
 * Files are untrusted input, so loading is bounded (files over 512 MB and questions over 64 KB are
 * refused) and every error names the file, the line (JSONL) or row (Parquet, both 1-based) and the
 * field, but never quotes the file's content, so errors are safe to log and show anywhere.
 *
 * Parquet is read with hyparquet (pure JavaScript, no dependencies), which decodes uncompressed and
 * SNAPPY files, the codec Hugging Face's Parquet exports use; other codecs are reported by name.
 */
import { readFile } from 'node:fs/promises';
import { basename, extname } from 'node:path';
import { asyncBufferFromFile, parquetMetadataAsync, parquetReadObjects, parquetSchema } from 'hyparquet';
import { extractAnswer } from './answer-check.ts';
import { checkDatasetFile, datasetFileError } from '../dataset-file.ts';

/** One problem: a stable id, the question as the model sees it, and the gold final answer. */
export interface MathItem {
  /** The record's `id` / `unique_id` field if it has one, else `<file name>:<line or row>`. */
  readonly id: string;
  readonly question: string;
  /** The final answer only (`72`, `\frac{3}{4}`), ready for `verifyAnswer(gold, answer)`. */
  readonly answer: string;
}

const MAX_FILE_BYTES = 512 * 1024 * 1024;
const MAX_QUESTION_BYTES = 64 * 1024;
/** An `answer` field up to this long that holds no `\boxed{}` or `####` is taken as the final answer itself. */
const MAX_SHORT_ANSWER_CHARS = 256;

const QUESTION_FIELDS = ['question', 'problem'] as const;
const ANSWER_FIELDS = ['answer', 'solution', 'id', 'unique_id'] as const;
const WANTED = new Set<string>([...QUESTION_FIELDS, ...ANSWER_FIELDS]);

/** The error every problem with a file becomes; `where` is `line 3` / `row 3` or empty for the whole file. */
function fileError(path: string, where: string, problem: string): Error {
  return datasetFileError('math', path, where, problem);
}

/** A field's value as text: strings as they are, numbers and BigInts (Parquet INT64) in decimal. */
function textValue(value: unknown): string | undefined {
  if (typeof value === 'string') return value;
  if (typeof value === 'bigint') return value.toString();
  if (typeof value === 'number' && Number.isFinite(value)) return String(value);
  if (value instanceof Uint8Array) {
    try {
      return new TextDecoder('utf-8', { fatal: true }).decode(value);
    } catch {
      return undefined;
    }
  }
  return undefined;
}

/** The record's fields under lower-cased names (the first spelling wins if two differ only in case). */
function lowerKeys(record: Record<string, unknown>): Map<string, unknown> {
  const out = new Map<string, unknown>();
  for (const [k, v] of Object.entries(record)) if (!out.has(k.toLowerCase())) out.set(k.toLowerCase(), v);
  return out;
}

/** The first present, non-null field among `names`, as text; throws if present but not text. */
function field(rec: Map<string, unknown>, names: readonly string[], path: string, where: string): string | undefined {
  for (const name of names) {
    const value = rec.get(name);
    if (value === undefined || value === null) continue;
    const text = textValue(value);
    if (text === undefined) throw fileError(path, where, `field '${name}' is not text or a number`);
    return text;
  }
  return undefined;
}

/** The gold final answer from a short `answer` field, else extracted from `answer` or `solution`. */
function goldAnswer(rec: Map<string, unknown>, path: string, where: string): string {
  const answer = field(rec, ['answer'], path, where)?.trim();
  const solution = field(rec, ['solution'], path, where);
  if (answer !== undefined && answer !== '') {
    const extracted = extractAnswer(answer);
    if (extracted !== null) return extracted; // GSM8K's "... #### 72", or an answer written as \boxed{}
    if (answer.length <= MAX_SHORT_ANSWER_CHARS && !answer.includes('\n')) return answer;
  }
  const fromSolution = solution === undefined ? null : extractAnswer(solution);
  if (fromSolution !== null) return fromSolution;
  if (answer === undefined && solution === undefined) throw fileError(path, where, "missing field 'answer' (or 'solution')");
  throw fileError(path, where, "no final answer: 'answer' is not short and neither it nor 'solution' has a \\boxed{} or '####' line");
}

/** One record → one item, or an error naming the record and field. */
function toItem(record: Record<string, unknown>, path: string, where: string, fallbackId: string): MathItem {
  const rec = lowerKeys(record);
  const question = field(rec, QUESTION_FIELDS, path, where);
  if (question === undefined) throw fileError(path, where, "missing field 'question' (or 'problem')");
  if (question.trim() === '') throw fileError(path, where, "field 'question' is empty");
  if (Buffer.byteLength(question, 'utf8') > MAX_QUESTION_BYTES) {
    throw fileError(path, where, `the question is over ${MAX_QUESTION_BYTES / 1024} KB`);
  }
  const id = field(rec, ['id', 'unique_id'], path, where) ?? fallbackId;
  return { id, question, answer: goldAnswer(rec, path, where) };
}

async function loadJsonl(path: string, limit: number): Promise<MathItem[]> {
  const bytes = await readFile(path);
  const decoder = new TextDecoder('utf-8', { fatal: true, ignoreBOM: false });
  const name = basename(path);
  const items: MathItem[] = [];
  let start = 0;
  for (let line = 1; start < bytes.length && items.length < limit; line++) {
    let end = bytes.indexOf(0x0a, start);
    if (end < 0) end = bytes.length;
    const where = `line ${line}`;
    let text: string;
    try {
      text = decoder.decode(bytes.subarray(start, end));
    } catch {
      throw fileError(path, where, 'not valid UTF-8');
    }
    start = end + 1;
    if (text.trim() === '') continue;
    let value: unknown;
    try {
      value = JSON.parse(text);
    } catch {
      throw fileError(path, where, 'not valid JSON'); // JSON.parse's message quotes the text
    }
    if (typeof value !== 'object' || value === null || Array.isArray(value)) {
      throw fileError(path, where, 'not a JSON object');
    }
    items.push(toItem(value as Record<string, unknown>, path, where, `${name}:${line}`));
  }
  return items;
}

async function loadParquet(path: string, limit: number): Promise<MathItem[]> {
  let rows: Record<string, unknown>[];
  try {
    const file = await asyncBufferFromFile(path);
    const metadata = await parquetMetadataAsync(file);
    // Only the columns we use are decoded; datasets often carry large ones we do not (images, traces).
    const columns = parquetSchema(metadata).children.map((c) => c.element.name).filter((n) => WANTED.has(n.toLowerCase()));
    if (!columns.some((c) => (QUESTION_FIELDS as readonly string[]).includes(c.toLowerCase()))) {
      throw fileError(path, '', "missing column 'question' (or 'problem')");
    }
    const rowEnd = Math.min(limit, Number(metadata.num_rows));
    rows = rowEnd === 0 ? [] : await parquetReadObjects({ file, columns, rowEnd });
  } catch (error) {
    if (error instanceof Error && error.message.startsWith('math dataset ')) throw error;
    // hyparquet's messages describe structure (codec, encoding, lengths), never cell values.
    const detail = error instanceof Error ? error.message.slice(0, 200) : 'unknown error';
    throw fileError(path, '', `not a readable Parquet file (${detail})`);
  }
  const name = basename(path);
  return rows.map((row, i) => toItem(row, path, `row ${i + 1}`, `${name}:${i + 1}`));
}

/**
 * The problems in a JSONL (`.jsonl`, `.ndjson`) or Parquet (`.parquet`) file, in file order, at
 * most `limit` of them (default: all). Throws an Error naming the file, the line or row and the
 * field when a record has no question, no usable gold answer, a question over 64 KB, or the file
 * is over 512 MB, not UTF-8 (JSONL), or not Parquet; blank JSONL lines are skipped.
 */
export async function loadMathDataset(path: string, opts: { limit?: number } = {}): Promise<MathItem[]> {
  const limit = opts.limit ?? Number.POSITIVE_INFINITY;
  if (!(limit === Number.POSITIVE_INFINITY || (Number.isSafeInteger(limit) && limit >= 0))) {
    throw new RangeError(`loadMathDataset: limit must be a non-negative integer, got ${limit}`);
  }
  await checkDatasetFile('math', path, MAX_FILE_BYTES);
  const ext = extname(path).toLowerCase();
  if (ext === '.jsonl' || ext === '.ndjson') return loadJsonl(path, limit);
  if (ext === '.parquet') return loadParquet(path, limit);
  throw fileError(path, '', 'unsupported file type: expected .jsonl, .ndjson or .parquet');
}
