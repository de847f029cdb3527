// ChatEnvironment keeps the environment contract (environment.ts): the solver's chat answers solve
// every environment through `act` with the same rewards as the terse texts, prompts are printable,
// clones are independent, unreadable answers are penalised and counted with the reader's reason,
// and caller bugs still throw. The messages also render through a real chat template. A puzzle
// team's tool answers with a program, so those cases run it in the real sandbox (bubblewrap);
// puzzle-code-tool.test.ts covers the programs themselves.
import { existsSync } from 'node:fs';
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { isPrintableText } from '../action-text.ts';
import type { Environment } from '../environment.ts';
import { createEnvironment, environmentNames } from '../environments.ts';
import { parsePenalty } from '../puzzle-environment.ts';
import { trainSeed } from '../seed-ranges.ts';
import { actWithPrograms } from '../program-acts.ts';
import { rolloutSolver } from '../solver-rollout.ts';
import { ticTacToeRewards } from '../tic-tac-toe.ts';
import { HfTokenizer } from '../../models/hf-tokenizer.ts';
import { qwen3Files } from '../../models/packaged-tokenizers.ts';
import { sandboxSchema } from '../../protocol/experiment-config.ts';
import { Sandbox } from '../../sandbox/sandbox.ts';
import { BWRAP } from '../../sandbox/sandbox-command.ts';
import { ChatEnvironment, promptTurns } from './chat-environment.ts';
import { withPromptStyle } from './prompt-styles.ts';

const cases = [
  { name: 'plan-path', options: {} },
  { name: 'plan-path', options: { variant: 'single', size: 8 } },
  { name: 'plan-path', options: { planAccepts: true } },
  { name: 'sokoban', options: {} },
  { name: 'sudoku', options: {} },
  { name: 'sudoku', options: { planAccepts: true } },
  { name: 'sudoku', options: { size: 9, emptyCells: 30, variant: 'single' } },
  { name: 'tic-tac-toe', options: { openingMoves: 2, reward: 'minimax' } },
] as const;

const chat = (name: string, seed: number, options: object): Environment => withPromptStyle(createEnvironment(name, seed, options), 'chat');

const skip = existsSync(BWRAP) ? false : `${BWRAP} is missing (apt-get install bubblewrap; CI installs it with test/sandbox/setup-sandbox.sh)`;
let sandbox: Sandbox | undefined;
/** The sandbox's runner, for the puzzle tool's programs (opened by the describe block below). */
const run = (requests: Parameters<Sandbox['runAll']>[0]) => sandbox!.runAll(requests);

test('every environment has chat prompts; terse is the environment itself', () => {
  for (const name of environmentNames) assert.ok(chat(name, trainSeed(0), {}) instanceof ChatEnvironment, name);
  const env = createEnvironment('plan-path', trainSeed(0));
  assert.equal(withPromptStyle(env, 'terse'), env);
  assert.deepEqual(promptTurns(env, 'tool'), [{ role: 'user', text: env.observe('tool') }]);
});

