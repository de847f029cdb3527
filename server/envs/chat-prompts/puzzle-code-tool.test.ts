/**
 * The puzzles' tool agent in chat writes a Python program that prints `**Actions List**: [...]`,
 * run in the real sandbox (PettingLLMs' `stateful_env`). What each kind of program amounts to: a list the
 * program printed is acted exactly as the same list answered in terse text (right or wrong); no
 * code block, an exception, no output, no list, a timeout, too much output or a refused run is
 * the environment's parse-error path, with a reason that names the failure and quotes nothing the
 * program wrote. Only the tool writes code, only in chat, and a run needs the sandbox just then.
 */
import assert from 'node:assert/strict';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { tmpdir } from 'node:os';
import { after, before, describe, test } from 'node:test';
import { defaultModelConfig } from '../../models/default-model.ts';
import { parseExperimentConfig, sandboxSchema } from '../../protocol/experiment-config.ts';
import type { Execution } from '../../protocol/trajectory.ts';
import { resolveExperiment } from '../../rl/resolve-experiment.ts';
import { Sandbox } from '../../sandbox/sandbox.ts';
import { BWRAP } from '../../sandbox/sandbox-command.ts';
import { tinyConfig } from '../../../test/fixtures/tiny-config.ts';
import type { AgentTurnResult, Environment } from '../environment.ts';
import { createEnvironment, environmentNames, environmentRunsCode } from '../environments.ts';
import { actWithPrograms, runsPrograms } from '../program-acts.ts';
import { parsePenalty } from '../puzzle-environment.ts';
import { trainSeed } from '../seed-ranges.ts';
import { ChatEnvironment, chatWritesCode } from './chat-environment.ts';
import { withPromptStyle } from './prompt-styles.ts';

const skip = existsSync(BWRAP) ? false : `${BWRAP} is missing (apt-get install bubblewrap; CI installs it with test/sandbox/setup-sandbox.sh)`;

const chat = (name: string, seed: number, options: object = {}): ChatEnvironment => withPromptStyle(createEnvironment(name, seed, options), 'chat') as ChatEnvironment;
const block = (code: string): string => `I will compute it.\n**Code:**\n\`\`\`python\n${code}\n\`\`\``;

/** The terse environment's result for the empty (unreadable) action, with the chat reader's reason. */
function parseFailure(name: string, seed: number, options: object, error: string): AgentTurnResult {
  const r = createEnvironment(name, seed, options).act('tool', '');
  return { ...r, parseError: error, info: `parse error: ${error}` };
}

test('only the tool of a team writes code, and only in chat', () => {
  for (const name of ['plan-path', 'sokoban', 'sudoku']) {
    const terse = createEnvironment(name, trainSeed(0));
    assert.equal(terse.programs, undefined, `${name}: terse puzzles run no code`);
    assert.equal(runsPrograms(terse), false);
    const team = chat(name, trainSeed(0));
    assert.equal(team.writesCode('tool'), true);
    assert.equal(team.writesCode('plan'), false);
    assert.deepEqual(team.programs('plan', block('print(1)')), [], 'the planner answers in words');
    assert.equal(team.programs('tool', block("print('**Actions List**: []')")).length, 1);
    assert.equal(chatWritesCode(team), true, name);
    const solo = chat(name, trainSeed(0), { variant: 'single' });
    assert.deepEqual(solo.programs('solo', block('print(1)')), [], `${name}: a solo agent answers in words`);
    assert.equal(chatWritesCode(solo), false, `${name}: a single agent needs no sandbox`);
    assert.equal(chatWritesCode(terse), false);
  }
  assert.equal(chatWritesCode(chat('tic-tac-toe', trainSeed(0))), false);
  // Math's code is its own (the factory's runsCode), not the chat prompter's.
  assert.equal(chatWritesCode(chat('math', trainSeed(0))), false);
  assert.equal(environmentRunsCode('math'), true);
  assert.equal(environmentRunsCode('code'), true);
  for (const name of environmentNames.filter((n) => n !== 'math' && n !== 'code')) assert.equal(environmentRunsCode(name), false, name);
});

