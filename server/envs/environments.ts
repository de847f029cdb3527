/**
 * The environment registry. Its keys are the names configs use (`env.name`); each factory carries
 * its options schema, so the config schema and the config editor's hovers can be derived from here.
 *
 * Recipe, adding an environment: write `my-env.ts` exporting a factory (`satisfies
 * EnvironmentFactory<MyOptions>`, options as a strict zod object with defaults), register it below
 * and in `environmentNames` (and its evaluation measures, if any, in `environmentMeasures`), and add it to the shared contract tests in `environments.test.ts`
 * (solver solves, determinism, clone independence, parser fuzzing, printable text).
 */
import { z } from 'zod';
import { checkSeed, type Environment, type EnvironmentFactory } from './environment.ts';
import type { MeasureEnvironment } from './environment-measures.ts';
import { seedRanges, seedSplit, type SeedSplit } from './seed-ranges.ts';
import { planPath } from './plan-path.ts';
import { sokoban } from './sokoban.ts';
import { sudoku } from './sudoku.ts';
import { ticTacToe } from './tic-tac-toe.ts';
import { math } from './math/math-env.ts';
import { code } from './code/code-env.ts';
import { hanabi } from './hanabi/hanabi-env.ts';
import { ticTacToeMeasures } from './tic-tac-toe-measures.ts';

export const environments = {
  'plan-path': planPath,
  sudoku,
  sokoban,
  'tic-tac-toe': ticTacToe,
  math,
  code,
  hanabi,
} satisfies Record<string, EnvironmentFactory<unknown>>;

export type EnvironmentName = keyof typeof environments;

/** The registry's keys as a tuple, for `z.enum` and listings. */
export const environmentNames = ['plan-path', 'sudoku', 'sokoban', 'tic-tac-toe', 'math', 'code', 'hanabi'] as const satisfies readonly EnvironmentName[];

// Compile-time check that `environmentNames` lists every registry key.
type Unlisted = Exclude<EnvironmentName, (typeof environmentNames)[number]>;
const everyNameListed: [Unlisted] extends [never] ? true : never = true;
void everyNameListed;


function isEnvironmentName(name: string): name is EnvironmentName {
  return (environmentNames as readonly string[]).includes(name);
}

/**
 * Creates an environment by registry name. Throws an error naming the culprit for an unknown name,
 * a bad seed or bad options (e.g. "invalid sokoban options:\n  size: Too big: ..."). With `split`,
 * the seed must also lie in that split's range: the trainer passes 'train' for every training
 * task, so a validation seed can never be trained on by mistake.
 */
export function createEnvironment(name: string, seed: number, options?: unknown, split?: SeedSplit): Environment {
  if (!isEnvironmentName(name)) {
    throw new Error(`unknown environment '${name}' (known: ${environmentNames.join(', ')})`);
  }
  checkSeed(seed, name);
  if (split !== undefined && seedSplit(seed) !== split) {
    const r = seedRanges[split];
    throw new RangeError(`${name}: seed ${seed} is not a ${split} seed (the ${split} range is [${r.start}, ${r.end}))`);
  }
  return environments[name].create(seed, options);
}

/**
 * The evaluation measures environments contribute beyond success and rewards
 * (environment-measures.ts); an environment not listed has none. Scored games (an environment that
 * keeps a `score`, such as Hanabi) need no entry: `evaluate` adds their score and the scripted-partner
 * games from the score itself.
 */
export const environmentMeasures: { readonly [N in EnvironmentName]?: MeasureEnvironment } = {
  'tic-tac-toe': ticTacToeMeasures,
};

/** The measures of environments of this name, if it contributes any. */
export function measuresOf(name: string): MeasureEnvironment | undefined {
  return isEnvironmentName(name) ? environmentMeasures[name] : undefined;
}

/** Whether environments of this name run model-written code (and so need the sandbox). */
export function environmentRunsCode(name: EnvironmentName): boolean {
  const factory: EnvironmentFactory<unknown> = environments[name];
  return factory.runsCode === true;
}

/**
 * The options as the warm start's cache key sees them: each of the environment's reward-only
 * options (`EnvironmentFactory.rewardOnlyOptions`) at its default, the rest as given. Options of an
 * unknown environment are returned as they are.
 */
export function warmStartOptions(name: string, options: unknown): unknown {
  if (!isEnvironmentName(name)) return options;
  const factory: EnvironmentFactory<unknown> = environments[name];
  const rewardOnly = factory.rewardOnlyOptions ?? [];
  if (rewardOnly.length === 0 || typeof options !== 'object' || options === null) return options;
  const defaults = factory.optionsSchema.parse({}) as Record<string, unknown>;
  const keyed: Record<string, unknown> = { ...(options as Record<string, unknown>) };
  for (const k of rewardOnly) {
    if (defaults[k] === undefined) delete keyed[k];
    else keyed[k] = defaults[k];
  }
  return keyed;
}
