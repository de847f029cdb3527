/**
 * Loading programming tasks from JSONL files on disk, in the shapes the reference's code data come
 * in (PettingLLMs' `code_env`). Nothing is downloaded: the file must be there.
 *  - APPS (`codeparrot/apps`): `question`, `input_output` = {inputs, outputs} (a JSON string in the
 *    published files), `solutions` = a JSON string of programs. Call-based tasks (`fn_name`) have no
 *    stdin tests and are skipped.
 *  - CodeContests (`deepmind/code_contests`): `description`, `public_tests` / `private_tests` /
 *    `generated_tests` = {input: [...], output: [...]}, `solutions` = {language: [...], solution:
 *    [...]} where language 3 is Python 3. The reference trains on private tests and tests on public
 *    ones (`tests` option).
 *  - LiveCodeBench (`livecodebench/code_generation_lite`): `question_content`, `public_test_cases`
 *    (a JSON string of [{input, output, testtype}]), `private_test_cases` (the same, or base64 of
 *    zlib of a pickled JSON string, which is not read: public tests first, as the reference does).
 *    Only `testtype: "stdin"` tests are kept.
 * The format is told apart by its fields (`format: 'auto'`) or named.
 *
 * Files are untrusted input, so loading is bounded (files over 1 GB, lines over 64 MB, questions
 * over 64 KB and tests over 1 MB are refused; at most `maxTests` tests per task are kept) and every
 * error names the file, the line (1-based) and the field, never quoting the file's content.
 */
import { createReadStream } from 'node:fs';
import { basename, extname } from 'node:path';
import { createInterface } from 'node:readline';
import { asyncBufferFromFile, parquetMetadataAsync, parquetReadObjects, parquetSchema } from 'hyparquet';
import { codeDatasetFormats, type EnvDatasetConfig } from '../../protocol/experiment-config.ts';
import { Rng } from '../rng.ts';
import { seedPart } from '../seed-ranges.ts';
import type { CodeTask, CodeTest } from './code-tasks.ts';
import { CodeEnvironment, type CodeOptions } from './code-env.ts';
import { checkDatasetFile, datasetFileError } from '../dataset-file.ts';

export { codeDatasetFormats };
export type CodeDatasetFormat = (typeof codeDatasetFormats)[number];

export interface CodeDatasetOptions {
  /** Which shape the records have; 'auto' (default) tells by each record's fields. */
  readonly format?: CodeDatasetFormat;
  /** At most this many tasks, in file order (default: all). */
  readonly limit?: number;
  /** At most this many tests per task (default 16; the environment runs the first 4). */
  readonly maxTests?: number;
  /** Leave out tasks without a Python solution (they do not count towards `limit`); `onWithoutSolution` is called for each. */
  readonly requireSolution?: boolean;
  readonly onWithoutSolution?: () => void;
  /** CodeContests: which tests (default 'private', falling back to public then generated, as the reference's train split). */
  readonly tests?: 'public' | 'private' | 'generated';
}

/** One loaded task: the id, the question, its tests, and a Python solution when the record has one. */
export interface CodeDatasetTask {
  readonly id: string;
  readonly question: string;
  readonly tests: readonly CodeTest[];
  /** A Python 3 solution from the record, or null. */
  readonly solution: string | null;
}

const MAX_FILE_BYTES = 1024 * 1024 * 1024;
const MAX_LINE_CHARS = 64 * 1024 * 1024;
const MAX_QUESTION_CHARS = 64 * 1024;
const MAX_TEST_CHARS = 1024 * 1024;
const PYTHON3 = 3; // CodeContests' Language enum: 0 unknown, 1 Python 2, 2 C++, 3 Python 3, 4 Java

class RecordError extends Error {}
const bad = (problem: string): never => {
  throw new RecordError(problem);
};

/** A field that may hold JSON as a string (APPS, LiveCodeBench) or the value itself. */
function decoded(value: unknown, field: string): unknown {
  if (typeof value !== 'string') return value;
  try {
    return JSON.parse(value);
  } catch {
    return bad(`field '${field}' is a string that is not JSON`);
  }
}

