/**
 * How each run's warm start ended, for the learning results: a config with `warmStart.stopAtLoss`
 * means every seed to start RL from a policy trained to that loss, and a seed whose warm start ran
 * to its step ceiling first did not (Sudoku's single agent, seed 2: 600 of 600 steps at smoothed
 * loss 0.228 against 0.15, then RL collapsed it). Such a seed measures its warm start more than
 * RL, so bench:learning and rl-gain.ts name it beside their tables; they do not drop it.
 */
import { missedLossTarget, missedTargetText, readWarmStartEnd, warmStartCacheDir, type WarmStartEnd } from '../../server/rl/warm-start.ts';

/** A stored run as far as its warm starts go: its seed, cache keys and (once read) how each ended. */
export interface WarmStartedRun {
  seed: number;
  /** Warm-start cache key per base model (null: no warm start; absent: not known). */
  warmStart?: Record<string, string> | null;
  /** How each base model's warm start ended (from its cache entry), when the run has a loss target; absent: not known. */
  warmStartEnd?: Record<string, WarmStartEnd> | null;
}

/**
 * How the warm starts behind `keys` ended, read from the cache under `cacheRoot`: by model id, for
 * those with a loss target (null: none has one, or there is no warm start). Undefined when an
 * entry with a target is not in this cache (runs trained elsewhere), so that it stays unknown.
 */
export async function warmStartEnds(keys: Record<string, string> | null | undefined, cacheRoot: string): Promise<Record<string, WarmStartEnd> | null | undefined> {
  if (keys === undefined) return undefined;
  if (keys === null) return null;
  const ends: Record<string, WarmStartEnd> = {};
  for (const [modelId, key] of Object.entries(keys)) {
    const end = await readWarmStartEnd(warmStartCacheDir(cacheRoot, key, modelId));
    if (end === null) return undefined;
    if (end.stopAtLoss !== null) ends[modelId] = end;
  }
  return Object.keys(ends).length > 0 ? ends : null;
}

/** Fills in `warmStartEnd` where a run lacks it and the cache here holds its warm starts. */
export async function fillWarmStartEnds(runs: WarmStartedRun[], cacheRoot: string): Promise<void> {
  for (const run of runs) {
    if (run.warmStartEnd !== undefined) continue;
    const ends = await warmStartEnds(run.warmStart, cacheRoot);
    if (ends !== undefined) run.warmStartEnd = ends;
  }
}

/** One line per run whose warm start ran to its ceiling without reaching its loss target, e.g. "seed 2: 'base' ran all 600 steps …". */
export function missedTargetNotes(runs: readonly WarmStartedRun[]): string[] {
  return runs.flatMap((run) => {
    const missed = Object.entries(run.warmStartEnd ?? {}).filter(([, end]) => missedLossTarget(end));
    return missed.length === 0 ? [] : [`seed ${run.seed}: ${missed.map(([modelId, end]) => `'${modelId}' ${missedTargetText(end)}`).join('; ')}`];
  });
}
