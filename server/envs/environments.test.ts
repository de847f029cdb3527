// The contract every registered environment keeps (environment.ts): the solver's texts solve it
// through `act`, it is deterministic, clones are independent, malformed text never throws and is
// penalised and counted, and every text it produces is printable ASCII + '\n'.
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { isPrintableText } from './action-text.ts';
import type { Environment, EnvironmentFactory } from './environment.ts';
import { createEnvironment, environmentNames, environments, warmStartOptions, type EnvironmentName } from './environments.ts';
import { parsePenalty } from './puzzle-environment.ts';
import { Rng } from './rng.ts';
import { trainSeed, validationSeed } from './seed-ranges.ts';
import { rolloutSolver } from './solver-rollout.ts';
import { ticTacToeRewards } from './tic-tac-toe.ts';
import { hanabiRewards } from './hanabi/hanabi-env.ts';

interface Config {
  readonly label: string;
  readonly name: EnvironmentName;
  readonly options: Record<string, unknown>;
  /** How many seeds the solver test covers. */
  readonly seeds: number;
  /** Independent oracle for "this text is a well-formed action". */
  readonly wellFormed: RegExp;
  /** Characters random play draws from. */
  readonly alphabet: string;
  /** Grammar-biased fuzz: mostly well-formed text with occasional slips. */
  readonly nearMiss: (rng: Rng) => string;
}

const ws = '[ \\t\\r\\n]*';
const moves = new RegExp(`^${ws}[UDLR]+${ws}$`);
const fills4 = new RegExp(`^${ws}[1-4],[1-4],[0-4]( [1-4],[1-4],[0-4])*${ws}$`);
const digit = new RegExp(`^${ws}[1-9]${ws}$`);
const hanabiMove = (players: number) => new RegExp(`^${ws}((play|discard) [1-9]|hint p[1-${players}] [RYGWB1-5])${ws}$`);

/** Joins `count` parts from `part`, separated mostly by `sep`, sometimes by a slip. */
function sequence(rng: Rng, count: number, part: () => string, sep: string, slips: string): string {
  const parts = Array.from({ length: count }, part);
  return parts.map((p, i) => (i === 0 ? p : (rng.chance(0.05) ? slips[rng.int(slips.length)] : sep) + p)).join('');
}

const nearMoves = (rng: Rng): string => sequence(rng, rng.int(12), () => (rng.chance(0.03) ? 'u' : 'UDLR'[rng.int(4)] as string), '', ' ,\n');
const nearFills4 = (rng: Rng): string =>
  sequence(rng, rng.int(6), () => {
    const d = (lo: number, hi: number): number => (rng.chance(0.05) ? rng.int(10) : lo + rng.int(hi - lo + 1));
    return [d(1, 4), d(1, 4), d(0, 4)].join(rng.chance(0.05) ? ';' : ',');
  }, ' ', ',\n');
const nearHanabi = (rng: Rng): string =>
  rng.chance(0.5)
    ? `${rng.pick(['play', 'discard', 'Play', 'discard '])} ${rng.int(11)}`
    : `hint ${rng.pick(['p1', 'p2', 'p3', 'p0', 'p', '2'])} ${rng.pick(['R', 'Y', 'G', 'W', 'B', '1', '5', '6', 'r', 'RG'])}`;
const nearDigit = (rng: Rng): string => sequence(rng, 1 + rng.int(2), () => '0123456789x'[rng.int(11)] as string, '', ' ,');

