// Loading math datasets: JSONL written here in the GSM8K, MATH-500 and AIME shapes, the committed
// Parquet fixtures (fixtures/make-parquet-fixtures.mjs made them), and errors that name the file,
// line or row and field without quoting the file's content.
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, truncateSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { verifyAnswer } from './answer-check.ts';
import { loadMathDataset } from './math-dataset.ts';

const dir = mkdtempSync(join(tmpdir(), 'troupe-math-'));
after(() => rmSync(dir, { recursive: true, force: true }));
const fixture = (name: string): string => fileURLToPath(new URL(`./fixtures/${name}`, import.meta.url));

/** Writes `lines` (objects become JSON, strings are written as they are) to a .jsonl file. */
function jsonl(name: string, lines: ReadonlyArray<object | string>): string {
  const path = join(dir, name);
  writeFileSync(path, lines.map((l) => (typeof l === 'string' ? l : JSON.stringify(l))).join('\n') + '\n');
  return path;
}

/** Asserts the promise rejects with a message matching every pattern and containing no `secret`. */
async function rejects(p: Promise<unknown>, patterns: RegExp[], secret?: string): Promise<void> {
  await assert.rejects(p, (error: unknown) => {
    assert.ok(error instanceof Error);
    for (const re of patterns) assert.match(error.message, re);
    if (secret !== undefined) assert.ok(!error.message.includes(secret), `the message quotes the file: ${error.message}`);
    return true;
  });
}

describe('JSONL', () => {
  test('GSM8K shape: the gold is the #### line of the answer field', async () => {
    const path = jsonl('gsm8k.jsonl', [
      { question: 'Tom has 3 apples and buys 4 more. How many?', answer: 'He has 3 + 4 = <<3+4=7>>7.\n#### 7' },
      { question: 'A shop sells 1,200 pens a day. How many in 3 days?', answer: '1200 * 3 = 3600\n#### 3,600' },
    ]);
    const items = await loadMathDataset(path);
    assert.deepEqual(items.map((i) => i.answer), ['7', '3,600']);
    assert.deepEqual(items.map((i) => i.id), ['gsm8k.jsonl:1', 'gsm8k.jsonl:2'], 'no id field: file and line');
    assert.ok(verifyAnswer(items[1]!.answer, '3600'));
  });

  test('MATH-500 shape: the short answer field wins, ids come from unique_id; blank lines skipped', async () => {
    const path = jsonl('math500.jsonl', [
      { problem: 'Compute $\\frac{6}{8}$ in lowest terms.', solution: 'Divide by 2: $\\boxed{\\frac34}$.', answer: '\\frac{3}{4}', unique_id: 'test/algebra/1.json' },
      '',
      { problem: 'What is $2+2$?', solution: 'It is $\\boxed{4}$.', unique_id: 'test/prealgebra/2.json' },
    ]);
    const items = await loadMathDataset(path);
    assert.deepEqual(items, [
      { id: 'test/algebra/1.json', question: 'Compute $\\frac{6}{8}$ in lowest terms.', answer: '\\frac{3}{4}' },
      { id: 'test/prealgebra/2.json', question: 'What is $2+2$?', answer: '4' },
    ]);
  });

  test('AIME / OlympiadBench shapes: capitalised fields, numeric answers, solution-only records; limit', async () => {
    const path = jsonl('aime.jsonl', [
      { ID: '2024-I-1', Problem: 'Find $2^{10} \\bmod 1000$.', Solution: 'So $\\boxed{24}$.', Answer: 24 },
      { question: 'Find the least n.', solution: 'Hence $n = \\boxed{12345678901234567890123}$.' },
      { question: 'A third one.', answer: '5' },
    ]);
    const items = await loadMathDataset(path);
    assert.deepEqual(items.map((i) => [i.id, i.answer]), [['2024-I-1', '24'], ['aime.jsonl:2', '12345678901234567890123'], ['aime.jsonl:3', '5']]);
    assert.equal((await loadMathDataset(path, { limit: 2 })).length, 2);
    assert.equal((await loadMathDataset(path, { limit: 0 })).length, 0);
    await assert.rejects(loadMathDataset(path, { limit: -1 }), RangeError);
  });

  test('errors name the file, line and field and never quote the content', async () => {
    const secret = 'SECRET-CONTENT-42';
    await rejects(loadMathDataset(jsonl('noq.jsonl', [{ question: `${secret}?`, answer: '1' }, { answer: secret }])),
      [/noq\.jsonl/, /line 2/, /missing field 'question' \(or 'problem'\)/], secret);
    await rejects(loadMathDataset(jsonl('noa.jsonl', [{ question: secret }])), [/line 1/, /missing field 'answer' \(or 'solution'\)/], secret);
    await rejects(loadMathDataset(jsonl('nobox.jsonl', [{ question: 'q', solution: `it is ${secret}` }])), [/line 1/, /no final answer/], secret);
    await rejects(loadMathDataset(jsonl('badjson.jsonl', [{ question: 'q', answer: '1' }, `{"question": "${secret}"`])),
      [/badjson\.jsonl/, /line 2/, /not valid JSON/], secret);
    await rejects(loadMathDataset(jsonl('array.jsonl', [[secret]])), [/line 1/, /not a JSON object/], secret);
    await rejects(loadMathDataset(jsonl('type.jsonl', [{ question: { text: secret }, answer: '1' }])), [/field 'question' is not text/], secret);
  });

  test('a non-UTF-8 line is named', async () => {
    const path = join(dir, 'latin1.jsonl');
    writeFileSync(path, Buffer.concat([Buffer.from('{"question":"ok","answer":"1"}\n{"question":"caf'), Buffer.from([0xe9]), Buffer.from('","answer":"2"}\n')]));
    await rejects(loadMathDataset(path), [/latin1\.jsonl/, /line 2/, /not valid UTF-8/]);
  });

  test('an oversized question is refused by size, not quoted', async () => {
    const huge = 'x'.repeat(64 * 1024 + 1);
    await rejects(loadMathDataset(jsonl('big.jsonl', [{ question: 'fine', answer: '1' }, { question: huge, answer: '1' }])),
      [/line 2/, /over 64 KB/], 'xxxxxxxx');
    const edge = 'y'.repeat(64 * 1024);
    assert.equal((await loadMathDataset(jsonl('edge.jsonl', [{ question: edge, answer: '1' }])))[0]!.question.length, edge.length);
  });

  test('a file over 512 MB is refused before it is read', async () => {
    const path = join(dir, 'huge.jsonl');
    writeFileSync(path, '');
    truncateSync(path, 512 * 1024 * 1024 + 1); // sparse: no disk is used
    await rejects(loadMathDataset(path), [/huge\.jsonl/, /over the 512 MB limit/]);
    rmSync(path);
  });

  test('missing files, folders and unknown extensions', async () => {
    await rejects(loadMathDataset(join(dir, 'absent.jsonl')), [/absent\.jsonl/, /cannot be read/]);
    await rejects(loadMathDataset(dir), [/not a regular file/]);
    writeFileSync(join(dir, 'data.csv'), 'question,answer\n');
    await rejects(loadMathDataset(join(dir, 'data.csv')), [/unsupported file type/]);
  });
});

