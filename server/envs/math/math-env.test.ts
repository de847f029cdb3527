/**
 * The math environment through its whole contract, with programs run in the real sandbox:
 * every tier's solver program prints the gold answer, the rewards of right, wrong and failing
 * programs and answers, when episodes end, what reaches a prompt of a program's output, and that
 * an act with a program refuses to be scored without its execution.
 */
import assert from 'node:assert/strict';
import { existsSync } from 'node:fs';
import { after, before, describe, test } from 'node:test';
import { sandboxSchema } from '../../protocol/experiment-config.ts';
import { Sandbox } from '../../sandbox/sandbox.ts';
import { BWRAP } from '../../sandbox/sandbox-command.ts';
import { isPrintableText } from '../action-text.ts';
import { createEnvironment } from '../environments.ts';
import { actWithPrograms, NoProgramRunnerError } from '../program-acts.ts';
import { trainSeed } from '../seed-ranges.ts';
import { rolloutSolver } from '../solver-rollout.ts';
import { MathEnvironment, mathRewards } from './math-env.ts';
import { generateProblem, mathTiers } from './math-problems.ts';

const skip = existsSync(BWRAP) ? false : `${BWRAP} is missing (apt-get install bubblewrap; CI installs it with test/sandbox/setup-sandbox.sh)`;