const configs: readonly Config[] = [
  { label: 'plan-path 5x5 team', name: 'plan-path', options: {}, seeds: 300, wellFormed: moves, alphabet: 'UDLRudx \n', nearMiss: nearMoves },
  { label: 'plan-path 5x5 single', name: 'plan-path', options: { variant: 'single' }, seeds: 300, wellFormed: moves, alphabet: 'UDLR ,\n', nearMiss: nearMoves },
  { label: 'plan-path 10x10 team', name: 'plan-path', options: { size: 10, maxTurns: 5 }, seeds: 100, wellFormed: moves, alphabet: 'UDLR', nearMiss: nearMoves },
  { label: 'sudoku 4x4 team', name: 'sudoku', options: {}, seeds: 300, wellFormed: fills4, alphabet: '0123456, \n', nearMiss: nearFills4 },
  { label: 'sudoku 4x4 single', name: 'sudoku', options: { variant: 'single', emptyCells: 10 }, seeds: 300, wellFormed: fills4, alphabet: '01234,  ', nearMiss: nearFills4 },
  { label: 'sudoku 9x9 team', name: 'sudoku', options: { size: 9, emptyCells: 30 }, seeds: 5, wellFormed: /^$/, alphabet: '', nearMiss: () => '' },
  { label: 'sokoban 6x6 team', name: 'sokoban', options: {}, seeds: 300, wellFormed: moves, alphabet: 'UDLR lr\n', nearMiss: nearMoves },
  { label: 'sokoban 6x6 single', name: 'sokoban', options: { variant: 'single' }, seeds: 300, wellFormed: moves, alphabet: 'UDLR', nearMiss: nearMoves },
  { label: 'tic-tac-toe', name: 'tic-tac-toe', options: {}, seeds: 5, wellFormed: digit, alphabet: '0123456789 x\n', nearMiss: nearDigit },
  { label: 'hanabi small', name: 'hanabi', options: {}, seeds: 60, wellFormed: hanabiMove(2), alphabet: 'playdiscrhnt 12p3RG\n', nearMiss: nearHanabi },
  { label: 'hanabi full 3 players', name: 'hanabi', options: { colours: 5, players: 3 }, seeds: 30, wellFormed: hanabiMove(3), alphabet: 'playdiscrhnt 12p3RG', nearMiss: nearHanabi },
  { label: 'tic-tac-toe opening 3 minimax', name: 'tic-tac-toe', options: { openingMoves: 3, reward: 'minimax' }, seeds: 200, wellFormed: digit, alphabet: '19 ', nearMiss: nearDigit },
];

/** Seeds from both ranges: what training and validation will actually use. */
function seedsFor(count: number): number[] {
  return Array.from({ length: count }, (_, i) => (i % 2 === 0 ? trainSeed(i * 7919) : validationSeed(i)));
}

function make(c: Config, seed: number): Environment {
  return createEnvironment(c.name, seed, c.options);
}

function randomText(rng: Rng, alphabet: string, maxLength: number): string {
  let s = '';
  const n = rng.int(maxLength + 1);
  for (let i = 0; i < n; i++) s += alphabet[rng.int(alphabet.length)];
  return s;
}

const printableAlphabet = Array.from({ length: 95 }, (_, i) => String.fromCharCode(32 + i)).join('') + '\n\t\r';

/** Arbitrary UTF-16 code units (lone surrogates, NUL, controls, non-ASCII) and decoded random bytes. */
function junkText(rng: Rng): string {
  if (rng.chance(0.5)) {
    return String.fromCharCode(...Array.from({ length: rng.int(40) }, () => rng.int(0x10000)));
  }
  const bytes = Buffer.from(Array.from({ length: rng.int(40) }, () => rng.int(256)));
  return rng.chance(0.5) ? bytes.toString('utf8') : bytes.toString('latin1');
}

/** Brings a fresh environment to its first committing act (the planner in the team workflow). */
function atEachAgent(env: Environment): Environment[] {
  const out = [env.clone()];
  if (env.agents[0] === 'tool') {
    const plan = env.clone();
    plan.act('tool', plan.solution('tool'));
    out.push(plan);
  }
  return out;
}

/**
 * Other values of each environment's reward-only options (`rewardOnlyOptions`): the contract test
 * plays each against the default. An environment that declares an option must list it here.
 */