describe('Parquet', () => {
  test('MATH-500 shape (SNAPPY): answer field, unique_id, other columns ignored', async () => {
    const items = await loadMathDataset(fixture('math500-shape.parquet'));
    assert.deepEqual(items.map((i) => [i.id, i.answer]), [
      ['test/prealgebra/1.json', '\\frac{3}{4}'], ['test/algebra/2.json', '(2, 1)'], ['test/number_theory/3.json', '6'],
    ]);
    assert.match(items[0]!.question, /^What is \$\\frac\{1\}\{2\}/);
    assert.deepEqual((await loadMathDataset(fixture('math500-shape.parquet'), { limit: 1 })).length, 1);
  });

  test('AIME shape: capitalised columns, INT64 answers', async () => {
    const items = await loadMathDataset(fixture('aime-shape.parquet'));
    assert.deepEqual(items.map((i) => [i.id, i.answer]), [['2024-I-1', '24'], ['2024-I-2', '1001']]);
    assert.ok(verifyAnswer(items[0]!.answer, '\\boxed{024}'));
  });

  test('a missing question column, and a file that is not Parquet', async () => {
    await rejects(loadMathDataset(fixture('no-question.parquet')), [/no-question\.parquet/, /missing column 'question' \(or 'problem'\)/]);
    const fake = join(dir, 'fake.parquet');
    writeFileSync(fake, '{"question": "SECRET-CONTENT-42"}\n');
    await rejects(loadMathDataset(fake), [/fake\.parquet/, /not a readable Parquet file/], 'SECRET');
  });
});
