/**
 * Solver demonstrations for a team: the planner is shown proposals to copy and proposals to
 * overrule, and the tool's demonstrations are what they would be without the planner's.
 */
import assert from 'node:assert/strict';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import type { Environment } from '../envs/environment.ts';
import { createEnvironment, environments } from '../envs/environments.ts';
import { parseModelConfig } from '../models/model-config.ts';
import { defaultTokenizer as tok } from '../models/tokenizer.ts';
import type { TrainSequence } from '../models/train-batch.ts';
import { missedLossTarget, missedTargetText, readWarmStartEnd, solverDemonstrations, warmStartKey, type ProposalNoise } from './warm-start.ts';

const make = (seed: number) => createEnvironment('plan-path', seed, { size: 7 });
const text = (s: TrainSequence) => ({ prompt: tok.decode(s.tokens.subarray(0, s.promptLength)), answer: tok.decode(s.tokens.subarray(s.promptLength), { specials: 'skip' }) });

test("a team's planner demonstrations copy right proposals and overrule wrong ones", async () => {
  const demos = (await solverDemonstrations(make, 120, ['tool', 'plan'], tok)).map(text);
  const plan = demos.flatMap((d) => {
    const m = /\ntool: ([UDLR]+): .*goal (yes|no)\nplan: /.exec(d.prompt);
    return m ? [{ proposal: m[1]!, right: m[2] === 'yes', answer: d.answer }] : [];
  });
  const wrong = plan.filter((p) => !p.right);
  assert.ok(wrong.length >= 20, `${wrong.length} of ${plan.length} planner demonstrations show a wrong proposal`);
  assert.ok(wrong.every((p) => p.answer !== p.proposal), 'a wrong proposal is never copied');
  assert.ok(plan.filter((p) => p.right).every((p) => p.answer === p.proposal), 'a right proposal is copied (it scores as well as the solver)');
  // The tool's demonstrations are the ones a tool-only model gets: the planner's do not change them.
  const toolOnly = (await solverDemonstrations(make, 120, ['tool'], tok)).map(text);
  assert.deepEqual(demos.filter((d) => d.prompt.includes('\ntool: moves')), toolOnly);
});

test("a Sudoku team's flawed proposals are well formed: the planner sees a digit to overrule, never 'no valid proposal'", async () => {
  const sudoku = (seed: number) => createEnvironment('sudoku', seed, {});
  const demos = (await solverDemonstrations(sudoku, 30, ['plan'], tok)).map(text);
  const reports = demos.map((d) => /\ntool: (.*)\nplan: /.exec(d.prompt)?.[1] ?? '');
  assert.ok(reports.every((r) => r !== 'no valid proposal'), 'every proposal parses');
  // Episodes 0, 3, 6, ... start with a flawed proposal; the solver overrules it (a flawed fill never solves).
  const flawed = demos.filter((_, i) => !/solved yes$/.test(reports[i]!));
  assert.ok(flawed.length >= 8, `${flawed.length} of ${demos.length} planner demonstrations show a flawed proposal`);
  for (const d of flawed) assert.notEqual(d.answer, /\ntool: (.*): \d+ ok/.exec(d.prompt)?.[1], 'a flawed proposal is not copied');
});

test('warmStart.proposals sets the mix: no flawed proposals at 0, and missing ones teach the planner to solve alone', async () => {
  const planPrompts = async (noise: ProposalNoise) =>
    (await solverDemonstrations(make, 60, ['tool', 'plan'], tok, noise))
      .map(text)
      .filter((d) => /\nplan: moves/.test(d.prompt));
  const firstRoundFlaw = (d: { prompt: string }) => /goal no\nplan:/.test(d.prompt) && /turn 1\//.test(d.prompt);
  const defaults = await planPrompts({ flawedEvery: 3, missingEvery: 0 });
  const none = await planPrompts({ flawedEvery: 0, missingEvery: 0 });
  assert.ok(defaults.some(firstRoundFlaw), 'the default mix has first-round flaws');
  assert.ok(none.every((d) => !/goal no\nplan:/.test(d.prompt) || /turn [2-9]/.test(d.prompt)), 'no first-round proposal is flawed');
  // The default mix is the one solverDemonstrations uses without a mix.
  assert.deepEqual(defaults, (await solverDemonstrations(make, 60, ['tool', 'plan'], tok)).map(text).filter((d) => /\nplan: moves/.test(d.prompt)));

  const mixed = await planPrompts({ flawedEvery: 1, missingEvery: 2 });
  const missing = mixed.filter((d) => /\ntool: no valid proposal\nplan: /.test(d.prompt));
  // Episodes 0, 1, 3, 4, ... (not botched) alternate flawed and missing proposals: about a third of 60 are missing.
  assert.ok(missing.length >= 15, `${missing.length} planner demonstrations show no proposal`);
  for (const d of missing) assert.match(d.answer, /^[UDLR]+$/, "the planner answers with the solver's moves from the state alone");
  assert.ok(mixed.filter(firstRoundFlaw).length >= 5, 'flawed proposals remain');
});