const rewardOnlyAlternatives: { readonly [N in EnvironmentName]?: Readonly<Record<string, readonly unknown[]>> } = {
  hanabi: { fusePenalty: [0, 0.25, 7], bombOut: ['keep'], playableHintReward: [0.5, 10] },
  sokoban: { stuckMoves: [1, 30, 200] },
};

/**
 * One episode's trace apart from rewards: each prompt, act, outcome and the solver's answer. Acts
 * mix the solver's answer with near-miss text (misplays, illegal moves, forfeits), so the trace
 * reaches states that solver play never does.
 */
function traceWithoutRewards(name: EnvironmentName, options: Record<string, unknown>, seed: number, nearMiss: (rng: Rng) => string): string[] {
  const env = createEnvironment(name, seed, options);
  const rng = new Rng(seed, 'reward-only trace');
  const out: string[] = [];
  for (let i = 0; i < 400 && !env.done; i++) {
    const agent = env.currentAgent();
    const solution = env.solution(agent);
    const text = rng.chance(0.6) ? solution : nearMiss(rng);
    const before = env.observe(agent);
    const r = env.act(agent, text);
    out.push(JSON.stringify({ agent, before, solution, text, parseError: r.parseError, done: r.done, success: r.success, info: r.info }));
  }
  out.push(JSON.stringify({ done: env.done, success: env.success, turn: env.turn }));
  return out;
}

