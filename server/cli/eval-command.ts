/**
 * `troupe eval`: plays a run's team at one checkpoint on held-out validation seeds and reports
 * task success and mean reward, overall and per agent. It needs only the run folder (its
 * config.json and checkpoints); nothing is written. With the defaults (the config's
 * validationEpisodes from seed offset 0) it replays the seeds the trainer validated on, so
 * `--checkpoint initial` reproduces step 0 and `latest` the last validation.
 *
 * Given an experiment config file instead of a run folder, it plays the team as the config
 * declares it, untrained: no warm start, no RL, adapters fresh (B = 0, so the base model itself).
 * With a pretrained model folder as the base that is the paper's "untrained" row.
 */
import { stat } from 'node:fs/promises';
import { resolve } from 'node:path';
import { seedRanges, TEST_SEED_OFFSET } from '../envs/seed-ranges.ts';
import { loadExperiment } from '../rl/resolve-experiment.ts';
import type { ResolvedExperiment } from '../rl/experiment.ts';
import { routingContext } from '../rl/policies.ts';
import { evaluate, evaluationOptions, type Evaluation } from '../rl/evaluate.ts';
import { openSandbox } from '../rl/trainer.ts';
import { Engine } from '../runtime/engine.ts';
import { checkpointChoiceHelp, loadTeamPolicies, openRunCheckpoint, parseCheckpointChoice, sourceWeights, type RunCheckpoint } from '../runs/checkpoint-weights.ts';
import { expectPositionals, integerFlag, numberFlag, parseCommandLine, printUsage, UsageError, type Command } from './command.ts';
import { formatTable, percent } from './text-format.ts';

const usage = `usage: troupe eval <run folder> [--checkpoint ${checkpointChoiceHelp}] [--episodes N] [--seed-offset S] [--test] [--temperature T] [--json]
       troupe eval <experiment config.json> [--episodes N] [--seed-offset S] [--test] [--temperature T] [--json]

Validation success and mean reward per agent of a run's team on the held-out validation seeds
S .. S+N-1 (the seeds training never draws), or with --test on the test seeds the trainer reports
its RL gain on. Given an experiment config instead of a run folder,
the team as the config declares it, untrained (no warm start, fresh adapters): e.g. a pretrained
model folder before any training.

options:
  --checkpoint C   initial: the warm-started team before any RL step (step 0);
                   latest: the state after the last finished step (default);
                   best: the validated step with the highest validation success;
                   <step>: the history checkpoint of that step (checkpoints/step-<step>)
  --episodes N     episodes to play (default: the config's training.validationEpisodes)
  --seed-offset S  first seed index (default 0: the seeds training validates or tests on)
  --test           the test seeds (apart from validation's; default N: training.testEpisodes)
  --temperature T  sampling temperature from 0 (greedy) to 10 (default: the config's
                   training.validationTemperature); the samples are seeded, so a run repeats
  --json           print one JSON object: success (0..1), meanReward, meanTeamReturn, perAgent,
                   score and partners (scored games: hanabi),
                   checkpoint ('untrained' for a config), step, episodes, seeds ('validation' or
                   'test'), seedOffset, temperature, runId (null for a config)
  -h, --help       this text
`;

function report(runDir: string, runId: string | null, ck: RunCheckpoint, seeds: 'validation' | 'test', seedOffset: number, temperature: number, ev: Evaluation) {
  return {
    runId,
    runDir,
    checkpoint: ck.label,
    step: ck.step,
    episodes: ev.episodes,
    seeds,
    seedOffset,
    temperature,
    success: ev.success,
    meanReward: ev.meanReward,
    meanTeamReturn: ev.meanTeamReturn,
    perAgent: ev.perAgent,
    ...(ev.opponents ? { opponents: ev.opponents } : {}),
    ...(ev.score !== undefined ? { score: ev.score } : {}),
    ...(ev.partners ? { partners: ev.partners } : {}),
    ...(ev.positions ? { positions: ev.positions } : {}),
  };
}

function printTable(r: ReturnType<typeof report>): void {
  const lines = [
    `${r.runId === null ? `${r.runDir}, untrained` : `run ${r.runId}, checkpoint ${r.checkpoint} (step ${r.step})`}, ${r.seeds} seeds ${r.seedOffset}..${r.seedOffset + r.episodes - 1}, ${r.temperature === 0 ? 'greedy' : `sampled at temperature ${r.temperature}`}`,
    `success      ${percent(r.success)}`,
    `mean reward  ${r.meanReward.toFixed(3)}  (team return ${r.meanTeamReturn.toFixed(3)})`,
    ...(r.score === undefined ? [] : [`score        ${r.score.toFixed(2)} in self-play${r.partners ? `, ${r.partners.withBot.toFixed(2)} with the bot as partner (the bot team: ${r.partners.botTeam.toFixed(2)})` : ''}`]),
    '',
    formatTable(
      ['agent', 'mean reward', 'local reward', 'parse failures', 'acts'],
      Object.entries(r.perAgent).map(([agent, a]) => [agent, a.meanReward.toFixed(3), a.meanLocalReward.toFixed(3), percent(a.parseFailureRate), String(a.acts)]),
      ['left', 'right', 'right', 'right', 'right'],
    ),
  ];
  if (r.opponents) {
    lines.push('', 'against scripted opponents (both sides, greedy):');
    for (const [name, m] of Object.entries(r.opponents)) lines.push(`  vs ${name.padEnd(8)} win ${percent(m.winRate)}  draw ${percent(m.draws / m.games)}  loss ${percent(m.losses / m.games)}  (${m.games} games, ${m.forfeits} forfeits)`);
  }
  if (r.positions) {
    const p = r.positions;
    lines.push('', `perfect moves in every reachable position (greedy): ${percent(p.all.rate)} of ${p.all.positions} (x ${percent(p.x.rate)}, o ${percent(p.o.rate)}; ${p.all.forfeits} forfeits)`);
  }
  process.stdout.write(`${lines.join('\n')}\n`);
}

