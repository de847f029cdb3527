/**
 * Sokoban: push the one box onto the goal (PettingLLMs' `stateful_env`; 6x6 with one box as in the paper).
 *
 * Generation by reverse play, in the manner of the gym-sokoban generator the reference used: a
 * random walk carves floor inside the border walls; the box starts on the goal; the player then
 * walks at random and sometimes PULLS the box (the reverse of a push). Every pull undoes a legal
 * push, so each position reached can be solved by pushing back. Of the positions with the box at
 * least 2 cells from the goal, the one with the longest optimal solution (the room's moves-left
 * table, one backward BFS over (player, box)) is kept; an unsolvable one would be a generator bug
 * and throws.
 *
 * Action: a string of moves, e.g. `UULDR` (U up, D down, L left, R right). Walking into the box
 * pushes it when the cell beyond is free; a move into a wall, or a push into a wall, is rejected.
 * Moves stop once the box is on the goal; any after that are rejected moves (-0.05 each), not free
 * padding (see plan-path.ts).
 *
 * Per-move reward (the reference's constants):
 *   -0.01 for a move, or -0.05 for a rejected move
 *   + 0.1 * (0.99 * phi(s') - phi(s)) with phi = -(fewest moves left to the solve), -2*size^2 when stuck
 *     (option `stuckMoves` sets the moves a stuck position counts as)
 *   + 1.0 when the box lands on the goal, and + 10 for the solved puzzle (both at once with one box).
 * The reference's potential is -Manhattan(box, goal). Walking to the box then earns nothing and
 * costs 0.01 a move, so AT-GRPO's turn-level groups favour the branch that moves least: measured
 * on the 6x6 team from a 32.8% warm start, the planner's answers shrank from 5.0 to 2.6 tokens and
 * validation fell to 14.8% in 40 steps, while GRPO (whole-episode returns, which include the solve
 * bonus) rose to 38.3%. With the moves-left potential every move along an optimal solution earns
 * the same, as the walking distance does in Plan-Path, and pushing the box into a corner costs
 * the most (2*size^2 is above the moves left of every solvable position reachable in the generated
 * 6x6 rooms; a test checks 100 seeds).
 * The reference's -0.5 for pushing a box off a goal cannot happen with one box, since the episode
 * ends when it lands; its -5 at 200 moves is replaced by the round limit (maxTurns).
 * Unlike the reference, a position from which the box can no longer reach the goal (a box in a
 * corner, say) ends the episode as a failure at the end of that round, instead of burning turns.
 *
 * Symbols: # wall, . floor, G goal, B box, P player, + player on the goal, * box on the goal.
 * Above the grid, the prompt spells the box's offset from P, the goal's offset from the box, and
 * the moves allowed from here (see `render`):
 *   box: 2D
 *   goal: 2L from box
 *   open: D L R
 */
import { z } from 'zod';
import { directionOrder, flawMoves, formatMoves, formatOffset, manhattan, parseMoves, stepCell, type Direction, type Parsed } from './action-text.ts';
import { checkSeed, parseOptions, type EnvironmentFactory } from './environment.ts';
import { PuzzleEnvironment, workflowOptionsShape, type MoveOutcome, type PuzzleState } from './puzzle-environment.ts';
import { Rng } from './rng.ts';

export const sokobanRewards = {
  step: -0.01,
  invalid: -0.05,
  shaping: 0.1,
  gamma: 0.99,
  boxOnGoal: 1.0,
  solved: 10,
} as const;

export const sokobanOptionsSchema = z
  .object({
    /** Side of the square room, border walls included (the paper: 6). */
    size: z.number().int().min(6).max(10).default(6).describe('Side of the room, border walls included.'),
    /** The moves left a stuck position counts as in the shaping potential; unset, 2 * size^2. */
    stuckMoves: z
      .number()
      .int()
      .min(1)
      .max(200)
      .optional()
      .describe(
        "The moves left a stuck position (the box where it can no longer reach the goal) counts as in the shaping potential, which is minus the fewest moves left to the solve; each move earns 0.1 of its change. Unset: 2 x size^2, above every solvable position, so a push into a dead position costs about 0.1 x 2 x size^2 (7.2 at size 6) against about 0.09 for a move along a solution. A smaller value makes that push cheaper; one below a position's own moves left would reward getting stuck there.",
      ),
    ...workflowOptionsShape,
  })
  .strict();

