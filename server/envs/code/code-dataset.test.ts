/**
 * The code dataset loader on small files in the three published shapes (APPS, CodeContests,
 * LiveCodeBench), its bounds, and errors that name the file, line and field without quoting the
 * content; and the code presets in configs/code parse and route exactly the environment's agents.
 */
import assert from 'node:assert/strict';
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, test } from 'node:test';
import { checkAgainstAgents, envDatasetSchema, parseExperimentConfig } from '../../protocol/experiment-config.ts';
import { ConfigError } from '../../protocol/config-errors.ts';
import { loadExperiment } from '../../rl/resolve-experiment.ts';
import { sandboxSchema } from '../../protocol/experiment-config.ts';
import { Sandbox } from '../../sandbox/sandbox.ts';
import { createEnvironment } from '../environments.ts';
import { actWithPrograms } from '../program-acts.ts';
import { TEST_SEED_OFFSET, trainSeed, validationSeed } from '../seed-ranges.ts';
import { datasetTask, loadCodeDataset, loadCodeSplits } from './code-dataset.ts';
import type { CodeEnvironment } from './code-env.ts';

const dir = mkdtempSync(join(tmpdir(), 'code-dataset-'));
after(() => rmSync(dir, { recursive: true, force: true }));
function file(name: string, records: readonly unknown[]): string {
  const path = join(dir, name);
  writeFileSync(path, records.map((r) => (typeof r === 'string' ? r : JSON.stringify(r))).join('\n') + '\n');
  return path;
}

const apps = {
  problem_id: 4000,
  question: 'Read a and b, print a+b.',
  solutions: JSON.stringify(['a,b=map(int,input().split())\nprint(a+b)']),
  input_output: JSON.stringify({ inputs: ['1 2\n', '3 4\n'], outputs: ['3\n', '7\n'] }),
};
const appsCall = { problem_id: 4001, question: 'def f', solutions: '[]', input_output: JSON.stringify({ fn_name: 'f', inputs: [[1]], outputs: [2] }) };
const contests = {
  name: '1A_theatre',
  description: 'Theatre square.',
  public_tests: { input: ['6 6 4\n'], output: ['4\n'] },
  private_tests: { input: ['1 1 1\n', '2 2 1\n'], output: ['1\n', '4\n'] },
  generated_tests: { input: [], output: [] },
  solutions: { language: [2, 3], solution: ['int main(){}', 'print(4)'] },
};
const lcb = {
  question_id: 'abc300_a',
  question_content: 'Print N+1.',
  public_test_cases: JSON.stringify([{ input: '1\n', output: '2\n', testtype: 'stdin' }, { input: 'f(1)', output: '2', testtype: 'functional' }]),
  private_test_cases: 'eJzLSM3JyQcABiwCFQ==',
};

test('APPS, CodeContests and LiveCodeBench records load as question + stdin tests (+ a Python solution)', async () => {
  const tasks = await loadCodeDataset(file('mixed.jsonl', [apps, appsCall, '', contests, lcb]));
  assert.deepEqual(tasks.map((t) => t.id), ['4000', '1A_theatre', 'abc300_a'], 'the call-based APPS task and the blank line are skipped');
  assert.deepEqual(tasks[0], { id: '4000', question: 'Read a and b, print a+b.', tests: [{ input: '1 2', output: '3' }, { input: '3 4', output: '7' }], solution: 'a,b=map(int,input().split())\nprint(a+b)' });
  assert.deepEqual(tasks[1]!.tests, [{ input: '1 1 1', output: '1' }, { input: '2 2 1', output: '4' }], 'private tests first (the train split)');
  assert.equal(tasks[1]!.solution, 'print(4)', 'the Python 3 solution, not the C++ one');
  assert.deepEqual(tasks[2], { id: 'abc300_a', question: 'Print N+1.', tests: [{ input: '1', output: '2' }], solution: null }, 'stdin tests only; compressed private tests are not read');
  const pub = await loadCodeDataset(file('cc.jsonl', [contests]), { tests: 'public', format: 'code-contests' });
  assert.deepEqual(pub[0]!.tests, [{ input: '6 6 4', output: '4' }]);
  const task = datasetTask(tasks[0]!);
  assert.deepEqual([task.program, task.tests.length, task.probe], ['a,b=map(int,input().split())\nprint(a+b)', 2, { input: '1 2', output: '3' }]);
  assert.throws(() => datasetTask(tasks[2]!), /abc300_a has no Python solution/);
});

test('bounds: limit and maxTests', async () => {
  const path = file('many.jsonl', Array.from({ length: 5 }, (_, i) => ({ ...apps, problem_id: i, input_output: JSON.stringify({ inputs: Array(30).fill('1 1'), outputs: Array(30).fill('2') }) })));
  const tasks = await loadCodeDataset(path, { limit: 2, maxTests: 3 });
  assert.deepEqual(tasks.map((t) => [t.id, t.tests.length]), [['0', 3], ['1', 3]]);
  assert.deepEqual(await loadCodeDataset(path, { limit: 0 }), []);
  await assert.rejects(loadCodeDataset(path, { limit: -1 }), /limit must be a non-negative integer/);
  await assert.rejects(loadCodeDataset(path, { maxTests: 0 }), /maxTests must be a positive integer/);
});