test('system and user messages: role, rules and answer format; the state from the terse observation', () => {
  const env = chat('plan-path', trainSeed(3), {}) as ChatEnvironment;
  const [system, user] = env.messages('tool');
  assert.equal(system?.role, 'system');
  assert.match(system!.text, /^You are the tool agent of a two-agent team/);
  assert.match(system!.text, /\n\*\*Actions List\*\*: \["D","D","R"\]\n/, "the tool's program prints its list");
  assert.match(system!.text, /```python\n# your code\n```$/);
  assert.match(env.messages('plan')[0]!.text, /#### \["D","D","R"\]$/);
  assert.equal(user?.role, 'user');
  assert.equal(env.observe('tool'), `${system!.text}\n\n${user!.text}`, 'observe is both messages as one text');
  const terse = env.inner.observe('tool');
  assert.ok(user!.text.includes(terse.replace(/tool: moves \(U\/D\/L\/R\)\n$/, '')), 'the state lines are kept');
  assert.ok(!user!.text.includes('tool: moves (U/D/L/R)'), "the terse request line is replaced");
  for (const name of environmentNames) {
    const e = chat(name, trainSeed(1), {});
    for (const agent of e.agents) for (const t of promptTurns(e, agent)) assert.ok(isPrintableText(t.text), `${name} ${agent} ${t.role}`);
  }
});

test("the messages render through Qwen3's chat template: system, user, then the assistant's turn", async () => {
  const tok = HfTokenizer.fromFiles(await qwen3Files(), 'qwen3');
  const env = chat('sudoku', trainSeed(0), {});
  const ids = tok.encodePrompt(promptTurns(env, 'tool'), { enableThinking: false });
  const text = tok.decode(ids);
  assert.ok(text.startsWith('<|im_start|>system\nYou are the tool agent of a two-agent team that must solve a Sudoku puzzle.'));
  const [system, user] = promptTurns(env, 'tool');
  assert.equal(text, `<|im_start|>system\n${system!.text}<|im_end|>\n<|im_start|>user\n${user!.text}<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n`);
  // The solver's chat answers, as the model would write them, read back as the same: the tool's
  // program, and the planner's action (its report line shows the proposal was read).
  const answer = tok.decode(tok.encodeResponse(env.solution('tool')), { specials: 'skip' });
  assert.deepEqual(env.programs!('tool', answer), env.programs!('tool', env.solution('tool')));
  assert.equal(env.programs!('tool', answer).length, 1);
  const plan = env.clone();
  plan.act('tool', '');
  const commit = tok.decode(tok.encodeResponse(plan.solution('plan')), { specials: 'skip' });
  assert.equal(plan.act('plan', commit).parseError, null);
});

describe('chat environments whose tool writes programs (the real sandbox)', { skip }, () => {
  before(async () => {
    sandbox = await Sandbox.open(sandboxSchema.parse({}));
  });
  after(async () => {
    await sandbox?.close();
  });

  test("the solver's chat answers play every environment exactly as its terse answers do", async () => {
    for (const c of cases) {
      // The seeds play at once, so the sandbox's pool runs their tool programs side by side.
      await Promise.all(Array.from({ length: 20 }, async (_, i) => {
        const seed = trainSeed(i);
        const terse = await rolloutSolver(createEnvironment(c.name, seed, c.options));
        const wrapped = await rolloutSolver(chat(c.name, seed, c.options), run);
        const what = `${c.name} ${JSON.stringify(c.options)} seed ${seed}`;
        assert.equal(wrapped.success, terse.success, what);
        assert.equal(wrapped.turns, terse.turns, what);
        assert.equal(wrapped.teamReturn, terse.teamReturn, what);
        assert.deepEqual(wrapped.localReturns, terse.localReturns, what);
        for (const d of wrapped.demonstrations) {
          // A team's tool answers with a program that prints its list; everyone else with a #### line.
          assert.match(d.response, d.agent === 'tool' ? /^\*\*Code:\*\*\n```python\nprint\('\*\*Actions List\*\*: \[.*\]'\)\n```$/ : /^#### /, what);
          assert.ok(isPrintableText(d.observation), `${what}: observation is printable ASCII`);
        }
      }));
    }
  });

  test("a team's flawed proposals are well formed, differ from the solver's, and play the same in chat", async () => {
    for (const c of cases.filter((c) => createEnvironment(c.name, trainSeed(0), c.options).agents.includes('plan'))) {
      let flawed = 0;
      for (let i = 0; i < 20; i++) {
        const terse = createEnvironment(c.name, trainSeed(i), c.options);
        const wrapped = chat(c.name, trainSeed(i), c.options) as ChatEnvironment;
        const what = `${c.name} ${JSON.stringify(c.options)} seed ${trainSeed(i)}`;
        const text = terse.flawedSolution?.('tool', i) ?? null;
        const chatText = wrapped.flawedSolution('tool', i);
        assert.equal(chatText === null, text === null, what);
        if (text === null || chatText === null) continue;
        flawed++;
        assert.notEqual(text, terse.solution('tool'), what);
        assert.match(chatText, /^print\('\*\*Actions List\*\*: /m, what);
        assert.equal(terse.act('tool', text).parseError, null, what);
        assert.equal((await actWithPrograms(wrapped, 'tool', chatText, run)).result.parseError, null, what);
        assert.equal(wrapped.inner.observe('plan'), terse.observe('plan'), `${what}: the chat answer is the same proposal`);
      }
      assert.ok(flawed >= 15, `${c.name}: ${flawed} of 20 states have a flawed solution`);
    }
  });

  test("planAccepts in chat: the planner is told it may answer '#### accept', which commits the proposal", async () => {
    const env = chat('plan-path', trainSeed(5), { planAccepts: true }) as ChatEnvironment;
    const path = env.inner.solution('tool');
    await actWithPrograms(env, 'tool', env.solution('tool'), run);
    assert.match(env.messages('plan')[0]!.text, /you may answer "#### accept" instead of writing it out again/);
    assert.doesNotMatch(env.messages('tool')[0]!.text, /accept/, 'only the planner is offered it');
    assert.equal(env.solution('plan'), '#### accept');
    const r = env.act('plan', 'The report says it reaches G.\n#### **Accept**');
    assert.equal(r.parseError, null);
    assert.equal(r.success, true);
    assert.match(r.info, new RegExp(`^accept ${path}: `));
    // Without the option the word is no move list.
    const off = chat('plan-path', trainSeed(5), {}) as ChatEnvironment;
    await actWithPrograms(off, 'tool', off.solution('tool'), run);
    assert.doesNotMatch(off.messages('plan')[0]!.text, /accept/);
    assert.notEqual(off.act('plan', '#### accept').parseError, null);
  });

  test('an unreadable answer: the environment penalises and counts it, with the chat reason', async () => {
    const env = chat('plan-path', trainSeed(5), {});
    const tool = await actWithPrograms(env, 'tool', 'I would go around the wall.\n```python\nprint("**Actions List**: " + str(["U", "R"]))\n```', run);
    assert.equal(tool.result.parseError, null);
    assert.match(env.observe('plan'), /\ntool: UR: /, "the planner sees the report on the program's list");
    const before = env.observe('plan');
    const r = env.act('plan', 'Going around the wall seems best.');
    assert.deepEqual(r, { teamReward: 0, localReward: parsePenalty, parseError: "no final answer: the response must end with a line '#### <answer>'", done: false, success: false, info: "parse error: no final answer: the response must end with a line '#### <answer>'" });
    assert.equal(env.stats.plan?.parseErrors, 1);
    assert.ok(env.observe('tool').includes(before.split('\n').slice(3, 8).join('\n')), 'the grid did not change');
    const game = chat('tic-tac-toe', trainSeed(0), {});
    const f = game.act('x', '#### 0');
    assert.equal(f.parseError, 'the answer must be one cell number from 1 to 9');
    assert.equal(f.localReward, ticTacToeRewards.forfeit);
    assert.equal(f.done, true);
  });

  test('clones are independent and caller bugs still throw', async () => {
    const env = chat('sokoban', trainSeed(2), {});
    const copy = env.clone();
    await actWithPrograms(copy, 'tool', copy.solution('tool'), run);
    assert.equal(env.currentAgent(), 'tool');
    assert.equal(copy.currentAgent(), 'plan');
    assert.throws(() => env.act('plan', '#### ["U"]'), /sokoban: agent 'plan' acted out of turn; it is 'tool''s turn/);
    assert.throws(() => env.act('judge', '#### ["U"]'), /sokoban: unknown agent 'judge'/);
    assert.throws(() => env.observe('judge'), /unknown agent 'judge'/);
  });
});