export type SokobanOptions = z.output<typeof sokobanOptionsSchema>;

/** The room never changes, so clones share it. */
interface Room {
  readonly size: number;
  readonly walls: readonly boolean[];
  readonly goal: number;
  /** Fewest moves to the solve from each (player * cells + box), or -1 where it cannot be solved. */
  readonly distance: Int32Array;
  /** The moves left a stuck position counts as in the shaping potential (`stuckMoves`). */
  readonly stuckMoves: number;
}

/** A room with its moves-left table (one backward BFS, which also serves the generator's choice). */
function makeRoom(size: number, walls: readonly boolean[], goal: number, stuckMoves: number): Room {
  const shape = { size, walls: Object.freeze(walls), goal };
  return { ...shape, distance: solveDistances(shape), stuckMoves };
}

/**
 * Fewest moves from every (player, box) to a solved position, by one backward BFS from all
 * positions with the box on the goal: a walk from p to p' is undone by stepping back, and a push
 * (player p' - d onto the box at p', box to p' + d) by pulling. -1 marks positions that cannot be
 * solved (a cornered box).
 */
function solveDistances(room: Pick<Room, 'size' | 'walls' | 'goal'>): Int32Array {
  const { size, walls, goal } = room;
  const cells = size * size;
  const dist = new Int32Array(cells * cells).fill(-1);
  const queue: number[] = [];
  for (let p = 0; p < cells; p++) {
    if (walls[p] || p === goal) continue;
    dist[p * cells + goal] = 0;
    queue.push(p * cells + goal);
  }
  for (let head = 0; head < queue.length; head++) {
    const id = queue[head] as number;
    const p = Math.floor(id / cells);
    const b = id % cells;
    const d0 = dist[id] as number;
    for (const d of directionOrder) {
      const back = stepCell(size, p, directionOrder[directionOrder.indexOf(d) ^ 1] as Direction); // where a move d into p came from
      if (blocked(room, back) || back === b) continue;
      const preds = [back * cells + b]; // a walk back..p
      if (stepCell(size, p, d) === b) preds.push(back * cells + p); // a push: the box was at p, the player at back
      for (const q of preds) {
        if (dist[q] !== -1) continue;
        dist[q] = d0 + 1;
        queue.push(q);
      }
    }
  }
  return dist;
}

/** Whether a cell is off the grid or a wall. */
function blocked(room: Pick<Room, 'walls'>, cell: number | null): cell is null {
  return cell === null || room.walls[cell] === true;
}

/** Where one move leads: the new (player, box), or null when the rules reject it. */
function move(room: Room, player: number, box: number, d: Direction): { player: number; box: number } | null {
  const next = stepCell(room.size, player, d);
  if (blocked(room, next)) return null;
  if (next !== box) return { player: next, box };
  const beyond = stepCell(room.size, box, d);
  if (blocked(room, beyond)) return null;
  return { player: next, box: beyond };
}

/** Fewest-moves solution by BFS over (player, box), or null when the goal cannot be reached. */
function solveSokoban(room: Room, player: number, box: number): Direction[] | null {
  const cells = room.size * room.size;
  const parent = new Int32Array(cells * cells).fill(-1);
  const via = new Uint8Array(cells * cells);
  const start = player * cells + box;
  parent[start] = start;
  const queue = [start];
  for (let head = 0; head < queue.length; head++) {
    const id = queue[head] as number;
    const p = Math.floor(id / cells);
    const b = id % cells;
    if (b === room.goal) {
      const path: Direction[] = [];
      for (let at = id; at !== start; at = parent[at] as number) path.push(directionOrder[via[at] as number] as Direction);
      return path.reverse();
    }
    directionOrder.forEach((d, k) => {
      const next = move(room, p, b, d);
      if (next === null) return;
      const nextId = next.player * cells + next.box;
      if (parent[nextId] !== -1) return;
      parent[nextId] = id;
      via[nextId] = k;
      queue.push(nextId);
    });
  }
  return null;
}