describe('environment registry', () => {
  test('every registered name is listed and creates an environment of that name', () => {
    assert.deepEqual([...environmentNames].sort(), Object.keys(environments).sort());
    for (const name of environmentNames) assert.equal(createEnvironment(name, 1).name, name);
  });

  test('unknown names, bad seeds and bad options are errors that name the culprit', () => {
    assert.throws(() => createEnvironment('chess', 1), /unknown environment 'chess' \(known: plan-path, sudoku, sokoban, tic-tac-toe, math, code, hanabi\)/);
    assert.throws(() => createEnvironment('plan-path', -1), /seed must be a non-negative safe integer/);
    assert.throws(() => createEnvironment('sokoban', 1.5), /seed/);
    assert.throws(() => createEnvironment('sudoku', Number.NaN), /seed/);
    assert.throws(() => createEnvironment('plan-path', 1, { size: 2 }), /invalid plan-path options:\n {2}size: /);
    assert.throws(() => createEnvironment('plan-path', 1, { sise: 5 }), /Unrecognized key.*sise/);
    assert.throws(() => createEnvironment('sudoku', 1, { size: 5 }), /size/);
    assert.throws(() => createEnvironment('sudoku', 1, { emptyCells: 16 }), /emptyCells: must be less than 16/);
    assert.throws(() => createEnvironment('sokoban', 1, { variant: 'duo' }), /variant/);
    assert.throws(() => createEnvironment('sokoban', 1, { maxTurns: 0 }), /maxTurns/);
    assert.throws(() => createEnvironment('tic-tac-toe', 1, { openingMoves: 5 }), /openingMoves/);
    assert.throws(() => createEnvironment('tic-tac-toe', 1, { reward: 'shaped' }), /reward/);
  });

  test('a reward-only option changes no prompt, act, outcome or solver answer: only rewards', () => {
    const nearMissOf = (name: EnvironmentName) => configs.find((c) => c.name === name)!.nearMiss;
    for (const name of environmentNames) {
      const declared = [...(environments[name] as EnvironmentFactory<unknown>).rewardOnlyOptions ?? []].sort();
      assert.deepEqual(declared, Object.keys(rewardOnlyAlternatives[name] ?? {}).sort(), `${name}: rewardOnlyOptions and the values this test tries name the same options`);
      for (const [option, values] of Object.entries(rewardOnlyAlternatives[name] ?? {})) {
        for (const value of values) {
          for (const seed of seedsFor(40)) {
            const plain = traceWithoutRewards(name, {}, seed, nearMissOf(name));
            assert.deepEqual(traceWithoutRewards(name, { [option]: value }, seed, nearMissOf(name)), plain, `${name} ${option}: ${JSON.stringify(value)}, seed ${seed}`);
          }
        }
        assert.deepEqual(warmStartOptions(name, { ...(environments[name].optionsSchema.parse({}) as object), [option]: values[0] }), environments[name].optionsSchema.parse({}), `${name}: the warm start keys ${option} at its default`);
      }
    }
  });

  test('with a split, a seed from the other range is refused', () => {
    assert.equal(createEnvironment('sokoban', trainSeed(5), {}, 'train').seed, trainSeed(5));
    assert.equal(createEnvironment('sokoban', validationSeed(5), {}, 'validation').seed, validationSeed(5));
    assert.throws(() => createEnvironment('sokoban', validationSeed(5), {}, 'train'), /seed 1000000005 is not a train seed/);
    assert.throws(() => createEnvironment('sokoban', trainSeed(5), {}, 'validation'), /is not a validation seed/);
  });

  test('caller bugs throw: unknown agent, acting out of turn, acting or asking for a solution after the end', () => {
    const env = createEnvironment('plan-path', 3);
    assert.throws(() => env.observe('planner'), /unknown agent 'planner'/);
    assert.throws(() => env.act('plan', 'R'), /acted out of turn; it is 'tool''s turn/);
    env.act('tool', env.solution('tool'));
    env.act('plan', env.solution('plan'));
    assert.ok(env.done && env.success);
    assert.throws(() => env.act('tool', 'R'), /after the episode ended/);
    assert.throws(() => env.solution('tool'), /over/);
  });
});

for (const c of configs) {
  describe(c.label, () => {
    test(`the solver's texts solve ${c.seeds} seeds through act, with printable prompts`, async () => {
      for (const seed of seedsFor(c.seeds)) {
        const env = make(c, seed);
        const before = env.observe(env.currentAgent());
        const r = await rolloutSolver(env);
        assert.equal(r.success, true, `seed ${seed} not solved`);
        assert.equal(env.observe(env.currentAgent()), before, 'rolloutSolver must not touch its argument');
        // Games: the solver is a player, not a one-round solution.
        if (c.name === 'tic-tac-toe' || c.name === 'hanabi') continue;
        assert.equal(r.turns, 1, `seed ${seed}: the solver solves in one round`);
        assert.ok(r.teamReturn > 0, `seed ${seed}: positive team return`);
        assert.equal(r.demonstrations.length, env.agents.length);
        for (const d of r.demonstrations) {
          assert.ok(isPrintableText(d.observation) && isPrintableText(d.response), `seed ${seed}: non-printable text`);
          if (c.name !== 'sudoku' || c.options['size'] !== 9) {
            assert.ok(d.observation.length + d.response.length <= 320, `seed ${seed}: prompt + response too long for a tiny model (${d.observation.length})`);
          }
        }
        assert.ok(env.optimalMoves !== null && env.optimalMoves >= 1);
      }
    });

    test('same seed, same episode; different seeds, different puzzles', () => {
      const renderings = new Set<string>();
      const rng = new Rng(1, c.label);
      for (const seed of seedsFor(40)) {
        const a = make(c, seed);
        const b = make(c, seed);
        for (const agent of a.agents) assert.equal(a.observe(agent), b.observe(agent));
        renderings.add(a.observe(a.currentAgent()));
        // The same texts give the same results, junk and solver answers mixed.
        while (!a.done) {
          const agent = a.currentAgent();
          const text = rng.chance(0.3) ? randomText(rng, c.alphabet + 'UR1,', 12) : a.solution(agent);
          assert.deepEqual(a.act(agent, text), b.act(agent, text));
          assert.equal(a.observe(a.currentAgent()), b.observe(b.currentAgent()));
        }
        assert.deepEqual(a.stats, b.stats);
      }
      if (!(c.name === 'tic-tac-toe' && c.options['openingMoves'] === undefined)) assert.ok(renderings.size >= 30, `${renderings.size} distinct puzzles in 40 seeds`);
    });

    test('clones are deep and independent', () => {
      for (const seed of seedsFor(20)) {
        const env = make(c, seed);
        const agent = env.currentAgent();
        const snapshot = { obs: env.observe(agent), turn: env.turn, stats: env.stats, done: env.done };
        const copy = env.clone();
        assert.equal(copy.observe(agent), snapshot.obs);
        copy.act(agent, copy.solution(agent));
        if (!copy.done) copy.act(copy.currentAgent(), 'junk!');
        assert.deepEqual({ obs: env.observe(agent), turn: env.turn, stats: env.stats, done: env.done }, snapshot);
        // And the other way: stepping the source leaves an earlier clone alone.
        const copy2 = env.clone();
        const copyObs = copy2.observe(agent);
        env.act(agent, env.solution(agent));
        assert.equal(copy2.observe(agent), copyObs);
        assert.equal(copy2.currentAgent(), agent);
        // A clone continues exactly like its source.
        const twin = env.clone();
        while (!env.done) {
          const next = env.currentAgent();
          const text = env.solution(next);
          assert.deepEqual(twin.act(next, text), env.act(next, text));
        }
        assert.equal(twin.done, true);
      }
    });

    if (c.alphabet === '') return;

    test('fuzzed text never throws; malformed text is a parse error, penalised and counted', () => {
      const rng = new Rng(2, c.label);
      const penalty = c.name === 'tic-tac-toe' ? ticTacToeRewards.forfeit : c.name === 'hanabi' ? hanabiRewards.malformed : parsePenalty;
      let malformed = 0;
      let wellFormed = 0;
      for (const start of atEachAgent(make(c, trainSeed(11)))) {
        const agent = start.currentAgent();
        for (let i = 0; i < 2500; i++) {
          const text =
            i % 3 === 0 ? junkText(rng) : i % 3 === 1 ? randomText(rng, printableAlphabet, 30) : c.nearMiss(rng);
          const env = start.clone();
          const r = env.act(agent, text);
          assert.ok(isPrintableText(r.info), `info is not printable for ${JSON.stringify(text)}`);
          const expectError = !c.wellFormed.test(text);
          assert.equal(r.parseError !== null, expectError, `parse verdict for ${JSON.stringify(text)}: ${r.parseError}`);
          if (r.parseError !== null) {
            malformed++;
            assert.ok(r.parseError.length > 0 && isPrintableText(r.parseError));
            assert.equal(r.localReward, penalty);
            assert.equal(r.teamReward, 0);
            assert.equal(env.stats[agent]?.parseErrors, (start.stats[agent]?.parseErrors ?? 0) + 1);
            for (const a of env.agents) assert.ok(isPrintableText(env.observe(a)));
          } else {
            wellFormed++;
          }
        }
      }
      assert.ok(malformed > 1500 && wellFormed > 100, `malformed ${malformed}, well-formed ${wellFormed}`);
    });

    test('random play ends within maxTurns rounds with printable prompts throughout', () => {
      const rng = new Rng(3, c.label);
      for (const seed of seedsFor(60)) {
        const env = make(c, seed);
        let acts = 0;
        while (!env.done) {
          const agent = env.currentAgent();
          const prompt = env.observe(agent);
          assert.ok(isPrintableText(prompt), prompt);
          assert.ok(prompt.endsWith(`\n`));
          const r = env.act(agent, rng.chance(0.2) ? junkText(rng) : randomText(rng, c.alphabet, 12));
          assert.equal(r.done, env.done);
          assert.equal(r.success, env.success);
          acts++;
          assert.ok(env.turn <= env.maxTurns);
        }
        assert.ok(acts <= env.maxTurns * env.agents.length);
        const total = Object.values(env.stats).reduce((n, s) => n + s.acts, 0);
        assert.equal(total, acts);
      }
    });
  });
}
