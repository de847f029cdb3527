// Plan-Path against an independent re-reading of its prompt: the grid is parsed back from the text,
// and BFS and the per-move reward are recomputed here from the reference's formula.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { Environment } from './environment.ts';
import { flawMoves, type Direction } from './action-text.ts';
import { planPath, planPathRewards } from './plan-path.ts';
import { trainSeed } from './seed-ranges.ts';

interface Grid {
  n: number;
  walls: boolean[];
  player: [number, number];
  goal: [number, number];
}

function readGrid(prompt: string): Grid {
  const lines = prompt.split('\n');
  const n = Number(/(\d+)x\1/.exec(lines[0] ?? '')?.[1]);
  assert.equal(lines[1], 'P=you G=goal #=wall');
  assert.match(lines[2] ?? '', /^goal: (here|(\d+[UD])?( ?\d+[LR])?)$/);
  assert.match(lines[3] ?? '', /^open: (none|[UDLR]( [UDLR])*)$/);
  const rows = lines.slice(4, 4 + n);
  const walls: boolean[] = [];
  let player: [number, number] = [-1, -1];
  let goal: [number, number] = [-1, -1];
  rows.forEach((row, r) => {
    assert.equal(row.length, n);
    [...row].forEach((ch, c) => {
      assert.match(ch, /[.#PG]/);
      walls.push(ch === '#');
      if (ch === 'P') player = [r, c];
      if (ch === 'G') goal = [r, c];
    });
  });
  // The offset line must agree with the grid.
  const dr = goal[0] - player[0];
  const dc = goal[1] - player[1];
  const expected = [dr > 0 ? `${dr}D` : dr < 0 ? `${-dr}U` : '', dc > 0 ? `${dc}R` : dc < 0 ? `${-dc}L` : ''].filter(Boolean).join(' ') || 'here';
  assert.equal(lines[2], `goal: ${expected}`);
  // So must the open-moves line: the neighbours of P that are on the grid and not walls.
  const open = (['U', 'D', 'L', 'R'] as const).filter((d) => {
    const [r, c] = [player[0] + { U: -1, D: 1, L: 0, R: 0 }[d], player[1] + { U: 0, D: 0, L: -1, R: 1 }[d]];
    return r >= 0 && c >= 0 && r < n && c < n && !walls[r * n + c];
  });
  assert.equal(lines[3], `open: ${open.join(' ') || 'none'}`);
  return { n, walls, player, goal };
}

const delta = { U: [-1, 0], D: [1, 0], L: [0, -1], R: [0, 1] } as const;
type Letter = keyof typeof delta;

function bfs(g: Grid): number {
  const key = (r: number, c: number): number => r * g.n + c;
  const dist = new Map<number, number>([[key(...g.player), 0]]);
  const queue: Array<[number, number]> = [g.player];
  for (let i = 0; i < queue.length; i++) {
    const [r, c] = queue[i] as [number, number];
    if (r === g.goal[0] && c === g.goal[1]) return dist.get(key(r, c)) as number;
    for (const [dr, dc] of Object.values(delta)) {
      const [nr, nc] = [r + dr, c + dc];
      if (nr < 0 || nc < 0 || nr >= g.n || nc >= g.n || g.walls[key(nr, nc)] || dist.has(key(nr, nc))) continue;
      dist.set(key(nr, nc), (dist.get(key(r, c)) as number) + 1);
      queue.push([nr, nc]);
    }
  }
  return -1;
}

/** Walking distance from (r, c) to the goal (-1 when unreachable). */
function walk(g: Grid, r: number, c: number): number {
  return bfs({ ...g, player: [r, c] });
}

/**
 * The reference's per-move reward, summed, for moves from the start of an episode — with the
 * walking distance as the shaping potential, and letters past the goal rejected (plan-path.ts).
 */
function expectedReward(g: Grid, letters: string, optimum: number): { reward: number; invalid: number } {
  const k = planPathRewards;
  let [r, c] = g.player;
  let moved = 0;
  let reward = 0;
  let invalid = 0;
  const dist = (): number => walk(g, r, c);
  for (const ch of letters) {
    if (dist() === 0) {
      reward += k.invalid; // past the goal: rejected
      invalid++;
      continue;
    }
    const before = dist();
    const [dr, dc] = delta[ch as Letter];
    const [nr, nc] = [r + dr, c + dc];
    if (nr < 0 || nc < 0 || nr >= g.n || nc >= g.n || g.walls[nr * g.n + nc]) {
      reward += k.invalid;
      invalid++;
      moved++; // the reference counts a bump as a step
    } else {
      [r, c] = [nr, nc];
      moved++;
      reward += k.step;
    }
    reward += k.gamma * -dist() + before;
    if (dist() === 0) reward += k.goal + (moved === optimum ? k.optimal : 0);
  }
  return { reward, invalid };
}

function close(actual: number, expected: number, what: string): void {
  assert.ok(Math.abs(actual - expected) < 1e-5, `${what}: ${actual} vs ${expected}`);
}

const solo = (seed: number, options: Record<string, unknown> = {}): Environment => planPath.create(seed, { variant: 'single', ...options });

test('generated grids: start and goal distinct, goal BFS-reachable at distance >= 2 equal to optimalMoves', () => {
  for (let i = 0; i < 300; i++) {
    for (const size of [5, 10]) {
      const env = solo(trainSeed(i), { size });
      const g = readGrid(env.observe('solo'));
      assert.equal(g.n, size);
      const d = bfs(g);
      assert.ok(d >= 2, `seed ${i}: distance ${d}`);
      assert.equal(env.optimalMoves, d);
      assert.equal(env.solution('solo').length, d);
    }
  }
  assert.ok(!readGrid(solo(3, { wallRatio: 0 }).observe('solo')).walls.includes(true));
});

test('rewards follow the reference formula: step, shaping, goal and optimality bonus', () => {
  for (let i = 0; i < 200; i++) {
    const env = solo(trainSeed(i));
    const g = readGrid(env.observe('solo'));
    const path = env.solution('solo');
    // Optimal path: the bonus is paid; the six letters after the goal are rejected moves.
    const best = env.clone().act('solo', `${path}LLRRUD`);
    close(best.teamReward, expectedReward(g, `${path}LLRRUD`, bfs(g)).reward, `seed ${i} optimal`);
    close(best.teamReward, expectedReward(g, path, bfs(g)).reward + 6 * planPathRewards.invalid, `seed ${i} padding costs`);
    assert.ok(best.info.includes('6 blocked'), best.info);
    assert.equal(best.localReward, best.teamReward);
    assert.ok(best.success && best.done);
    // A detour (bump, or step away and back) reaches the goal without the optimality bonus.
    const d = (['U', 'D', 'L', 'R'] as const)[i % 4] as Letter;
    const [r, c] = [g.player[0] + delta[d][0], g.player[1] + delta[d][1]];
    const open = r >= 0 && c >= 0 && r < g.n && c < g.n && !g.walls[r * g.n + c] && !(r === g.goal[0] && c === g.goal[1]);
    const detour = `${d}${open ? { U: 'D', D: 'U', L: 'R', R: 'L' }[d] : ''}${path}`;
    const slow = env.clone().act('solo', detour);
    const want = expectedReward(g, detour, bfs(g));
    close(slow.teamReward, want.reward, `seed ${i} detour`);
    assert.ok(slow.success);
    // A wall bump counts as a step, as in the reference: no bonus after it either.
    close(slow.teamReward, expectedReward(g, detour, -1).reward, `seed ${i}: no bonus after a ${open ? 'detour' : 'bump'}`);
    assert.equal(slow.info.includes(`${want.invalid} blocked`), true, slow.info);
  }
});

test('a turn that starts a detour around a wall outscores one that bumps into it', () => {
  // The point of walking-distance shaping: turn-level advantages must not prefer the wall.
  let checked = 0;
  for (let i = 0; i < 400 && checked < 20; i++) {
    const env = solo(trainSeed(i));
    const g = readGrid(env.observe('solo'));
    const first = env.solution('solo')[0] as Letter;
    const [r, c] = [g.player[0] + delta[first][0], g.player[1] + delta[first][1]];
    const manhattan = (a: readonly number[]): number => Math.abs(a[0]! - g.goal[0]) + Math.abs(a[1]! - g.goal[1]);
    if (manhattan([r, c]) < manhattan(g.player)) continue; // not a detour
    const bump = (['U', 'D', 'L', 'R'] as const).find((d) => {
      const [br, bc] = [g.player[0] + delta[d][0], g.player[1] + delta[d][1]];
      return br < 0 || bc < 0 || br >= g.n || bc >= g.n || g.walls[br * g.n + bc];
    });
    if (bump === undefined) continue;
    const detour = env.clone().act('solo', first);
    const bumped = env.clone().act('solo', bump);
    assert.ok(detour.teamReward > bumped.teamReward + 0.5, `seed ${i}: detour ${detour.teamReward} vs bump ${bumped.teamReward}`);
    checked++;
  }
  assert.ok(checked >= 5, `only ${checked} detour starts found`);
});

test('a blocked move costs -0.1 plus shaping, does not move, and is counted', () => {
  let checked = 0;
  for (let i = 0; i < 100; i++) {
    const env = solo(trainSeed(i));
    const g = readGrid(env.observe('solo'));
    for (const d of ['U', 'D', 'L', 'R'] as const) {
      const [r, c] = [g.player[0] + delta[d][0], g.player[1] + delta[d][1]];
      if (r >= 0 && c >= 0 && r < g.n && c < g.n && !g.walls[r * g.n + c]) continue;
      const copy = env.clone();
      const res = copy.act('solo', d);
      close(res.teamReward, -0.1 + (1 - 0.99) * bfs(g), `seed ${i} blocked ${d}`);
      assert.equal(copy.stats['solo']?.invalidMoves, 1);
      assert.deepEqual(readGrid(copy.observe('solo')).player, g.player);
      checked++;
    }
  }
  assert.ok(checked > 50);
});

test('team workflow: the tool is scored on a clone and its report reaches the planner', () => {
  const env = planPath.create(trainSeed(5));
  assert.deepEqual(env.agents, ['tool', 'plan']);
  const g = readGrid(env.observe('tool'));
  const path = env.solution('tool');
  const tool = env.act('tool', path);
  assert.equal(tool.teamReward, 0);
  close(tool.localReward, expectedReward(g, path, bfs(g)).reward, 'tool local');
  assert.equal(tool.done, false);
  assert.deepEqual(readGrid(env.observe('plan')).player, g.player, 'the proposal did not move the real state');
  assert.match(env.observe('plan'), new RegExp(`\ntool: ${path}: 0 from G, 0 blocked, goal yes\nplan: moves`));
  const plan = env.act('plan', 'U'.repeat(1));
  assert.equal(plan.localReward, plan.teamReward);
  assert.equal(env.turn, 1);
  // The next round starts with no report; a malformed proposal is reported as such.
  env.act('tool', 'go right');
  assert.match(env.observe('plan'), /\ntool: no valid proposal\n/);
});

test("verdictToPlanner: false shows the planner only the tool's proposal, as the reference does", () => {
  const on = planPath.create(trainSeed(5));
  const off = planPath.create(trainSeed(5), { verdictToPlanner: false });
  const path = on.solution('tool');
  const wrong = path.replace(/./g, (ch) => ({ U: 'D', D: 'U', L: 'R', R: 'L' })[ch] ?? ch);
  for (const env of [on, off]) env.act('tool', wrong);
  assert.match(on.observe('plan'), new RegExp(`\ntool: ${wrong}: \\d+ from G, \\d+ blocked, goal no\nplan: moves`));
  assert.match(off.observe('plan'), new RegExp(`\ntool: ${wrong}\nplan: moves`), 'no verdict');
  // Everything else is the same: rewards, and the tool's own report of its last proposal.
  const [a, b] = [on.clone(), off.clone()];
  const ra = a.act('plan', path);
  const rb = b.act('plan', path);
  assert.deepEqual(ra, rb);
  for (const env of [on, off]) env.act('plan', 'U');
  assert.equal(on.observe('tool'), off.observe('tool'));
  assert.throws(() => planPath.create(1, { verdictToPlanner: 'no' }), /verdictToPlanner/);
});

test("planAccepts: the planner's 'accept' commits the tool's proposal as parsed, and is its label when the proposal is right", () => {
  const env = planPath.create(trainSeed(5), { planAccepts: true });
  const path = env.solution('tool');
  assert.ok(path.length >= 2, 'seed 5 needs a path worth copying');
  env.act('tool', path);
  assert.match(env.observe('plan'), /\nplan: moves \(U\/D\/L\/R\) or accept\n$/);
  assert.equal(env.solution('plan'), 'accept', 'a right proposal is labelled accept');
  // Accepting scores exactly as writing the proposal out does.
  const copied = env.clone();
  const accepted = env.act('plan', ' accept\n');
  const written = copied.act('plan', path);
  assert.deepEqual({ ...accepted, info: accepted.info.replace(/^accept /, '') }, written);
  assert.match(accepted.info, new RegExp(`^accept ${path}: `));
  assert.equal(accepted.success, true);

  // A wrong proposal keeps the solver's answer as the label; accepting it commits the wrong moves.
  const wrongEnv = planPath.create(trainSeed(5), { planAccepts: true });
  const wrong = path.replace(/./g, (ch) => ({ U: 'D', D: 'U', L: 'R', R: 'L' })[ch] ?? ch);
  wrongEnv.act('tool', wrong);
  assert.equal(wrongEnv.solution('plan'), path);
  const r = wrongEnv.act('plan', 'accept');
  assert.equal(r.parseError, null);
  assert.equal(r.success, false);
  assert.match(r.info, new RegExp(`^accept ${wrong}: `));

  // Nothing to accept after a malformed proposal; and without the option 'accept' is no answer.
  const none = planPath.create(trainSeed(5), { planAccepts: true });
  none.act('tool', 'go right');
  assert.match(none.act('plan', 'accept').parseError ?? '', /nothing to accept: the tool made no valid proposal/);
  const off = planPath.create(trainSeed(5));
  off.act('tool', path);
  assert.equal(off.solution('plan'), path);
  assert.match(off.observe('plan'), /\nplan: moves \(U\/D\/L\/R\)\n$/);
  assert.match(off.act('plan', 'accept').parseError ?? '', /bad move 'a'/);
  assert.throws(() => planPath.create(1, { planAccepts: 1 }), /planAccepts/);
});

test("the tool's prompt is the state alone unless reportToTool repeats its last proposal and report", () => {
  const plain = planPath.create(trainSeed(5));
  const told = planPath.create(trainSeed(5), { reportToTool: true });
  const solo = planPath.create(trainSeed(5), { variant: 'single' });
  const path = plain.solution('tool');
  const wrong = path.replace(/./g, (ch) => ({ U: 'D', D: 'U', L: 'R', R: 'L' })[ch] ?? ch);
  for (const env of [plain, told]) {
    env.act('tool', wrong);
    env.act('plan', 'U');
  }
  solo.act('solo', 'U');
  // Without the option the tool sees what the solo agent sees in the same state, role line aside.
  assert.equal(plain.observe('tool').replace(/\ntool: /, '\nsolo: '), solo.observe('solo'));
  assert.doesNotMatch(plain.observe('tool'), /last tool/);
  assert.equal(told.observe('tool').replace(/\nlast tool: [^\n]*/, ''), plain.observe('tool'), 'the report line is the only difference');
  assert.match(told.observe('tool'), new RegExp(`\nlast tool: ${wrong}: \\d+ from G, \\d+ blocked, goal no\ntool: moves`));
  assert.equal(told.clone().observe('tool'), told.observe('tool'), 'clones keep the option and the report');
  // The rest of the episode is the same with and without it.
  assert.deepEqual(told.act('tool', path), plain.act('tool', path));
  assert.throws(() => planPath.create(1, { reportToTool: 1 }), /reportToTool/);
});

test('episodes end unsolved after maxTurns rounds of malformed answers', () => {
  const env = planPath.create(trainSeed(9), { maxTurns: 3 });
  let acts = 0;
  while (!env.done) {
    const r = env.act(env.currentAgent(), 'x');
    assert.equal(r.localReward, -2); // the reference agents' penalty (puzzle-environment.ts)
    acts++;
  }
  assert.equal(acts, 6);
  assert.equal(env.turn, 3);
  assert.equal(env.success, false);
  assert.deepEqual(env.stats, { tool: { acts: 3, parseErrors: 3, invalidMoves: 0 }, plan: { acts: 3, parseErrors: 3, invalidMoves: 0 } });
});

test('the parser is strict', () => {
  const env = solo(trainSeed(1));
  const verdict = (text: string): string | null => env.clone().act('solo', text).parseError;
  assert.equal(verdict('R'), null);
  assert.equal(verdict('  RDLU\n'), null);
  assert.match(verdict('') ?? '', /empty action/);
  assert.match(verdict('r') ?? '', /bad move 'r' at position 1/);
  assert.match(verdict('R D') ?? '', /bad move ' ' at position 2/);
  assert.match(verdict('R,D') ?? '', /bad move ',' at position 2/);
  assert.match(verdict('RR\u00e9') ?? '', /bad move code 233 at position 3/);
  assert.match(verdict('R'.repeat(51)) ?? '', /too many moves: at most 50/);
});

test("the planner's solution is the tool's proposal when it scores as well as the solver's answer", () => {
  // A seed whose solver path has a neighbouring pair that swaps into another shortest path.
  let found: { seed: number; canonical: string; other: string } | null = null;
  for (let i = 0; i < 200 && !found; i++) {
    const env = planPath.create(trainSeed(i), { size: 7 });
    const canonical = env.solution('tool');
    for (let j = 0; j + 1 < canonical.length && !found; j++) {
      if (canonical[j] === canonical[j + 1]) continue;
      const other = canonical.slice(0, j) + canonical[j + 1] + canonical[j] + canonical.slice(j + 2);
      const commit = (text: string) => {
        const probe = env.clone();
        probe.act('tool', text);
        return probe.act('plan', text);
      };
      const swapped = commit(other);
      if (swapped.success && swapped.teamReward === commit(canonical).teamReward) found = { seed: trainSeed(i), canonical, other };
    }
  }
  assert.ok(found, 'some seed has two shortest paths');
  const { seed, canonical, other } = found;
  const env = planPath.create(seed, { size: 7 });
  assert.equal(env.solution('plan'), canonical, 'before any proposal');
  env.act('tool', other);
  assert.equal(env.solution('plan'), other, 'another shortest path is copied');
  assert.equal(env.clone().solution('plan'), other, 'clones keep the proposal');
  assert.equal(env.solution('tool'), canonical, "the tool's own solution is the solver's");
  const viaCopy = env.clone().act('plan', other);
  const viaSolver = env.clone().act('plan', canonical);
  assert.equal(viaCopy.teamReward, viaSolver.teamReward, 'as good: the same reward');
  // A proposal that scores worse (one move short, or padded past the goal) is overruled.
  for (const worse of [canonical.slice(0, -1), `${canonical}U`]) {
    const e = planPath.create(seed, { size: 7 });
    e.act('tool', worse);
    assert.equal(e.solution('plan'), canonical, worse);
  }
  // The next round starts without a proposal.
  const next = planPath.create(seed, { size: 7 });
  next.act('tool', other);
  next.act('plan', 'U');
  if (!next.done) assert.equal(next.solution('plan'), next.solution('tool'));
});

test('flawed moves swap the chosen pair of different neighbours, else drop the last move', () => {
  assert.deepEqual(flawMoves([...'RRDD'] as Direction[], 0), [...'RDRD']);
  assert.deepEqual(flawMoves([...'RDLU'] as Direction[], 1), [...'RLDU']);
  assert.deepEqual(flawMoves([...'RDLU'] as Direction[], 4), [...'RLDU'], 'the variant wraps over the 3 pairs');
  assert.deepEqual(flawMoves([...'UUU'] as Direction[], 2), [...'UU']);
  assert.equal(flawMoves(['U'], 0), null);
  // The environment flaws the solver's answer, whose text acts like any other.
  const env = planPath.create(trainSeed(4), { size: 7 });
  const text = env.flawedSolution('tool', 0)!;
  assert.equal(text, flawMoves([...env.solution('tool')] as Direction[], 0)!.join(''));
});