test("the tool's program is the last python block, with no input; a response without one runs nothing", () => {
  const env = chat('plan-path', trainSeed(1));
  assert.deepEqual(env.programs('tool', `${block('print(1)')}\nOr better:\n\`\`\`python\nprint(2)\n\`\`\``), [{ language: 'python', code: 'print(2)', stdin: '' }]);
  assert.deepEqual(env.programs('tool', '#### ["R","D"]'), []);
  assert.deepEqual(env.programs('tool', block(`print(${'1'.repeat(5000)})`)), [], 'a program past the length limit is not run');
  assert.throws(() => env.programs('judge', block('print(1)')), /plan-path: unknown agent 'judge'/);
});

test('act needs the execution of the program it was given: a caller bug throws', () => {
  const env = chat('plan-path', trainSeed(1));
  assert.throws(() => env.act('tool', block("print('**Actions List**: [\"R\"]')")), /plan-path: agent 'tool' wrote a program but act got 0 executions for it \(run programs\(\) first\)/);
  assert.equal(env.currentAgent(), 'tool', 'nothing was acted');
});

test('a refused run, and a failure with no exception line, name the status and nothing else', () => {
  const code = "print('**Actions List**: [\"R\"]')";
  const run = (status: Execution['status'], stderr: string, exitCode: number | null): Execution => ({ language: 'python', code, stdin: '', status, exitCode, signal: null, stdout: '**Actions List**: ["R"]\n', stderr, truncated: false, durationMs: 1 });
  const cases: [Execution, string][] = [
    [run('refused', 'the sandbox was closed before this program started', null), 'the sandbox refused to run the program'],
    [run('error', 'secret words the model wrote\n', 3), 'the program failed (exit code 3)'],
    [run('error', 'Traceback (most recent call last):\n  File "<x>", line 1\nKeyError: \'secret\'\n', 1), 'the program failed (KeyError)'],
    [run('output-limit', '', null), 'the program printed more than the output limit'],
    [run('timeout', '', null), 'the program ran out of time'],
  ];
  for (const [execution, error] of cases) {
    const env = chat('plan-path', trainSeed(4));
    assert.deepEqual(env.act('tool', block(code), [execution]), parseFailure('plan-path', trainSeed(4), {}, error), execution.status);
  }
});