function text(value: unknown, field: string, max: number): string {
  if (typeof value !== 'string') return bad(`field '${field}' is not a string`);
  if (value.length > max) return bad(`field '${field}' is longer than ${max} characters`);
  return value;
}

/** Pairs `inputs[i]` with `outputs[i]` (APPS, CodeContests), at most `max`. */
function pairs(inputs: unknown, outputs: unknown, field: string, max: number): CodeTest[] {
  if (!Array.isArray(inputs) || !Array.isArray(outputs)) return bad(`field '${field}' has no input and output lists`);
  if (inputs.length !== outputs.length) return bad(`field '${field}' has ${inputs.length} inputs but ${outputs.length} outputs`);
  return inputs.slice(0, max).map((input, i) => ({ input: testText(input, `${field}[${i}].input`), output: testText(outputs[i], `${field}[${i}].output`) }));
}

/** A test's text without the final newline (the environment adds one); APPS lists lines sometimes. */
function testText(value: unknown, field: string): string {
  const s = Array.isArray(value) && value.every((v) => typeof v === 'string') ? value.join('\n') : text(value, field, MAX_TEST_CHARS);
  if (s.length > MAX_TEST_CHARS) bad(`field '${field}' is longer than ${MAX_TEST_CHARS} characters`);
  return s.replace(/\r?\n$/, '');
}

type Format = Exclude<CodeDatasetFormat, 'auto'>;

function detect(rec: Record<string, unknown>): Format {
  if ('question_content' in rec) return 'livecodebench';
  if ('description' in rec && ('public_tests' in rec || 'private_tests' in rec)) return 'code-contests';
  if ('question' in rec && 'input_output' in rec) return 'apps';
  return bad('no known shape: expected APPS (question, input_output), CodeContests (description, public_tests) or LiveCodeBench (question_content, public_test_cases)');
}