describe('math environment', { skip }, () => {
  let sandbox: Sandbox;
  before(async () => {
    sandbox = await Sandbox.open(sandboxSchema.parse({ limits: { wallMs: 3000, cpuSeconds: 2 } }));
  });
  after(async () => {
    await sandbox?.close();
  });
  const team = (seed: number, tiers = ['mul']) => createEnvironment('math', seed, { tiers, maxTurns: 2 }) as MathEnvironment;

  test("every tier's solver program prints the gold answer in the sandbox, and the solver solves in one round", async () => {
    for (const tier of mathTiers) {
      for (let i = 0; i < 6; i++) {
        const env = team(trainSeed(i), [tier]);
        const r = await rolloutSolver(env, sandbox.runAll);
        assert.equal(r.success, true, `${tier} seed ${i}: ${env.problem.program}`);
        assert.equal(r.turns, 1);
        assert.equal(r.teamReturn, 1);
        assert.deepEqual(r.localReturns, { tool: mathRewards.right, reasoner: mathRewards.right });
        for (const d of r.demonstrations) assert.ok(isPrintableText(d.observation) && isPrintableText(d.response), `${tier}: printable text`);
        assert.match(r.demonstrations[1]!.observation, new RegExp(`\nout: ${env.problem.answer}\n`));
      }
    }
  });

  test('problems are determined by the seed and the tiers, and differ across seeds', () => {
    assert.deepEqual(generateProblem(5, ['add', 'mod']), generateProblem(5, ['add', 'mod']));
    const questions = new Set(Array.from({ length: 50 }, (_, i) => generateProblem(i, ['mul']).question));
    assert.ok(questions.size >= 49, `${questions.size} distinct questions of 50`);
  });

  test('tool rewards: +1 for the right output, 0 for a wrong one, -1 for an error, a timeout or no program', async () => {
    const cases: [string, number, string | null][] = [
      [`print(${team(1).problem.answer})`, mathRewards.right, null],
      ['print(12345)', mathRewards.wrong, null],
      ['print(1/0)', mathRewards.failed, null],
      ['while True: pass', mathRewards.failed, null],
      ['   ', mathRewards.failed, 'empty program'],
    ];
    for (const [code, reward, parseError] of cases) {
      const env = team(1);
      const { result, executions } = await actWithPrograms(env, 'tool', code, sandbox.runAll);
      assert.equal(result.localReward, reward, code);
      assert.equal(result.teamReward, 0, 'a program does not change the task state');
      assert.equal(result.parseError, parseError, code);
      assert.equal(executions.length, parseError === null ? 1 : 0);
    }
    const env = team(1);
    await actWithPrograms(env, 'tool', 'print(1/0)', sandbox.runAll);
    assert.match(env.observe('reasoner'), /\nout: error ZeroDivisionError\n/);
    const slow = team(1);
    await actWithPrograms(slow, 'tool', 'while True: pass', sandbox.runAll);
    assert.match(slow.observe('reasoner'), /\nout: timeout\n/);
  });

  test('the episode ends when the reasoner agrees with the tool; success is the reasoner being right', async () => {
    const right = team(2);
    await actWithPrograms(right, 'tool', right.problem.program, sandbox.runAll);
    const r1 = right.act('reasoner', right.problem.answer);
    assert.deepEqual([r1.done, r1.success, r1.teamReward, r1.localReward], [true, true, 1, 1]);

    const agreeWrong = team(2);
    await actWithPrograms(agreeWrong, 'tool', 'print(7)', sandbox.runAll);
    const r2 = agreeWrong.act('reasoner', '7');
    assert.deepEqual([r2.done, r2.success, r2.teamReward, r2.localReward], [true, false, 0, 0]);

    const disagree = team(2);
    await actWithPrograms(disagree, 'tool', 'print(7)', sandbox.runAll);
    const r3 = disagree.act('reasoner', disagree.problem.answer);
    assert.deepEqual([r3.done, r3.success, r3.teamReward], [false, true, 1], 'right but not agreed: the next round');
    assert.equal(disagree.turn, 1);
    assert.match(disagree.observe('tool'), new RegExp(`\nlast: out 7, answer ${disagree.problem.answer}\n`));
    await actWithPrograms(disagree, 'tool', 'print(8)', sandbox.runAll);
    const r4 = disagree.act('reasoner', '9');
    assert.deepEqual([r4.done, r4.success], [true, false], 'maxTurns ends it; the last answer decides success');

    const blank = team(2);
    await actWithPrograms(blank, 'tool', blank.problem.program, sandbox.runAll);
    const r5 = blank.act('reasoner', '  ');
    assert.deepEqual([r5.parseError, r5.localReward, r5.done], ['empty answer', mathRewards.failed, false]);
  });

  test('single: one reasoner answers the question alone in one round, running nothing', () => {
    const env = createEnvironment('math', 3, { variant: 'single' }) as MathEnvironment;
    assert.deepEqual(env.agents, ['solo']);
    assert.deepEqual(env.programs('solo', 'print(1)'), []);
    assert.doesNotMatch(env.observe('solo'), /out:/);
    const r = env.act('solo', env.problem.answer);
    assert.deepEqual([r.done, r.success, r.teamReward, r.localReward], [true, true, 1, 1]);
  });

  test("single-tool: one agent's program output is its answer", async () => {
    const env = createEnvironment('math', 3, { variant: 'single-tool' }) as MathEnvironment;
    const { result } = await actWithPrograms(env, 'solo', env.problem.program, sandbox.runAll);
    assert.deepEqual([result.done, result.success, result.teamReward, result.localReward], [true, true, 1, 1]);
    const wrong = createEnvironment('math', 3, { variant: 'single-tool' });
    const w = await actWithPrograms(wrong, 'solo', 'print(0)', sandbox.runAll);
    assert.deepEqual([w.result.done, w.result.success, w.result.teamReward, w.result.localReward], [true, false, 0, 0]);
  });

  test('what a program prints reaches the prompt printable and cut short', async () => {
    const env = team(4);
    await actWithPrograms(env, 'tool', 'print("\\u00e9\\x07" + "9" * 500)', sandbox.runAll);
    const prompt = env.observe('reasoner');
    assert.ok(isPrintableText(prompt), JSON.stringify(prompt));
    const out = /\nout: (.*)\n/.exec(prompt)![1]!;
    assert.ok(out.length <= 43, `${out.length} characters shown`);
  });

  test('a program is never scored without its execution: no runner, or too few executions, is a caller error', async () => {
    const env = team(5);
    await assert.rejects(actWithPrograms(env, 'tool', 'print(1)', undefined), NoProgramRunnerError);
    assert.throws(() => team(5).act('tool', 'print(1)'), /wrote a program but act got 0 executions/);
    await assert.rejects(rolloutSolver(team(5)), NoProgramRunnerError);
  });

  test('clones are independent', async () => {
    const env = team(6);
    const copy = env.clone();
    await actWithPrograms(copy, 'tool', copy.problem.program, sandbox.runAll);
    assert.equal(env.currentAgent(), 'tool');
    assert.equal(copy.currentAgent(), 'reasoner');
    assert.equal(env.stats.tool!.acts, 0);
  });
});