test('errors name the file, the line and the field, and never quote the content', async () => {
  const secret = 'SECRET-CONTENT';
  const cases: [unknown[], RegExp][] = [
    [[apps, `{"question": "${secret}"`], /line 2: is not valid JSON$/],
    [[`["${secret}"]`], /line 1: is not a JSON object$/],
    [[{ title: secret }], /line 1: no known shape/],
    [[{ ...apps, input_output: secret }], /line 1: field 'input_output' is a string that is not JSON$/],
    [[{ ...apps, question: 7 }], /line 1: field 'question' is not a string$/],
    [[{ ...apps, input_output: JSON.stringify({ inputs: ['1'], outputs: [] }) }], /line 1: field 'input_output' has 1 inputs but 0 outputs$/],
    [[{ ...contests, private_tests: { input: [secret], output: [3] } }], /line 1: field 'private_tests\[0\]\.output' is not a string$/],
    [[{ ...lcb, public_test_cases: '{}' }], /line 1: field 'public_test_cases' is not a list$/],
  ];
  for (const [records, message] of cases) {
    const path = file('bad.jsonl', records);
    await assert.rejects(loadCodeDataset(path), (e: Error) => {
      assert.match(e.message, message);
      assert.ok(e.message.startsWith(`code dataset ${path}: line`), e.message);
      assert.ok(!e.message.includes(secret), e.message);
      return true;
    });
  }
  await assert.rejects(loadCodeDataset(join(dir, 'missing.jsonl')), /missing\.jsonl: cannot be read/);
  await assert.rejects(loadCodeDataset(dir), /is not a regular file/);
  await assert.rejects(loadCodeDataset(file('x.jsonl', [apps]), { format: 'apps', limit: 1.5 }), /limit must be/);
});

test('Parquet: APPS-shaped rows load as JSONL records do (fixtures/apps-shape.parquet)', async () => {
  const path = fileURLToPath(new URL('fixtures/apps-shape.parquet', import.meta.url));
  const tasks = await loadCodeDataset(path);
  assert.deepEqual(tasks.map((t) => t.id), ['10', '11', '13'], 'the call-based row is skipped');
  assert.deepEqual(tasks[0], { id: '10', question: 'Print a+b.', tests: [{ input: '1 2', output: '3' }, { input: '5 5', output: '10' }], solution: 'a,b=map(int,input().split())\nprint(a+b)' });
  assert.equal(tasks[2]!.solution, null);
  assert.deepEqual((await loadCodeDataset(path, { requireSolution: true })).map((t) => t.id), ['10', '11']);
  await assert.rejects(loadCodeDataset(file('not.parquet', ['PAR1 nothing'])), /not\.parquet: not a readable Parquet file/);
  await assert.rejects(loadCodeDataset(file('x.csv', [apps])), /x\.csv: unsupported file type/);
});

/** `n` APPS problems with solutions (ids 0..n-1, each its own constant k: print a+b+k), then `unsolved` without. */
function appsFile(name: string, n: number, unsolved = 0): string {
  const solved = Array.from({ length: n }, (_, k) => ({
    problem_id: k,
    question: `Read a and b, print a+b+${k}.`,
    solutions: JSON.stringify([`a,b=map(int,input().split())\nprint(a+b+${k})`]),
    input_output: JSON.stringify({ inputs: ['1 2\n', '10 -3\n'], outputs: [`${3 + k}\n`, `${7 + k}\n`] }),
  }));
  const none = Array.from({ length: unsolved }, (_, k) => ({ ...solved[0]!, problem_id: 1000 + k, solutions: '' }));
  return file(name, [...none, ...solved]);
}

