/**
 * Plan-Path: walk from the start to the goal on a square grid with walls (PettingLLMs' `stateful_env`).
 *
 * Generation: each cell is a wall with probability `wallRatio` (0.22 as in the reference); start
 * and goal are distinct free cells, the goal BFS-reachable at distance >= 2 (a one-step puzzle
 * teaches nothing). Up to 1000 draws are tried; after that an open grid corner-to-corner is used,
 * so every seed yields a puzzle.
 *
 * Action: a string of moves, e.g. `RRDDL` (U up, D down, L left, R right), executed in order. A move
 * into a wall or off the grid is rejected and leaves the position as it is. The walk stops at the
 * goal, and letters after it are rejected moves too (-0.10 each): the reference ignored them, which
 * lets a policy pad its answer for free, and RL on the small default model learned exactly that
 * (measured: answers grew from 4 to 6-10 letters and greedy validation fell 74% -> 68% in 20 steps,
 * as the padding then spilled into paths that turn).
 *
 * Per-move reward (the reference's constants):
 *   -0.01 for a move, or -0.10 for a rejected move
 *   + (0.99 * phi(s') - phi(s)) with phi = -(shortest-path distance to the goal)  (shaping, lambda 1)
 *   + 1.0 on reaching the goal, + 0.5 more when the episode's moves so far equal the BFS optimum
 *     (a move into a wall counts as a move, as in the reference: one bump loses the bonus).
 * The reference's potential is the Manhattan distance. That is harmless for a return, but AT-GRPO
 * compares branches turn by turn, and a turn that starts a detour around a wall without finishing
 * it then scores below one that bumps into the wall (-1 per step away against -0.10 per bump):
 * turn-level advantages favour pushing into walls, which is how most failed validation episodes
 * ended. With the walking distance every step along a shortest path earns the same, detour or not.
 *
 * Prompt (5x5, plan agent):
 *   plan-path 5x5, turn 1/4
 *   P=you G=goal #=wall
 *   goal: 1D 4R
 *   open: D R
 *   P.#..
 *   ..#.G
 *   .....
 *   .#...
 *   .....
 *   tool: RRDD: 2 from G, 1 blocked, goal no
 *   plan: moves (U/D/L/R)
 * Unlike the reference, which always showed the original grid, the prompt shows the current position.
 */
import { z } from 'zod';
import { directionOrder, flawMoves, formatMoves, formatOffset, manhattan, parseMoves, stepCell, type Direction, type Parsed } from './action-text.ts';
import { checkSeed, parseOptions, type EnvironmentFactory } from './environment.ts';
import { PuzzleEnvironment, workflowOptionsShape, type MoveOutcome, type PuzzleState } from './puzzle-environment.ts';
import { Rng } from './rng.ts';

export const planPathRewards = {
  step: -0.01,
  invalid: -0.1,
  shaping: 1.0,
  gamma: 0.99,
  goal: 1.0,
  optimal: 0.5,
} as const;

export const planPathOptionsSchema = z
  .object({
    /** Side of the square grid (the reference used 10). */
    size: z.number().int().min(3).max(16).default(5).describe('Side of the square grid (reference: 10).'),
    /** Probability that a cell is a wall. */
    wallRatio: z.number().min(0).max(0.5).default(0.22).describe('Probability that a cell is a wall.'),
    ...workflowOptionsShape,
  })
  .strict();

export type PlanPathOptions = z.output<typeof planPathOptionsSchema>;

/** Walls never change, so clones share one frozen grid. */
interface Grid {
  readonly size: number;
  readonly walls: readonly boolean[];
}

/** BFS distances to `target` from every cell (-1 when unreachable). Moves are symmetric. */
function distancesTo(grid: Grid, target: number): Int32Array {
  const dist = new Int32Array(grid.size * grid.size).fill(-1);
  dist[target] = 0;
  const queue = [target];
  for (let head = 0; head < queue.length; head++) {
    const cell = queue[head] as number;
    for (const d of directionOrder) {
      const next = stepCell(grid.size, cell, d);
      if (next !== null && !grid.walls[next] && dist[next] === -1) {
        dist[next] = (dist[cell] as number) + 1;
        queue.push(next);
      }
    }
  }
  return dist;
}

/**
 * A shortest path to the cell `dist` measures distances to (see `distancesTo`), taking the first
 * direction in U, D, L, R order that gets closer.
 */
function shortestPath(size: number, dist: Int32Array, from: number): Direction[] | null {
  if (dist[from] === -1) return null;
  const path: Direction[] = [];
  let cell = from;
  while (dist[cell] !== 0) {
    const here = dist[cell] as number;
    const d = directionOrder.find((x) => {
      const next = stepCell(size, cell, x);
      return next !== null && dist[next] === here - 1;
    });
    if (d === undefined) throw new Error('plan-path: BFS distances are inconsistent');
    path.push(d);
    cell = stepCell(size, cell, d) as number;
  }
  return path;
}

class PlanPathState implements PuzzleState<Direction[]> {
  readonly hint = 'moves (U/D/L/R)';
  readonly stuck = false; // walls never move and moves are reversible, so the goal stays reachable

