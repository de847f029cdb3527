/**
 * The `<run folder> [initial|latest|best|<step>]` arguments of the learning diagnostics
 * (team-turns.ts, ttt-policy.ts, ttt-blunders.ts), opened: the run's experiment at that
 * checkpoint, checked to be of the environment the script reads.
 */
import { checkpointChoiceHelp, openRunCheckpoint, parseCheckpointChoice, type RunAtCheckpoint } from '../../server/runs/checkpoint-weights.ts';

export async function openRunArgs(usage: string, dir: string | undefined, which: string, envName?: string): Promise<RunAtCheckpoint> {
  if (!dir) throw new Error(`usage: ${usage}`);
  const choice = parseCheckpointChoice(which);
  if (!choice) throw new Error(`checkpoint must be ${checkpointChoiceHelp}, got ${JSON.stringify(which)}`);
  const run = await openRunCheckpoint(dir, choice);
  if (envName !== undefined && run.experiment.env.name !== envName) throw new Error(`${dir} is a ${run.experiment.env.name} run, not ${envName}`);
  return run;
}