test('env.dataset splits the problems into train, validation and test by splitSeed, bounded', async () => {
  const path = appsFile('twenty.jsonl', 20, 2);
  const config = envDatasetSchema.parse({ path, validationTasks: 3, testTasks: 4 });
  const splits = await loadCodeSplits(path, config);
  const ids = (ts: readonly { source: string }[]) => ts.map((t) => t.source);
  assert.deepEqual([splits.train.length, splits.validation.length, splits.test.length, splits.withoutSolution], [13, 3, 4, 2]);
  const all = [...ids(splits.train), ...ids(splits.validation), ...ids(splits.test)];
  assert.deepEqual([...all].sort((a, b) => Number(a) - Number(b)), Array.from({ length: 20 }, (_, k) => String(k)), 'every problem in exactly one part');
  assert.notDeepEqual(all, Array.from({ length: 20 }, (_, k) => String(k)), 'shuffled, not in file order');
  assert.deepEqual(ids((await loadCodeSplits(path, config)).test), ids(splits.test), 'the same splitSeed, the same split');
  assert.notDeepEqual(ids((await loadCodeSplits(path, { ...config, splitSeed: 7 })).test), ids(splits.test), 'another splitSeed, another split');
  const capped = await loadCodeSplits(path, { ...config, maxTasks: 9 });
  assert.equal(capped.train.length + capped.validation.length + capped.test.length, 9, 'maxTasks bounds the problems read');
  await assert.rejects(loadCodeSplits(path, { ...config, validationTasks: 10, testTasks: 10 }), (e: Error) => {
    assert.match(e.message, /^code dataset .*twenty\.jsonl: has 20 usable problems .*2 without a solution were left out.*10 for validation and 10 for the test/);
    return true;
  });
  const bad = file('bad-split.jsonl', [{ problem_id: 1, question: 'SECRET' }, '{nope']);
  await assert.rejects(loadCodeSplits(bad, config), (e: Error) => {
    assert.match(e.message, /bad-split\.jsonl: line 1: no known shape/);
    assert.ok(!e.message.includes('SECRET'));
    return true;
  });
});

test('a config with env.dataset trains on its problems: training, validation and test seeds each draw their own part', async (t) => {
  const configDir = mkdtempSync(join(dir, 'config-'));
  appsFile('problems.jsonl', 16);
  const preset = JSON.parse(readFileSync(new URL('../../../configs/code/L0-single.json', import.meta.url), 'utf8')) as Record<string, any>;
  const write = (env: unknown) => {
    const path = join(configDir, 'config.json');
    writeFileSync(path, JSON.stringify({ ...preset, $schema: undefined, env }));
    return path;
  };
  // Relative to the config's folder.
  const { experiment } = await loadExperiment(write({ name: 'code', options: { variant: 'single' }, dataset: { path: '../problems.jsonl', validationTasks: 4, testTasks: 4 } }));
  const splits = await loadCodeSplits(join(dir, 'problems.jsonl'), envDatasetSchema.parse({ path: 'x', validationTasks: 4, testTasks: 4 }));
  // Terse prompts: make returns the code environment itself.
  const source = (seed: number) => (experiment.env.make(seed) as CodeEnvironment).task.source;
  const part = (ts: readonly { source: string }[]) => new Set(ts.map((x) => x.source));
  for (let i = 0; i < 16; i++) {
    assert.ok(part(splits.train).has(source(trainSeed(i))), `train seed ${i}`);
    assert.ok(part(splits.validation).has(source(validationSeed(i))), `validation seed ${i}`);
    assert.ok(part(splits.test).has(source(validationSeed(TEST_SEED_OFFSET + i))), `test seed ${i}`);
  }
  assert.deepEqual(new Set(Array.from({ length: 4 }, (_, i) => source(validationSeed(TEST_SEED_OFFSET + i)))), part(splits.test), 'test seeds play every test problem in turn');

  // Bad files and misplaced datasets are config errors at the field, naming the file.
  await assert.rejects(loadExperiment(write({ name: 'code', options: { variant: 'single' }, dataset: { path: 'missing.jsonl' } })), (e: Error) => {
    assert.ok(e instanceof ConfigError);
    assert.deepEqual(e.issues[0]!.path, ['env', 'dataset', 'path']);
    assert.match(e.issues[0]!.message, /missing\.jsonl: cannot be read/);
    return true;
  });
  assert.throws(() => parseExperimentConfig({ ...preset, env: { name: 'math', dataset: { path: 'p.jsonl' } }, router: { tool: 'coder-lora' } }, 'c.json'), /env\.dataset.*math generates its tasks and reads no dataset file/s);

  // And the coder's program on a dataset problem runs in the real sandbox: the reference solution passes.
  if (!existsSync('/usr/bin/bwrap')) return t.skip('no bubblewrap');
  const sandbox = await Sandbox.open(sandboxSchema.parse({}), { log: () => {} });
  try {
    const env = experiment.env.make(trainSeed(3));
    const act = await actWithPrograms(env, 'coder', env.solution('coder'), sandbox.runAll);
    assert.equal(act.executions.length, 2);
    assert.deepEqual([act.result.success, act.result.localReward], [true, 1]);
  } finally {
    await sandbox.close();
  }
});

test('the code presets parse and route exactly the environment agents', () => {
  const folder = new URL('../../../configs/code/', import.meta.url);
  const names = readdirSync(folder).filter((n) => n.endsWith('.json')).sort();
  assert.deepEqual(names, ['L0-single.json', 'L1-shared.json', 'L2-grpo.json', 'L2-lora.json', 'L2-qwen3-1.7b-paper.json', 'L3-separate.json']);
  for (const name of names) {
    const config = parseExperimentConfig(JSON.parse(readFileSync(new URL(name, folder), 'utf8')), name);
    const env = createEnvironment(config.env.name, 1, config.env.options);
    assert.equal(env.name, 'code', name);
    assert.deepEqual(checkAgainstAgents(config, env.agents), [], name);
  }
});
