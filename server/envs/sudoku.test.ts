// Sudoku: clues can never change (the reference's defect), puzzles have exactly one solution, the
// solver recovers from wrong fills, and the per-fill rewards match their definition.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { Environment } from './environment.ts';
import { trainSeed, validationSeed } from './seed-ranges.ts';
import { sudoku, sudokuRewards } from './sudoku.ts';

/** The grid read back from the prompt, row-major, 0 for empty. */
function readGrid(prompt: string): number[] {
  const lines = prompt.split('\n');
  const n = Number(/(\d)x\1/.exec(lines[0] ?? '')?.[1]);
  return lines.slice(2, 2 + n).flatMap((row) => {
    assert.equal(row.length, n);
    return [...row].map((ch) => (ch === '.' ? 0 : Number(ch)));
  });
}

/** Row, column and 2x2-box constraints of a 4x4 grid, as lists of cell indices. */
const units4: number[][] = [
  ...[0, 1, 2, 3].map((r) => [0, 1, 2, 3].map((c) => r * 4 + c)),
  ...[0, 1, 2, 3].map((c) => [0, 1, 2, 3].map((r) => r * 4 + c)),
  ...[0, 2, 8, 10].map((s) => [s, s + 1, s + 4, s + 5]),
];

function consistent(grid: readonly number[]): boolean {
  return units4.every((u) => {
    const vals = u.map((i) => grid[i] as number).filter((v) => v !== 0);
    return new Set(vals).size === vals.length;
  });
}

/** Brute-force completions of a 4x4 grid (independent of the environment's solver). */
function completions(grid: number[]): number {
  const i = grid.indexOf(0);
  if (i === -1) return 1;
  let count = 0;
  for (let v = 1; v <= 4; v++) {
    grid[i] = v;
    if (consistent(grid)) count += completions(grid);
  }
  grid[i] = 0;
  return count;
}

const solo = (seed: number, options: Record<string, unknown> = {}): Environment => sudoku.create(seed, { variant: 'single', ...options });
const fill = (cell: number, v: number): string => `${Math.floor(cell / 4) + 1},${(cell % 4) + 1},${v}`;

test('every puzzle has exactly one solution, and the solver finds it with the clues intact', () => {
  for (let i = 0; i < 300; i++) {
    const seed = i % 2 === 0 ? trainSeed(i) : validationSeed(i);
    const env = solo(seed);
    const start = readGrid(env.observe('solo'));
    assert.equal(completions([...start]), 1, `seed ${seed}`);
    assert.equal(start.filter((v) => v === 0).length, 6);
    env.act('solo', env.solution('solo'));
    assert.ok(env.success);
    const end = readGrid(env.observe('solo'));
    assert.ok(!end.includes(0) && consistent(end));
    start.forEach((v, k) => v !== 0 && assert.equal(end[k], v, `seed ${seed}: clue ${k} changed`));
  }
});

test('clues cannot be written or cleared: every attempt is rejected at -0.3 and counted', () => {
  for (let i = 0; i < 50; i++) {
    const env = solo(trainSeed(i));
    const start = readGrid(env.observe('solo'));
    start.forEach((clue, cell) => {
      if (clue === 0) return;
      for (let v = 0; v <= 4; v++) {
        const copy = env.clone();
        const r = copy.act('solo', fill(cell, v));
        assert.equal(r.parseError, null);
        assert.equal(r.teamReward, sudokuRewards.invalid);
        assert.equal(copy.stats['solo']?.invalidMoves, 1);
        assert.deepEqual(readGrid(copy.observe('solo')), start);
      }
    });
    // Even in one action with a full solution after it, the clue writes are skipped and the rest solves.
    const clueCell = start.findIndex((v) => v !== 0);
    const copy = env.clone();
    const r = copy.act('solo', `${fill(clueCell, (start[clueCell] as number) % 4 + 1)} ${env.solution('solo')}`);
    assert.ok(r.success);
    assert.equal(readGrid(copy.observe('solo'))[clueCell], start[clueCell]);
    assert.ok(r.info.startsWith(`${fill(clueCell, (start[clueCell] as number) % 4 + 1)} `) && r.info.includes(', 1 bad ('));
  }
});