  constructor(
    private readonly grid: Grid,
    readonly goal: number,
    /** Walking distance from each cell to the goal (-1 when unreachable); shared by clones. */
    private readonly distance: Int32Array,
    public position: number,
    /** Moves so far this episode, wall bumps included (for the optimality bonus). */
    public moves: number,
    readonly optimalMoves: number,
  ) {}

  get title(): string {
    return `plan-path ${this.grid.size}x${this.grid.size}`;
  }

  get solved(): boolean {
    return this.position === this.goal;
  }

  render(): string {
    const { size, walls } = this.grid;
    const rows: string[] = ['P=you G=goal #=wall'];
    // Where the goal lies relative to the agent, spelled in move letters ("goal: 2D 1L"): a tiny
    // character-level model reads this far more easily than it locates two cells in the grid, so
    // the grid's remaining job is the walls.
    rows.push(`goal: ${formatOffset(size, this.position, this.goal)}`);
    // The moves that are not blocked from here ("open: U L"): reading a wall next to P out of the
    // grid is another lookup a small character model gets wrong, and without it a greedy agent
    // pushes into the same wall turn after turn (measured: most failed validation episodes).
    const open = directionOrder.filter((d) => {
      const next = stepCell(size, this.position, d);
      return next !== null && !walls[next];
    });
    rows.push(`open: ${open.join(' ') || 'none'}`);
    for (let r = 0; r < size; r++) {
      let line = '';
      for (let c = 0; c < size; c++) {
        const cell = r * size + c;
        line += cell === this.position ? 'P' : cell === this.goal ? 'G' : walls[cell] ? '#' : '.';
      }
      rows.push(line);
    }
    return rows.join('\n');
  }

  parse(text: string): Parsed<Direction[]> {
    return parseMoves(text, 2 * this.grid.size * this.grid.size); // a shortest path never needs more than the cell count
  }

  format(moves: Direction[]): string {
    return formatMoves(moves);
  }

  apply(moves: Direction[]): MoveOutcome {
    const { size, walls } = this.grid;
    const k = planPathRewards; // the walk stays on reachable cells, so `distance` is never -1 there
    let reward = 0;
    let invalid = 0;
    for (const d of moves) {
      if (this.solved) {
        invalid++;
        reward += k.invalid;
        continue;
      }
      const before = this.distance[this.position] as number;
      const next = stepCell(size, this.position, d);
      if (next === null || walls[next]) {
        invalid++;
        reward += k.invalid;
        // As in the reference, a bump is a step: it spends the optimality bonus.
        this.moves++;
      } else {
        this.position = next;
        this.moves++;
        reward += k.step;
      }
      const after = this.distance[this.position] as number;
      reward += k.shaping * (k.gamma * -after - -before);
      if (this.solved) reward += k.goal + (this.moves === this.optimalMoves ? k.optimal : 0);
    }
    const distance = manhattan(size, this.position, this.goal);
    return { reward, invalid, summary: `${distance} from G, ${invalid} blocked, goal ${this.solved ? 'yes' : 'no'}` };
  }

  solve(): Direction[] {
    const path = shortestPath(this.grid.size, this.distance, this.position);
    if (path === null) throw new Error('plan-path: goal unreachable (generator invariant broken)');
    return path;
  }

  flaw(moves: Direction[], variant: number): Direction[] | null {
    return flawMoves(moves, variant);
  }

  clone(): PlanPathState {
    return new PlanPathState(this.grid, this.goal, this.distance, this.position, this.moves, this.optimalMoves);
  }
}

/** Generates the puzzle for a seed: a pure function of (seed, size, wallRatio). */
function generate(seed: number, size: number, wallRatio: number): PlanPathState {
  const rng = new Rng(seed, 'plan-path');
  const cells = size * size;
  for (let attempt = 0; attempt < 1000; attempt++) {
    const walls = Object.freeze(Array.from({ length: cells }, () => rng.chance(wallRatio)));
    const free = walls.flatMap((w, i) => (w ? [] : [i]));
    if (free.length < 2) continue;
    const start = rng.pick(free);
    const goal = rng.pick(free);
    if (start === goal) continue;
    const grid: Grid = { size, walls };
    const distance = distancesTo(grid, goal);
    const optimal = distance[start] as number;
    if (optimal < 2) continue; // unreachable (-1) or trivial (1)
    return new PlanPathState(grid, goal, distance, start, 0, optimal);
  }
  const open: Grid = { size, walls: Object.freeze(new Array<boolean>(cells).fill(false)) };
  return new PlanPathState(open, cells - 1, distancesTo(open, cells - 1), 0, 0, 2 * (size - 1));
}

export const planPath = {
  description: 'Plan-Path: walk P to G around walls on a grid (tool proposes moves, plan commits).',
  optionsSchema: planPathOptionsSchema,
  create(seed: number, options?: unknown): PuzzleEnvironment<Direction[]> {
    const o = parseOptions(planPathOptionsSchema, options, 'plan-path');
    checkSeed(seed, 'plan-path');
    return PuzzleEnvironment.start('plan-path', seed, generate(seed, o.size, o.wallRatio), o);
  },
} satisfies EnvironmentFactory<PlanPathOptions>;
