// Sokoban against an independent solver that reads the room back from the prompt: every generated
// puzzle is solvable in exactly optimalMoves, dead positions end the episode, rewards match.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { Environment } from './environment.ts';
import { Rng } from './rng.ts';
import { trainSeed, validationSeed } from './seed-ranges.ts';
import { sokoban, sokobanRewards } from './sokoban.ts';

interface Room {
  n: number;
  walls: boolean[];
  goal: number;
  player: number;
  box: number;
}

function readRoom(prompt: string): Room {
  const lines = prompt.split('\n');
  const n = Number(/(\d+)x\1/.exec(lines[0] ?? '')?.[1]);
  assert.equal(lines[1], 'P=you B=box G=goal #=wall');
  const offset = /^(here|(\d+[UD])?( ?\d+[LR])?)$/;
  const [, boxLine = '', goalLine = '', openLine = ''] = /^box: (.*)\ngoal: (.*) from box\nopen: (.*)$/.exec(lines.slice(2, 5).join('\n')) ?? [];
  assert.match(boxLine, offset, lines[2]);
  assert.match(goalLine, offset, lines[3]);
  assert.match(openLine, /^(none|[UDLR]( [UDLR])*)$/, lines[4]);
  const room: Room = { n, walls: [], goal: -1, player: -1, box: -1 };
  lines.slice(5, 5 + n).forEach((row, r) => {
    assert.equal(row.length, n);
    [...row].forEach((ch, c) => {
      const i = r * n + c;
      assert.match(ch, /[#.GBP+*]/);
      room.walls.push(ch === '#');
      if (ch === 'P' || ch === '+') room.player = i;
      if (ch === 'B' || ch === '*') room.box = i;
      if (ch === 'G' || ch === '+' || ch === '*') room.goal = i;
    });
  });
  // The hint lines must agree with the grid: the box from P, the goal from the box (row first, in
  // move letters), and the moves the rules allow from here (a push only into a free cell).
  const spell = (from: number, to: number): string => {
    const dr = Math.floor(to / n) - Math.floor(from / n);
    const dc = (to % n) - (from % n);
    return [dr > 0 ? `${dr}D` : dr < 0 ? `${-dr}U` : '', dc > 0 ? `${dc}R` : dc < 0 ? `${-dc}L` : ''].filter(Boolean).join(' ') || 'here';
  };
  assert.equal(boxLine, spell(room.player, room.box), prompt);
  assert.equal(goalLine, spell(room.box, room.goal), prompt);
  const open = (['U', 'D', 'L', 'R'] as const).filter((d) => {
    const next = step(room, room.player, d);
    return next !== -1 && (next !== room.box || step(room, room.box, d) !== -1);
  });
  assert.equal(openLine, open.join(' ') || 'none', prompt);
  return room;
}

const delta = { U: -1, D: 1, L: 0, R: 0 } as const;
const step = (room: Room, cell: number, d: keyof typeof delta): number => {
  const r = Math.floor(cell / room.n) + delta[d];
  const c = (cell % room.n) + (d === 'L' ? -1 : d === 'R' ? 1 : 0);
  return r < 0 || c < 0 || r >= room.n || c >= room.n || room.walls[r * room.n + c] ? -1 : r * room.n + c;
};

/** BFS over (player, box) with the standard rules; the shortest number of moves, or -1. */
function shortest(room: Room): number {
  const seen = new Map<string, number>([[`${room.player},${room.box}`, 0]]);
  const queue: Array<[number, number]> = [[room.player, room.box]];
  for (let i = 0; i < queue.length; i++) {
    const [p, b] = queue[i] as [number, number];
    const d0 = seen.get(`${p},${b}`) as number;
    if (b === room.goal) return d0;
    for (const d of ['U', 'D', 'L', 'R'] as const) {
      const np = step(room, p, d);
      if (np === -1) continue;
      let nb = b;
      if (np === b) {
        nb = step(room, b, d);
        if (nb === -1) continue;
      }
      if (seen.has(`${np},${nb}`)) continue;
      seen.set(`${np},${nb}`, d0 + 1);
      queue.push([np, nb]);
    }
  }
  return -1;
}

const manhattan = (room: Room, a: number, b: number): number =>
  Math.abs(Math.floor(a / room.n) - Math.floor(b / room.n)) + Math.abs((a % room.n) - (b % room.n));

const solo = (seed: number, options: Record<string, unknown> = {}): Environment => sokoban.create(seed, { variant: 'single', ...options });

test('generated puzzles: walled room, box at least 2 from the goal, solvable in exactly optimalMoves', () => {
  for (let i = 0; i < 500; i++) {
    const seed = i % 2 === 0 ? trainSeed(i) : validationSeed(i);
    for (const size of i < 50 ? [6, 7, 10] : [6]) {
      const env = solo(seed, { size });
      const room = readRoom(env.observe('solo'));
      assert.equal(room.n, size);
      for (let k = 0; k < size; k++) {
        for (const cell of [k, (size - 1) * size + k, k * size, k * size + size - 1]) assert.ok(room.walls[cell], `seed ${seed}: border`);
      }
      assert.ok(manhattan(room, room.box, room.goal) >= 2, `seed ${seed}: box too close`);
      assert.equal(shortest(room), env.optimalMoves, `seed ${seed}: optimum`);
      assert.equal(env.solution('solo').length, env.optimalMoves);
    }
  }
});

test('rewards: moves, rejected moves and pushes with shaping by the moves left, and the solve bonus', () => {
  const k = sokobanRewards;
  // The potential: minus the fewest moves left (the independent BFS above), 2 * n^2 when stuck.
  const potential = (r: Room) => {
    const left = shortest(r);
    return left === -1 ? -2 * r.n * r.n : -left;
  };
  let stuckPushes = 0;
  for (let i = 0; i < 200; i++) {
    const env = solo(trainSeed(i), { maxTurns: 64 });
    const room = readRoom(env.observe('solo'));
    const phi0 = potential(room);
    for (const d of ['U', 'D', 'L', 'R'] as const) {
      const next = step(room, room.player, d);
      const pushed = next === room.box ? step(room, room.box, d) : room.box;
      const rejected = next === -1 || pushed === -1;
      const r = env.clone().act('solo', d);
      const after: Room = rejected ? room : { ...room, player: next, box: pushed };
      const phi1 = potential(after);
      if (phi1 === -2 * room.n * room.n) stuckPushes++;
      let expected = (rejected ? k.invalid : k.step) + k.shaping * (k.gamma * phi1 - phi0);
      if (!rejected && pushed === room.goal) expected += k.boxOnGoal + k.solved;
      assert.ok(Math.abs(r.teamReward - expected) < 1e-6, `seed ${i} ${d}: ${r.teamReward} vs ${expected}`);
    }
    // Letters after the solve are rejected moves: UDLR costs exactly four rejections.
    const exact = env.clone().act('solo', env.solution('solo'));
    const win = env.clone().act('solo', `${env.solution('solo')}UDLR`);
    assert.ok(win.success && win.teamReward > k.solved);
    assert.ok(Math.abs(win.teamReward - (exact.teamReward + 4 * k.invalid)) < 1e-6, `seed ${i}: padding ${win.teamReward} vs ${exact.teamReward}`);
    assert.match(win.info, /4 blocked/);
    // Every move of an optimal solution earns the same: the step cost plus the shaping of one move closer.
    const solution = env.solution('solo');
    const walk = env.clone();
    for (const m of solution.slice(0, -1)) {
      const r = walk.act('solo', m);
      const left = shortest(readRoom(walk.observe('solo')));
      assert.ok(Math.abs(r.teamReward - (k.step + k.shaping * (k.gamma * -left + left + 1))) < 1e-6, `seed ${i}: move ${m} of ${solution}`);
    }
  }
  assert.ok(stuckPushes > 0, 'some first moves push the box where it can no longer reach the goal');
});

test('the stuck potential (-2 * size^2) is below every solvable position reachable in generated rooms', () => {
  let worst = 0;
  for (let i = 0; i < 100; i++) {
    const room = readRoom(solo(trainSeed(i)).observe('solo'));
    // Every (player, box) reachable from the start by legal moves, and its fewest moves left.
    const seen = new Set<string>([`${room.player},${room.box}`]);
    const queue: Array<[number, number]> = [[room.player, room.box]];
    for (let q = 0; q < queue.length; q++) {
      const [p, b] = queue[q] as [number, number];
      const left = shortest({ ...room, player: p, box: b });
      worst = Math.max(worst, left);
      if (b === room.goal) continue;
      for (const d of ['U', 'D', 'L', 'R'] as const) {
        const np = step(room, p, d);
        const nb = np === b ? step(room, b, d) : b;
        if (np === -1 || nb === -1 || seen.has(`${np},${nb}`)) continue;
        seen.add(`${np},${nb}`);
        queue.push([np, nb]);
      }
    }
  }
  assert.ok(worst > 0 && worst < 2 * 6 * 6, `longest moves-left ${worst}`);
});

test('stuckMoves sets the potential of a stuck position: a push into a dead position costs 0.1 x stuckMoves less its moves left; the puzzle is unchanged', () => {
  const k = sokobanRewards;
  // The cost of each first move that leaves the box stuck, under the default (2 * size^2) and under stuckMoves.
  const pushes: Array<{ seed: number; d: string; phi0: number }> = [];
  for (let i = 0; i < 200; i++) {
    const room = readRoom(solo(trainSeed(i)).observe('solo'));
    for (const d of ['U', 'D', 'L', 'R'] as const) {
      const next = step(room, room.player, d);
      if (next !== room.box) continue;
      const pushed = step(room, room.box, d);
      if (pushed !== -1 && pushed !== room.goal && shortest({ ...room, player: next, box: pushed }) === -1) pushes.push({ seed: trainSeed(i), d, phi0: -shortest(room) });
    }
  }
  assert.ok(pushes.length >= 5, `only ${pushes.length} first moves leave the box stuck`);
  for (const stuckMoves of [undefined, 12, 1]) {
    const phiStuck = -(stuckMoves ?? 2 * 6 * 6);
    for (const { seed, d, phi0 } of pushes) {
      const env = solo(seed, stuckMoves === undefined ? {} : { stuckMoves });
      const r = env.act('solo', d);
      const expected = k.step + k.shaping * (k.gamma * phiStuck - phi0);
      assert.ok(r.done && !r.success, `seed ${seed} ${d}: the push ends the episode`);
      assert.ok(Math.abs(r.teamReward - expected) < 1e-6, `seed ${seed} ${d} stuckMoves ${stuckMoves}: ${r.teamReward} vs ${expected}`);
    }
  }
  // Only the shaping changes: the same puzzle, solution and solved reward.
  for (let i = 0; i < 20; i++) {
    const a = solo(trainSeed(i));
    const b = solo(trainSeed(i), { stuckMoves: 12 });
    assert.equal(b.observe('solo'), a.observe('solo'));
    assert.equal(b.solution('solo'), a.solution('solo'));
    assert.equal(b.act('solo', b.solution('solo')).teamReward, a.act('solo', a.solution('solo')).teamReward);
  }
  assert.throws(() => solo(trainSeed(0), { stuckMoves: 0 }), /stuckMoves/);
  assert.throws(() => solo(trainSeed(0), { stuckMoves: 2.5 }), /stuckMoves/);
});

test('turn-level shaping: the first moves of a solution, walking to the box included, earn more than an empty answer', () => {
  for (let i = 0; i < 50; i++) {
    const env = solo(trainSeed(i), { maxTurns: 3 });
    const solution = env.solution('solo');
    const first = env.clone().act('solo', solution.slice(0, 3)).teamReward;
    const idle = env.clone().act('solo', '').teamReward; // an empty answer is a parse failure
    assert.ok(first > 0, `seed ${i}: three moves of the solution earn ${first}`);
    assert.ok(first > idle, `seed ${i}`);
  }
});

test('a dead position (box cornered) ends the episode as a failure, and the report says stuck', () => {
  const rng = new Rng(5);
  let dead = 0;
  for (let i = 0; i < 300 && dead < 30; i++) {
    const env = solo(trainSeed(i), { maxTurns: 8 });
    while (!env.done) {
      const moves = Array.from({ length: 1 + rng.int(6) }, () => 'UDLR'[rng.int(4)]).join('');
      const r = env.act('solo', moves);
      const room = readRoom(env.observe('solo'));
      const solvable = shortest(room) !== -1;
      assert.equal(r.info.endsWith(', stuck'), !solvable && !r.success, r.info);
      if (!solvable) {
        assert.ok(r.done && !r.success);
        assert.throws(() => env.solution('solo'), /over/);
        dead++;
      }
    }
  }
  assert.ok(dead >= 30, `only ${dead} dead positions reached`);
});

test('team workflow: the tool proposal is simulated on a clone and reported', () => {
  const env = sokoban.create(trainSeed(3));
  const before = env.observe('tool');
  const proposal = env.solution('tool');
  const r = env.act('tool', proposal);
  assert.equal(r.teamReward, 0);
  assert.ok(r.localReward > sokobanRewards.solved);
  assert.match(env.observe('plan'), new RegExp(`\ntool: ${proposal}: box 0 from G, 0 blocked, solved yes\nplan: moves`));
  assert.equal(env.observe('plan').split('\n').slice(0, 11).join('\n'), before.split('\n').slice(0, 11).join('\n'));
});