test('conflicting fills are rejected; wrong but consistent fills are accepted and the solver clears them', () => {
  let recovered = 0;
  for (let i = 0; i < 200; i++) {
    const env = solo(trainSeed(i), { emptyCells: 10, maxTurns: 3 });
    const start = readGrid(env.observe('solo'));
    const empty = start.findIndex((v) => v === 0);
    // A digit already in the cell's row is a conflict.
    const row = Math.floor(empty / 4);
    const inRow = start.slice(row * 4, row * 4 + 4).find((v) => v !== 0);
    if (inRow !== undefined) assert.equal(env.clone().act('solo', fill(empty, inRow)).teamReward, sudokuRewards.invalid);
    // A consistent digit that is not the solution's: accepted, then repaired by the solver.
    const solved = readGrid((() => { const c = env.clone(); c.act('solo', c.solution('solo')); return c.observe('solo'); })());
    const wrong = [1, 2, 3, 4].find((v) => v !== solved[empty] && consistent(start.map((x, k) => (k === empty ? v : x))));
    if (wrong === undefined) continue;
    const r = env.act('solo', fill(empty, wrong));
    assert.equal(r.parseError, null);
    assert.equal(readGrid(env.observe('solo'))[empty], wrong);
    const fix = env.solution('solo');
    assert.ok(fix.startsWith(`${fill(empty, 0)} `), fix);
    const before = readGrid(env.observe('solo'));
    const done = env.act('solo', fix);
    assert.ok(done.success);
    // Solved after a repair: +2.0 but not the +0.5 for a clean episode.
    assert.ok(Math.abs(done.teamReward - expectedReward(before, fix, false)) < 1e-5, `seed ${i}`);
    recovered++;
  }
  assert.ok(recovered > 100, `${recovered} repairs`);
});

/** Reward of a valid fill list from `grid`, recomputed from the definition (no rejected fills). */
function expectedReward(grid: number[], text: string, clean: boolean): number {
  const k = sudokuRewards;
  let reward = 0;
  for (const f of text.split(' ')) {
    const [r, c, v] = f.split(',').map(Number) as [number, number, number];
    const cell = (r - 1) * 4 + (c - 1);
    if (v === 0) {
      reward += k.step - k.progress / 16;
      clean = false;
    } else {
      const options = [1, 2, 3, 4].filter((x) => consistent(grid.map((y, q) => (q === cell ? x : y)))).length;
      reward += k.step + (options === 1 ? k.singleCandidate : options === 2 ? k.twoCandidates : 0) + k.progress / 16;
    }
    grid = grid.map((y, q) => (q === cell ? v : y));
  }
  return grid.includes(0) ? reward : reward + k.solved + (clean ? k.clean : 0);
}

test('per-fill rewards: candidates bonus, progress, solve and clean bonus', () => {
  for (let i = 0; i < 100; i++) {
    const env = solo(trainSeed(i));
    const start = readGrid(env.observe('solo'));
    const text = env.solution('solo');
    // A fill after the solve (even a clear, which would unsolve it) is rejected at -0.3.
    const padded = env.clone().act('solo', `${text} 1,1,0`);
    const res = env.act('solo', text);
    const expected = expectedReward(start, text, true);
    assert.ok(Math.abs(res.teamReward - expected) < 1e-5, `seed ${i}: ${res.teamReward} vs ${expected}`);
    assert.ok(padded.success, `seed ${i}: a fill after the solve undid it`);
    assert.ok(Math.abs(padded.teamReward - (expected + sudokuRewards.invalid)) < 1e-5, `seed ${i}: padded ${padded.teamReward}`);
  }
});

test('the parser accepts only r,c,v fills one space apart, in range', () => {
  const env = solo(trainSeed(2));
  const verdict = (text: string): string | null => env.clone().act('solo', text).parseError;
  assert.equal(verdict('1,1,1'), null);
  assert.equal(verdict('\n1,1,1 4,4,0 \n'), null);
  for (const bad of ['1,1,5', '0,1,1', '1,5,1', '1,1', '1,1,1  2,2,2', '1,1,1,2,2,2', '1;1;1', '11,1,1', '1,1,1\n2,2,2', '(1,1,1)', '']) {
    assert.notEqual(verdict(bad), null, `'${bad}' should not parse`);
  }
  assert.match(verdict('1,1,1 2,2,x') ?? '', /^fill 2: expected r,c,v with r and c in 1-4, v in 0-4/);
  assert.match(verdict(Array(33).fill('1,1,1').join(' ')) ?? '', /too many fills: at most 32/);
});