/** The record as a task, or null for a task with no stdin tests (APPS call-based, LiveCodeBench functional). */
function readRecord(rec: Record<string, unknown>, format: Format, opts: Required<Pick<CodeDatasetOptions, 'maxTests' | 'tests'>>): Omit<CodeDatasetTask, 'id'> | null {
  if (format === 'apps') {
    const question = text(rec['question'], 'question', MAX_QUESTION_CHARS);
    const io = decoded(rec['input_output'], 'input_output');
    if (typeof io !== 'object' || io === null) return bad("field 'input_output' is not an object");
    const o = io as Record<string, unknown>;
    if (typeof o['fn_name'] === 'string') return null;
    const tests = pairs(o['inputs'], o['outputs'], 'input_output', opts.maxTests);
    const sols = rec['solutions'] === undefined || rec['solutions'] === '' ? [] : decoded(rec['solutions'], 'solutions');
    const solution = Array.isArray(sols) && typeof sols[0] === 'string' ? sols[0] : null;
    return { question, tests, solution };
  }
  if (format === 'code-contests') {
    const question = text(rec['description'], 'description', MAX_QUESTION_CHARS);
    const order = [`${opts.tests}_tests`, 'public_tests', 'private_tests', 'generated_tests'];
    let tests: CodeTest[] = [];
    for (const field of order) {
      const t = rec[field];
      if (t === undefined || t === null) continue;
      if (typeof t !== 'object') return bad(`field '${field}' is not an object`);
      tests = pairs((t as Record<string, unknown>)['input'], (t as Record<string, unknown>)['output'], field, opts.maxTests);
      if (tests.length > 0) break;
    }
    const s = rec['solutions'] as Record<string, unknown> | undefined;
    let solution: string | null = null;
    if (s && typeof s === 'object' && Array.isArray(s['language']) && Array.isArray(s['solution'])) {
      const i = s['language'].indexOf(PYTHON3);
      if (i >= 0 && typeof s['solution'][i] === 'string') solution = s['solution'][i];
    }
    return { question, tests, solution };
  }
  const question = text(rec['question_content'], 'question_content', MAX_QUESTION_CHARS);
  let tests: CodeTest[] = [];
  for (const field of ['public_test_cases', 'private_test_cases']) {
    const v = rec[field];
    if (v === undefined || v === null || v === '') continue;
    // The compressed private tests (base64 of zlib of a pickle) are not JSON: they are not read.
    if (field === 'private_test_cases' && typeof v === 'string' && !/^\s*\[/.test(v)) continue;
    const cases = decoded(v, field);
    if (!Array.isArray(cases)) return bad(`field '${field}' is not a list`);
    tests = cases
      .map((c, i) => ({ c: c as Record<string, unknown>, i }))
      .filter(({ c }) => typeof c === 'object' && c !== null && (c['testtype'] ?? 'stdin') === 'stdin')
      .slice(0, opts.maxTests)
      .map(({ c, i }) => ({ input: testText(c['input'], `${field}[${i}].input`), output: testText(c['output'], `${field}[${i}].output`) }));
    if (tests.length > 0) break;
  }
  return tests.length === 0 ? null : { question, tests, solution: null };
}

function fileError(path: string, where: string, problem: string): Error {
  return datasetFileError('code', path, where, problem);
}

/** The columns a Parquet file's records may use (any shape); the rest (images, traces) are never decoded. */
const RECORD_FIELDS = new Set(['problem_id', 'question_id', 'name', 'id', 'question', 'input_output', 'solutions', 'description', 'public_tests', 'private_tests', 'generated_tests', 'question_content', 'public_test_cases', 'private_test_cases']);

/**
 * The tasks of a JSONL (`.jsonl`, `.ndjson`) or Parquet (`.parquet`) file, in file order, at most
 * `limit`. Records whose tests are not stdin tests (call-based, functional) or that have none are
 * skipped; a malformed record throws an Error naming the file, the line or row and the field.
 */
export async function loadCodeDataset(path: string, opts: CodeDatasetOptions = {}): Promise<CodeDatasetTask[]> {
  const limit = opts.limit ?? Number.POSITIVE_INFINITY;
  if (!(limit === Number.POSITIVE_INFINITY || (Number.isSafeInteger(limit) && limit >= 0))) throw new RangeError(`loadCodeDataset: limit must be a non-negative integer, got ${limit}`);
  const maxTests = opts.maxTests ?? 16;
  if (!Number.isSafeInteger(maxTests) || maxTests < 1) throw new RangeError(`loadCodeDataset: maxTests must be a positive integer, got ${maxTests}`);
  const format = opts.format ?? 'auto';
  if (!(codeDatasetFormats as readonly string[]).includes(format)) throw new RangeError(`loadCodeDataset: unknown format '${String(format).slice(0, 40)}' (known: ${codeDatasetFormats.join(', ')})`);
  await checkDatasetFile('code', path, MAX_FILE_BYTES);
  const ext = extname(path).toLowerCase();
  if (ext !== '.jsonl' && ext !== '.ndjson' && ext !== '.parquet') throw fileError(path, '', 'unsupported file type: expected .jsonl, .ndjson or .parquet');

  const out: CodeDatasetTask[] = [];
  if (limit === 0) return out;
  /** Reads one record; false once `limit` tasks are in. */
  const accept = (r: Record<string, unknown>, where: string, fallbackId: string): boolean => {
    let task;
    try {
      task = readRecord(r, format === 'auto' ? detect(r) : format, { maxTests, tests: opts.tests ?? 'private' });
    } catch (e) {
      if (e instanceof RecordError) throw fileError(path, where, e.message);
      throw e;
    }
    if (task === null || task.tests.length === 0) return true;
    if (opts.requireSolution && task.solution === null) {
      opts.onWithoutSolution?.();
      return true;
    }
    const id = ['problem_id', 'question_id', 'name', 'id'].map((k) => r[k]).find((v) => typeof v === 'string' || typeof v === 'number' || typeof v === 'bigint');
    out.push({ id: id === undefined ? fallbackId : String(id).slice(0, 200), ...task });
    return out.length < limit;
  };

  if (ext === '.parquet') {
    let rows: Record<string, unknown>[];
    try {
      const file = await asyncBufferFromFile(path);
      const metadata = await parquetMetadataAsync(file);
      const columns = parquetSchema(metadata).children.map((c) => c.element.name).filter((n) => RECORD_FIELDS.has(n));
      // Records with no stdin tests are skipped, so a limit bounds the tasks, not the rows read.
      rows = Number(metadata.num_rows) === 0 ? [] : await parquetReadObjects({ file, columns });
    } catch (error) {
      // hyparquet's messages describe structure (codec, encoding, lengths), never cell values.
      const detail = error instanceof Error ? error.message.slice(0, 200) : 'unknown error';
      throw fileError(path, '', `not a readable Parquet file (${detail})`);
    }
    const name = basename(path);
    for (let i = 0; i < rows.length; i++) if (!accept(rows[i]!, `row ${i + 1}`, `${name}:${i + 1}`)) break;
    return out;
  }

  const lines = createInterface({ input: createReadStream(path, { encoding: 'utf8' }), crlfDelay: Infinity });
  let n = 0;
  try {
    for await (const line of lines) {
      n++;
      if (line.trim() === '') continue;
      if (line.length > MAX_LINE_CHARS) throw fileError(path, `line ${n}`, `is longer than ${MAX_LINE_CHARS} characters`);
      let rec: unknown;
      try {
        rec = JSON.parse(line);
      } catch {
        throw fileError(path, `line ${n}`, 'is not valid JSON');
      }
      if (typeof rec !== 'object' || rec === null || Array.isArray(rec)) throw fileError(path, `line ${n}`, 'is not a JSON object');
      if (!accept(rec as Record<string, unknown>, `line ${n}`, `${basename(path)}:${n}`)) break;
    }
  } finally {
    lines.close();
  }
  return out;
}

/** A loaded task as the code environment's task (the solution becomes the judge of testers' tests). */
export function datasetTask(t: CodeDatasetTask): CodeTask {
  if (t.solution === null) throw new Error(`code dataset task ${t.id} has no Python solution, which the environment needs to judge the tester's tests`);
  const statement = t.question.replace(/[^\x20-\x7e\n]/g, '?');
  return { source: t.id, statement, words: statement, tests: t.tests, program: t.solution, probe: t.tests[0]!, flawed: [] };
}

/** A dataset's problems split into training, validation and test tasks (`env.dataset`). */
export interface CodeSplits {
  readonly train: readonly CodeTask[];
  readonly validation: readonly CodeTask[];
  readonly test: readonly CodeTask[];
  /** Problems read that had no Python solution and were left out (the environment needs one to judge the tester and to show the coder). */
  readonly withoutSolution: number;
}

/**
 * Reads `config.path` and splits its problems: at most `maxTasks` with a Python solution, in file
 * order, shuffled by `splitSeed`, then `testTasks` for the test, `validationTasks` for
 * validation, the rest for training. Too few problems is an error naming the file and the counts.
 */
export async function loadCodeSplits(path: string, config: EnvDatasetConfig): Promise<CodeSplits> {
  let withoutSolution = 0;
  const usable = await loadCodeDataset(path, { format: config.format, maxTests: config.maxTests, tests: config.tests, limit: config.maxTasks, requireSolution: true, onWithoutSolution: () => void withoutSolution++ });
  const heldOut = config.validationTasks + config.testTasks;
  if (usable.length <= heldOut) {
    throw datasetFileError(
      'code',
      path,
      '',
      `has ${usable.length} usable problems (with stdin tests and a Python solution${withoutSolution ? `; ${withoutSolution} without a solution were left out` : ''}), but env.dataset holds out ${config.validationTasks} for validation and ${config.testTasks} for the test and needs at least one to train on: lower validationTasks and testTasks`,
    );
  }
  const tasks = new Rng(config.splitSeed, 'code-dataset-split').shuffle(usable.map(datasetTask));
  return { test: tasks.slice(0, config.testTasks), validation: tasks.slice(config.testTasks, heldOut), train: tasks.slice(heldOut), withoutSolution };
}

/** The environment of `seed` on a dataset's problems: training seeds index the training tasks, validation and test seeds their own (`seedPart`), each in turn. */
export function datasetEnvironment(splits: CodeSplits, seed: number, options: CodeOptions): CodeEnvironment {
  const { part, index } = seedPart(seed);
  const tasks = splits[part];
  return new CodeEnvironment(seed, options, tasks[index % tasks.length]!);
}
