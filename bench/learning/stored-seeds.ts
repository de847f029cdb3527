/**
 * Whether stored seeds of a bench:learning method may be counted with new ones: the same method
 * must mean the same training. A run records a digest of its config (`configDigest`: every field
 * that changes training, the seed aside); runs stored before the digest was recorded are judged by
 * their warm-start keys, which cover the warm start's settings and the environment but not RL's.
 * LEARNING_KEEP_SEEDS and import-train-runs.ts refuse what this finds, before anything trains.
 */
import { createHash } from 'node:crypto';
import { parseExperimentConfig, type ExperimentConfig } from '../../server/protocol/experiment-config.ts';

/** A config as JSON, keys sorted, without the fields that do not change training (name, description, the editor's $schema). */
export function trainedPart(config: unknown, path: string): string {
  const { name: _n, description: _d, $schema: _s, ...rest } = parseExperimentConfig(config, path) as Record<string, unknown>;
  const sorted = (v: unknown): unknown =>
    Array.isArray(v) ? v.map(sorted) : v && typeof v === 'object' ? Object.fromEntries(Object.keys(v).sort().map((k) => [k, sorted((v as Record<string, unknown>)[k])])) : v;
  return JSON.stringify(sorted(rest));
}

/** The digest a run records: of `trainedPart`, with the seed left out (a method's seeds share it). */
export function configDigest(config: ExperimentConfig, path: string): string {
  return createHash('sha256').update(trainedPart({ ...config, seed: 0 }, path)).digest('hex').slice(0, 16);
}

/** What a stored run says of the training it had. */
export interface StoredSeed {
  readonly seed: number;
  readonly configDigest?: string;
  readonly warmStart?: Record<string, string> | null;
}

/**
 * Why `stored` runs cannot count beside new runs of a config whose digest is `digest` ([] when they
 * can): a run of another digest; a run without one whose warm-start keys are not the ones the
 * config gives now at its seed (`keysAt`); a run that records neither.
 */
export async function storedSeedProblems(
  stored: readonly StoredSeed[],
  digest: string,
  keysAt: (seed: number) => Promise<Record<string, string> | null>,
): Promise<string[]> {
  const problems: string[] = [];
  for (const run of stored) {
    if (run.configDigest !== undefined) {
      if (run.configDigest !== digest) problems.push(`seed ${run.seed} trained under another config (digest ${run.configDigest}, the config's now ${digest})`);
      continue;
    }
    if (run.warmStart === undefined) {
      problems.push(`seed ${run.seed} records neither its config's digest nor its warm-start keys`);
      continue;
    }
    const now = await keysAt(run.seed);
    if (JSON.stringify(run.warmStart) !== JSON.stringify(now)) {
      problems.push(`seed ${run.seed} started RL from another warm start (keys ${JSON.stringify(run.warmStart)}, the config's now ${JSON.stringify(now)})`);
    }
  }
  return problems;
}