test('the tool report lists rejected fills for the planner', () => {
  const env = sudoku.create(trainSeed(4));
  const start = readGrid(env.observe('tool'));
  const clue = start.findIndex((v) => v !== 0);
  env.act('tool', fill(clue, 0));
  assert.match(env.observe('plan'), new RegExp(`\ntool: ${fill(clue, 0)}: 0 ok, 1 bad \\(${fill(clue, 0)}\\), 6 empty, solved no\n`));
});

test('9x9 puzzles generate with a unique solution the solver reaches', () => {
  const env = solo(trainSeed(1), { size: 9, emptyCells: 30 });
  assert.equal(readGrid(env.observe('solo')).filter((v) => v === 0).length, 30);
  assert.ok(env.act('solo', env.solution('solo')).success);
});

for (const view of ['row-order', 'fewest-first'] as const) {
  test(`candidates '${view}': each empty cell names the digits its row, column and box leave, and the solver fills only the singles`, () => {
    let multiRound = 0;
    for (let i = 0; i < 200; i++) {
      const env = solo(trainSeed(i), { candidates: view, maxTurns: 8 });
      const start = readGrid(env.observe('solo'));
      for (let round = 0; !env.done; round++) {
        const prompt = env.observe('solo');
        const grid = readGrid(prompt);
        const listed = /^empty: (.*)$/m.exec(prompt)?.[1]?.split(' ') ?? [];
        // Independent of the environment: the digits that keep the grid consistent, by brute force.
        const cells = grid.flatMap((v, k) => (v === 0 ? [{ k, allowed: [1, 2, 3, 4].filter((d) => consistent(grid.map((x, m) => (m === k ? d : x)))) }] : []));
        if (view === 'fewest-first') cells.sort((a, b) => a.allowed.length - b.allowed.length || a.k - b.k);
        const where = `seed ${trainSeed(i)} round ${round}`;
        assert.deepEqual(listed, cells.map(({ k, allowed }) => `${Math.floor(k / 4) + 1},${(k % 4) + 1}=${allowed.join('')}`), where);
        const singles = cells.filter((c) => c.allowed.length === 1).sort((a, b) => a.k - b.k);
        const answer = env.solution('solo');
        if (singles.length > 0) assert.equal(answer, singles.map((c) => fill(c.k, c.allowed[0] as number)).join(' '), where);
        // With 'fewest-first' the singles are the list's first entries, in the answer's order.
        if (view === 'fewest-first' && singles.length > 0) assert.equal(answer, listed.slice(0, singles.length).join(' ').replaceAll('=', ','), where);
        env.act('solo', answer);
        if (round > 0) multiRound++;
      }
      assert.ok(env.success, `seed ${trainSeed(i)}`);
      const end = readGrid(env.observe('solo'));
      start.forEach((v, k) => v !== 0 && assert.equal(end[k], v));
    }
    // Most 4x4 puzzles with 6 empty cells take a second round of singles (measured: 756 of 1000).
    assert.ok(multiRound > 100, `${multiRound} later rounds`);
  });
}

test('without candidates the prompt lists only the empty cells', () => {
  const prompt = solo(trainSeed(3)).observe('solo');
  assert.match(prompt, /^empty: (\d,\d ?)+$/m);
});

test('padEmptyLine: the empty-cell line keeps its first length in later rounds, padded with _', () => {
  let later = 0;
  for (let i = 0; i < 100; i++) {
    const padded = sudoku.create(trainSeed(i), { variant: 'team', emptyCells: 4, candidates: 'fewest-first', planAccepts: true, padEmptyLine: true });
    const plain = sudoku.create(trainSeed(i), { variant: 'team', emptyCells: 4, candidates: 'fewest-first', planAccepts: true });
    const line = (env: Environment) => /^empty: .*$/m.exec(env.observe('tool'))![0];
    const width = line(padded).length;
    assert.equal(line(padded), line(plain), 'the first round is unpadded: it sets the width');
    while (!padded.done) {
      // The same list as without the option, then '_' up to the first round's length.
      assert.equal(line(padded), line(plain).padEnd(width, '_'));
      assert.equal(line(padded).length, width);
      if (padded.turn > 0) later++;
      for (const agent of ['tool', 'plan']) {
        const answer = padded.solution(agent);
        padded.act(agent, answer);
        plain.act(agent, answer);
      }
    }
    assert.ok(padded.success);
  }
  assert.ok(later > 10, `${later} later rounds`);
});