describe('tool programs in the real sandbox', { skip }, () => {
  let sandbox: Sandbox;
  before(async () => {
    sandbox = await Sandbox.open(sandboxSchema.parse({ limits: { wallMs: 2000, cpuSeconds: 2 } }));
  });
  after(async () => {
    await sandbox?.close();
  });
  const act = async (env: Environment, text: string) => (await actWithPrograms(env, 'tool', text, sandbox.runAll)).result;

  test("the solver's program prints exactly the solver's action: the planner sees the same report as in terse play", async () => {
    for (const [name, options] of [['plan-path', { size: 8 }], ['sokoban', {}], ['sudoku', { size: 9, emptyCells: 30 }]] as const) {
      for (let i = 0; i < 3; i++) {
        const env = chat(name, trainSeed(i), options);
        const terse = createEnvironment(name, trainSeed(i), options);
        const r = await act(env, env.solution('tool'));
        assert.deepEqual(r, terse.act('tool', terse.solution('tool')), `${name} seed ${i}`);
        assert.equal(env.inner.observe('plan'), terse.observe('plan'), `${name} seed ${i}`);
      }
    }
  });

  test('a wrong list is acted as that list: its reward and its report, no parse error', async () => {
    const seed = trainSeed(6);
    const env = chat('plan-path', seed);
    const r = await act(env, block("moves = ['U', 'U', 'L']\nprint('thinking...')\nprint('**Actions List**:', moves)"));
    const terse = createEnvironment('plan-path', seed);
    assert.deepEqual(r, terse.act('tool', 'UUL'));
    assert.equal(r.parseError, null);
    assert.match(env.observe('plan'), /\ntool: UUL: /);
    // Sudoku: the fills a program computes, printed as Python lists.
    const sudoku = chat('sudoku', trainSeed(2));
    const fill = createEnvironment('sudoku', trainSeed(2)).solution('tool').split(' ')[0]!;
    const s = await act(sudoku, block(`fills = [[${fill}]]\nprint("**Actions List**: " + str(fills))`));
    const sudokuTerse = createEnvironment('sudoku', trainSeed(2));
    assert.deepEqual(s, sudokuTerse.act('tool', fill));
  });

  test('programs that give no list: the parse-error path with a reason naming the failure, quoting nothing', async () => {
    const seed = trainSeed(7);
    const cases: [string, string][] = [
      ['I would go right, then down.\n#### ["R","D"]', 'no ```python code block'],
      [block("raise ValueError('secret words')"), 'the program failed (ValueError)'],
      [block('x = 1'), 'the program printed nothing'],
      [block("print('secret words')"), "the program's output: no line '**Actions List**: [...]'"],
      [block("print('**Actions List**: [\"Q\"]')"), "the program's output: answer item 1 is not a move (starts with 'Q'); use \"U\", \"D\", \"L\", \"R\""],
      [block('while True: pass'), 'the program ran out of time'],
      [block("import sys\nwhile True: sys.stdout.write('x' * 65536)"), 'the program printed more than the output limit'],
    ];
    for (const [text, error] of cases) {
      const env = chat('plan-path', seed);
      const r = await act(env, text);
      assert.deepEqual(r, parseFailure('plan-path', seed, {}, error), error);
      assert.doesNotMatch(r.parseError!, /secret/);
      assert.equal(env.stats.tool?.parseErrors, 1, error);
      assert.equal(r.localReward, parsePenalty);
      assert.equal(r.teamReward, 0);
      assert.match(env.observe('plan'), /\ntool: no valid proposal\n/, `${error}: the planner is told`);
    }
  });

  test('a clone is independent: its tool program changes neither the source nor a sibling', async () => {
    const env = chat('sokoban', trainSeed(3));
    const a = env.clone();
    const b = env.clone();
    const ra = await act(a, a.solution('tool'));
    const rb = await act(b, block('raise RuntimeError()'));
    assert.equal(ra.parseError, null);
    assert.equal(rb.parseError, 'the program failed (RuntimeError)');
    assert.equal(env.currentAgent(), 'tool');
    assert.deepEqual(env.stats.tool, { acts: 0, parseErrors: 0, invalidMoves: 0 });
    assert.equal(a.stats.tool?.parseErrors, 0);
    assert.equal(b.stats.tool?.parseErrors, 1);
    assert.notEqual(a.observe('plan'), b.observe('plan'));
    assert.deepEqual(await act(env, env.solution('tool')), ra, 'the source acts as the first clone did');
  });
});

test('a run opens the sandbox when chat prompts make the tool write code: team chat yes, terse and single no', async () => {
  const roomy = { config: { ...defaultModelConfig, maxSequenceLength: 4096 } };
  const resolve = async (env: Record<string, unknown>) => {
    const single = (env.options as { variant?: string }).variant === 'single';
    const team = { policies: Object.fromEntries(Object.entries(tinyConfig.policies).map(([id, p]) => [id, { ...p, model: 'base' }])), router: tinyConfig.router };
    const solo = { specialization: 'L0', policies: { shared: { model: 'base' } }, router: { solo: 'shared' } };
    return resolveExperiment(parseExperimentConfig({ ...tinyConfig, env, models: { base: roomy }, ...(single ? solo : team) }, 'test config'), join(tmpdir(), 'experiment.json'));
  };
  assert.equal((await resolve(tinyConfig.env)).env.runsCode, false);
  assert.equal((await resolve({ ...tinyConfig.env, promptStyle: 'chat' })).env.runsCode, true);
  assert.equal((await resolve({ ...tinyConfig.env, options: { size: 3, variant: 'single' }, promptStyle: 'chat' })).env.runsCode, false);
});