/** Plan-Path's team with its agents renamed: roles must come from the turn order, not the names. */
class RenamedTeam implements Environment {
  readonly #env: Environment;
  readonly #names: Record<string, string>;
  readonly #inner: Record<string, string>;
  constructor(env: Environment, names: Record<string, string>) {
    this.#env = env;
    this.#names = names;
    this.#inner = Object.fromEntries(Object.entries(names).map(([inner, outer]) => [outer, inner]));
  }
  get name() { return this.#env.name; }
  get seed() { return this.#env.seed; }
  get agents() { return this.#env.agents.map((a) => this.#names[a]!); }
  get maxTurns() { return this.#env.maxTurns; }
  get turn() { return this.#env.turn; }
  get done() { return this.#env.done; }
  get success() { return this.#env.success; }
  get optimalMoves() { return this.#env.optimalMoves; }
  get stats() { return this.#env.stats; }
  currentAgent() { return this.#names[this.#env.currentAgent()]!; }
  observe(agent: string) { return this.#env.observe(this.#inner[agent]!); }
  act(agent: string, text: string) { return this.#env.act(this.#inner[agent]!, text); }
  clone(): Environment { return new RenamedTeam(this.#env.clone(), this.#names); }
  solution(agent: string) { return this.#env.solution(this.#inner[agent]!); }
  flawedSolution(agent: string, variant: number) { return this.#env.flawedSolution!(this.#inner[agent]!, variant); }
}

test("flawed proposals go to whichever agent reviews the round's first answer, whatever the agents are called", async () => {
  const renamed = (seed: number) => new RenamedTeam(make(seed), { tool: 'scout', plan: 'lead' });
  assert.deepEqual(renamed(1).agents, ['scout', 'lead']);
  const noise: ProposalNoise = { flawedEvery: 1, missingEvery: 2 };
  // Same environment, same demonstrations: the names change nothing, so the reviewer sees flawed and missing proposals.
  assert.deepEqual((await solverDemonstrations(renamed, 40, ['scout', 'lead'], tok, noise)).map(text), (await solverDemonstrations(make, 40, ['tool', 'plan'], tok, noise)).map(text));
  assert.deepEqual((await solverDemonstrations(renamed, 40, ['lead'], tok, noise)).map(text), (await solverDemonstrations(make, 40, ['plan'], tok, noise)).map(text));
});

test('the warm-start key takes reward-only options at their defaults, and every other option as given', async () => {
  const job = { modelId: 'base', config: parseModelConfig({ vocabSize: 112, hiddenSize: 16, numLayers: 1, numHeads: 2, intermediateSize: 32, maxSequenceLength: 400 }), weights: new Map(), weightsKey: 'init:1', agents: ['p1', 'p2'], maxNewTokens: 12 };
  const budget = { demonstrations: 40, steps: 6, batchSize: 8, lr: 5e-3 };
  const key = (options: Record<string, unknown>) => {
    const parsed = environments.hanabi.optionsSchema.parse(options); // as resolve-experiment passes them
    return warmStartKey(job, { name: 'hanabi', options: parsed, make: (seed) => createEnvironment('hanabi', seed, parsed) }, budget, tok);
  };
  const plain = await key({});
  assert.equal(await key({ fusePenalty: 0.25 }), plain, 'a penalty the demonstrations never see keys as the default');
  assert.equal(await key({ fusePenalty: 0, bombOut: 'keep' }), plain);
  assert.notEqual(await key({ showLegalMoves: true }), plain, 'a prompt option keys apart');
  assert.notEqual(await key({ fusePenalty: 0.25, showLegalMoves: true }), plain);
});

test("a cached warm start's end is read from done.json, and one that ran to its ceiling without its loss target is told apart", async () => {
  const dir = await mkdtemp(join(tmpdir(), 'troupe-ws-end-'));
  try {
    const entry = async (done: unknown) => {
      await writeFile(join(dir, 'done.json'), typeof done === 'string' ? done : JSON.stringify(done));
      return readWarmStartEnd(dir);
    };
    const budget = { demonstrations: 1500, steps: 600, batchSize: 32, lr: 3e-3, stopAtLoss: 0.15 };
    // Sudoku's single agent, seed 2: the ceiling ended it.
    const ceiling = await entry({ key: 'k', budget, stepsTrained: 600, smoothedLoss: 0.228 });
    assert.deepEqual(ceiling, { stepsTrained: 600, steps: 600, stopAtLoss: 0.15, smoothedLoss: 0.228 });
    assert.equal(missedLossTarget(ceiling!), true);
    assert.equal(missedTargetText(ceiling!), 'ran all 600 steps without reaching its loss target 0.15 (smoothed loss 0.2280)');
    // Its seed 5: the target ended it at step 257.
    assert.equal(missedLossTarget((await entry({ key: 'k', budget, stepsTrained: 257, smoothedLoss: 0.148 }))!), false);
    // Reached exactly at the last step, where the target is not checked: not missed, when the loss says so.
    assert.equal(missedLossTarget((await entry({ key: 'k', budget, stepsTrained: 600, smoothedLoss: 0.149 }))!), false);
    // An entry from before smoothedLoss was recorded: all its steps with a target means the target did not stop it.
    const older = await entry({ key: 'k', budget, stepsTrained: 600 });
    assert.equal(older!.smoothedLoss, null);
    assert.equal(missedLossTarget(older!), true);
    // No target: a warm start of all its steps is what its config asks for.
    assert.equal(missedLossTarget((await entry({ key: 'k', budget: { ...budget, stopAtLoss: undefined }, stepsTrained: 600, smoothedLoss: 0.3 }))!), false);
    // Entries that say nothing usable: none.
    assert.equal(await entry({ key: 'k', budget }), null, 'before stepsTrained was recorded');
    assert.equal(await entry({ key: 'k', budget, stepsTrained: 700 }), null, 'more steps than its budget');
    assert.equal(await entry('{"key": '), null, 'torn');
    await rm(join(dir, 'done.json'));
    assert.equal(await readWarmStartEnd(dir), null, 'no entry');
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
});