export const evalCommand: Command = {
  synopsis: [`eval <run folder> [--checkpoint ${checkpointChoiceHelp}] [--episodes N] [--seed-offset S] [--test] [--temperature T] [--json]`, 'eval <experiment config.json> [--episodes N] [--seed-offset S] [--test] [--temperature T] [--json]'],
  summary: 'validation success and mean reward per agent of a checkpoint, on held-out seeds',
  usage,
  async run(args) {
    const { values, positionals } = parseCommandLine(usage, {
      args: [...args],
      options: {
        checkpoint: { type: 'string' },
        episodes: { type: 'string' },
        'seed-offset': { type: 'string', default: '0' },
        test: { type: 'boolean', default: false },
        temperature: { type: 'string' },
        json: { type: 'boolean', default: false },
        help: { type: 'boolean', short: 'h', default: false },
      },
      allowPositionals: true,
      strict: true,
    });
    if (values.help) return printUsage(usage);
    expectPositionals(positionals, ['<run folder | experiment config.json>'], usage);
    const seedOffset = integerFlag('seed-offset', values['seed-offset'], 0, usage);
    const target = positionals[0]!;
    const configFile = target.endsWith('.json') && (await stat(target).then((s) => s.isFile(), () => false));
    if (configFile && values.checkpoint !== undefined) throw new UsageError('--checkpoint applies to a run folder; an experiment config is evaluated untrained', usage);
    const choice = parseCheckpointChoice(values.checkpoint ?? 'latest');
    if (!choice) throw new UsageError(`--checkpoint must be ${checkpointChoiceHelp}, got '${values.checkpoint}'`, usage);

    let exp: ResolvedExperiment;
    let bases: Map<string, Map<string, Float32Array>>;
    let ck: RunCheckpoint;
    let where: { dir: string; runId: string | null };
    if (configFile) {
      ({ experiment: exp } = await loadExperiment(target));
      bases = new Map();
      for (const [modelId, m] of exp.models) bases.set(modelId, await sourceWeights(m));
      ck = { label: 'untrained', step: 0, dir: null };
      where = { dir: resolve(target), runId: null };
    } else {
      const run = await openRunCheckpoint(target, choice);
      ({ experiment: exp, checkpoint: ck, bases } = run);
      where = { dir: run.folder.dir, runId: run.folder.runId };
    }
    const episodes = values.episodes !== undefined ? integerFlag('episodes', values.episodes, 1, usage) : values.test ? exp.training.testEpisodes : exp.training.validationEpisodes;
    const temperature = values.temperature === undefined ? exp.training.validationTemperature : numberFlag('temperature', values.temperature, 0, 10, usage);
    // The test seeds are the validation range's from TEST_SEED_OFFSET on (as the trainer plays them).
    const [first, seedCount] = values.test ? [TEST_SEED_OFFSET, seedRanges.validation.end - seedRanges.validation.start - TEST_SEED_OFFSET] : [0, TEST_SEED_OFFSET];
    if (seedOffset + episodes > seedCount) throw new UsageError(`--seed-offset + --episodes must be at most ${seedCount} (the ${values.test ? 'test' : 'validation'} seeds), got ${seedOffset + episodes}`, usage);
    // Engine log lines (provider choice) go to stderr, so that --json leaves stdout one JSON object.
    const log = (l: string) => process.stderr.write(`${l}\n`);
    // Agents that write code (math, code) play through the sandbox, as in training.
    const sandbox = await openSandbox(exp, log);
    const engine = await Engine.start({ executionProvider: exp.engine.executionProvider, ...(exp.engine.threads ? { threads: exp.engine.threads } : {}), log }).catch(async (e: unknown) => {
      await sandbox?.close();
      throw e;
    });
    let ev: Evaluation;
    try {
      const policies = await loadTeamPolicies(engine, exp, bases, ck.dir);
      ev = await evaluate(exp.env.make, routingContext(exp, policies, sandbox?.runAll), { ...evaluationOptions(exp, episodes, first + seedOffset), temperature });
    } finally {
      await engine.close();
      await sandbox?.close();
    }
    const r = report(where.dir, where.runId, ck, values.test ? 'test' : 'validation', seedOffset, temperature, ev);
    if (values.json) process.stdout.write(`${JSON.stringify(r)}\n`);
    else printTable(r);
    return 0;
  },
};