class SokobanState implements PuzzleState<Direction[]> {
  readonly hint = 'moves (U/D/L/R)';

  constructor(
    private readonly room: Room,
    public player: number,
    public box: number,
    readonly optimalMoves: number,
  ) {}

  get title(): string {
    return `sokoban ${this.room.size}x${this.room.size}`;
  }

  get solved(): boolean {
    return this.box === this.room.goal;
  }

  get stuck(): boolean {
    return !this.solved && this.movesLeft() === -1;
  }

  /** Fewest moves left to the solve, or -1 when the box can no longer reach the goal. */
  movesLeft(): number {
    return this.room.distance[this.player * this.room.size * this.room.size + this.box] as number;
  }

  render(): string {
    const { size, walls, goal } = this.room;
    const rows = ['P=you B=box G=goal #=wall'];
    // Relative positions in move letters, as on Plan-Path ("box: 2D", "goal: 2L from box"): the
    // embedded character-level model reads these far more easily than it locates three cells in
    // the grid, so the grid's remaining job is the walls. And the moves the rules allow from here
    // ("open: D R"; a push only into a free cell), so a greedy agent need not read a wall next to P.
    rows.push(`box: ${formatOffset(size, this.player, this.box)}`);
    rows.push(`goal: ${formatOffset(size, this.box, goal)} from box`);
    const open = directionOrder.filter((d) => move(this.room, this.player, this.box, d) !== null);
    rows.push(`open: ${open.join(' ') || 'none'}`);
    for (let r = 0; r < size; r++) {
      let line = '';
      for (let c = 0; c < size; c++) {
        const cell = r * size + c;
        if (cell === this.player) line += cell === goal ? '+' : 'P';
        else if (cell === this.box) line += cell === goal ? '*' : 'B';
        else line += cell === goal ? 'G' : walls[cell] ? '#' : '.';
      }
      rows.push(line);
    }
    return rows.join('\n');
  }

  parse(text: string): Parsed<Direction[]> {
    // Far above any optimal solution here, and it bounds the proposal echoed into the planner prompt.
    return parseMoves(text, 4 * this.room.size * this.room.size);
  }

  format(moves: Direction[]): string {
    return formatMoves(moves);
  }

  apply(moves: Direction[]): MoveOutcome {
    const { size, goal } = this.room;
    const k = sokobanRewards;
    let reward = 0;
    let invalid = 0;
    for (const d of moves) {
      // Moves after the box reaches the goal are rejected, not free (see plan-path.ts).
      if (this.solved) {
        invalid++;
        reward += k.invalid;
        continue;
      }
      const before = this.potential();
      const next = move(this.room, this.player, this.box, d);
      if (next === null) {
        invalid++;
        reward += k.invalid;
      } else {
        this.player = next.player;
        this.box = next.box;
        reward += k.step;
      }
      reward += k.shaping * (k.gamma * this.potential() - before);
      if (this.solved) reward += k.boxOnGoal + k.solved;
    }
    const distance = manhattan(size, this.box, goal);
    const summary = `box ${distance} from G, ${invalid} blocked, solved ${this.solved ? 'yes' : 'no'}${this.stuck ? ', stuck' : ''}`;
    return { reward, invalid, summary };
  }

  /**
   * Shaping potential: minus the fewest moves left to the solve (a stuck position counts as
   * `stuckMoves`, by default 2 * size^2, beyond any solvable one).
   */
  potential(): number {
    const left = this.movesLeft();
    return left === -1 ? -this.room.stuckMoves : -left;
  }

  solve(): Direction[] {
    const path = solveSokoban(this.room, this.player, this.box);
    if (path === null) throw new Error('sokoban: no solution from a stuck position');
    return path;
  }

  flaw(moves: Direction[], variant: number): Direction[] | null {
    return flawMoves(moves, variant);
  }

  clone(): SokobanState {
    return new SokobanState(this.room, this.player, this.box, this.optimalMoves);
  }
}

/** Carves floor inside the border with a random walk that turns with probability 0.35. */
function carveRoom(rng: Rng, size: number): boolean[] {
  const walls = new Array<boolean>(size * size).fill(true);
  const inner = size - 2;
  let cell = (1 + rng.int(inner)) * size + 1 + rng.int(inner);
  let dir = rng.pick(directionOrder);
  const steps = Math.round(1.5 * inner * inner);
  for (let s = 0; s < steps; s++) {
    walls[cell] = false;
    if (rng.chance(0.35)) dir = rng.pick(directionOrder);
    const next = stepCell(size, cell, dir);
    const r = next === null ? 0 : Math.floor(next / size);
    const c = next === null ? 0 : next % size;
    if (next !== null && r >= 1 && r <= inner && c >= 1 && c <= inner) cell = next;
    else dir = rng.pick(directionOrder);
  }
  return walls;
}

/** One reverse-play attempt; null when the room is too small or the box never got 2 cells from the goal. */
function attempt(rng: Rng, size: number, stuckMoves: number): SokobanState | null {
  const walls = carveRoom(rng, size);
  const floor = walls.flatMap((w, i) => (w ? [] : [i]));
  if (floor.length < 5) return null;
  const goal = rng.pick(floor);
  const room = makeRoom(size, walls, goal, stuckMoves);
  let box = goal;
  let player = rng.pick(floor.filter((c) => c !== goal));
  const seen = new Set<number>();
  let best: SokobanState | null = null;
  for (let s = 0; s < 4 * floor.length; s++) {
    const d = rng.pick(directionOrder);
    const next = stepCell(size, player, d);
    if (blocked(room, next) || next === box) continue;
    // The cell behind the player, opposite to the walk: a box there comes along (a pull).
    const back = directionOrder[directionOrder.indexOf(d) ^ 1] as Direction; // U<->D, L<->R
    if (stepCell(size, player, back) === box && rng.chance(0.7)) box = player;
    player = next;
    // Like the reference's min_box_distance = 2; among those, keep the longest optimal solution.
    const id = player * size * size + box;
    if (manhattan(size, box, goal) < 2 || seen.has(id)) continue;
    seen.add(id);
    const moves = room.distance[id] as number;
    if (moves === -1) throw new Error('sokoban: reverse play produced an unsolvable position');
    if (best === null || moves > best.optimalMoves) best = new SokobanState(room, player, box, moves);
  }
  return best;
}

/** Generates the puzzle for a seed: a pure function of (seed, size); `stuckMoves` only goes into the room's shaping. */
function generate(seed: number, size: number, stuckMoves: number): SokobanState {
  const rng = new Rng(seed, 'sokoban');
  for (let i = 0; i < 200; i++) {
    const state = attempt(rng, size, stuckMoves);
    if (state !== null) return state;
  }
  // Practically unreachable (none in the first 1000 seeds of any size); an open room with the box
  // two pushes from the goal keeps every seed valid.
  const walls = Array.from({ length: size * size }, (_, i) => {
    const r = Math.floor(i / size);
    const c = i % size;
    return r === 0 || c === 0 || r === size - 1 || c === size - 1;
  });
  const room = makeRoom(size, walls, 2 * size + 4, stuckMoves);
  return new SokobanState(room, 2 * size + 1, 2 * size + 2, 2);
}

export const sokoban = {
  description: 'Sokoban: push the box B onto the goal G (one box, reverse-play generated room).',
  optionsSchema: sokobanOptionsSchema,
  create(seed: number, options?: unknown): PuzzleEnvironment<Direction[]> {
    const o = parseOptions(sokobanOptionsSchema, options, 'sokoban');
    checkSeed(seed, 'sokoban');
    return PuzzleEnvironment.start('sokoban', seed, generate(seed, o.size, o.stuckMoves ?? 2 * o.size * o.size), o);
  },
  // The shaping potential's value for a stuck position: rewards only (the generator keeps the room it draws).
  rewardOnlyOptions: ['stuckMoves'],
} satisfies EnvironmentFactory<SokobanOptions>;
