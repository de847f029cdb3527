/**
 * What the Hanabi convention bot scores (the bar for a trained team and the warm start's teacher)
 * against uniformly random legal play, the baseline measured in the same run, on the test seeds
 * of each variant: 2 players x 3 colours (the small variant of configs/hanabi/) and the full game
 * with 2-5 players. Per variant: mean score with a 95% interval, median, how often a game is
 * perfect or loses its fuses, acts per game, the longest prompt, and the environment's speed
 * (acts per second, median of 5 timed passes) for both players.
 *
 *   npm run bench:hanabi [-- --games N]     (default 500 games a variant; writes bench/results/hanabi.json)
 */
import { writeFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { randomMove } from '../../server/envs/hanabi/hanabi-bot.ts';
import { hanabi, moveText, perfectScore, type HanabiEnvironment, type HanabiOptions } from '../../server/envs/hanabi/hanabi-env.ts';
import { Rng } from '../../server/envs/rng.ts';
import { TEST_SEED_OFFSET, validationSeed } from '../../server/envs/seed-ranges.ts';
import { mean, sampleSd } from '../learning/seed-stats.ts';
import { median } from '../stats.ts';

const { values } = parseArgs({ options: { games: { type: 'string', default: '500' } } });
const games = Number(values.games);
if (!(Number.isInteger(games) && games >= 2)) throw new Error(`--games must be an integer of at least 2, got ${values.games}`);

type Player = (env: HanabiEnvironment, rng: Rng) => string;
const players: Record<'bot' | 'random', Player> = {
  bot: (env) => env.solution(env.currentAgent()),
  random: (env, rng) => moveText(randomMove(env.state, rng)),
};

interface Games {
  scores: number[];
  acts: number;
  perfect: number;
  bombed: number;
  longestPrompt: number;
}

function playAll(options: Partial<HanabiOptions>, player: Player): Games {
  const rng = new Rng(1, 'bench-hanabi');
  const out: Games = { scores: [], acts: 0, perfect: 0, bombed: 0, longestPrompt: 0 };
  for (let g = 0; g < games; g++) {
    const env = hanabi.create(validationSeed(TEST_SEED_OFFSET + g), options);
    while (!env.done) {
      out.longestPrompt = Math.max(out.longestPrompt, env.observe(env.currentAgent()).length);
      env.act(env.currentAgent(), player(env, rng));
      out.acts++;
    }
    out.scores.push(env.score);
    if (env.state.ended === 'perfect') out.perfect++;
    if (env.state.ended === 'fuses') out.bombed++;
  }
  return out;
}

/** The normal-approximation 95% interval of the mean (hundreds of games). */
function ci95(xs: readonly number[]): [number, number] {
  const m = mean(xs);
  const h = (1.96 * sampleSd(xs)) / Math.sqrt(xs.length);
  return [m - h, m + h];
}

function summary(options: Partial<HanabiOptions>, player: Player) {
  const g = playAll(options, player);
  // Speed: 5 timed passes over the same games (the first pass above warmed the code up).
  const times: number[] = [];
  for (let r = 0; r < 5; r++) {
    const t0 = performance.now();
    const again = playAll(options, player);
    times.push((again.acts / (performance.now() - t0)) * 1000);
  }
  return {
    meanScore: mean(g.scores),
    ci95: ci95(g.scores),
    medianScore: median(g.scores),
    perfectRate: g.perfect / games,
    bombOutRate: g.bombed / games,
    actsPerGame: g.acts / games,
    longestPrompt: g.longestPrompt,
    actsPerSecondMedian: median(times),
  };
}

const variants: { name: string; options: Partial<HanabiOptions> }[] = [
  { name: '2p-3c (small)', options: { players: 2, colours: 3 } },
  { name: '2p-5c', options: { players: 2, colours: 5 } },
  { name: '3p-5c', options: { players: 3, colours: 5 } },
  { name: '4p-5c', options: { players: 4, colours: 5 } },
  { name: '5p-5c', options: { players: 5, colours: 5 } },
];

const results = variants.map(({ name, options }) => {
  const bot = summary(options, players.bot);
  const random = summary(options, players.random);
  return {
    variant: name,
    options,
    perfectScore: perfectScore(hanabi.optionsSchema.parse(options)),
    bot,
    random,
    scoreDifference: bot.meanScore - random.meanScore,
    speedRatio: bot.actsPerSecondMedian / random.actsPerSecondMedian,
  };
});

const f = (x: number, d = 2) => x.toFixed(d);
console.log(`Hanabi: convention bot vs random legal play, ${games} test seeds a variant`);
console.log('variant         max  bot mean [95% CI]     median perfect bombed acts  random mean bombed  prompt  bot acts/s  random acts/s');
for (const r of results) {
  const b = r.bot;
  console.log(
    `${r.variant.padEnd(15)} ${String(r.perfectScore).padStart(3)}  ${f(b.meanScore).padStart(5)} [${f(b.ci95[0])}, ${f(b.ci95[1])}]  ${f(b.medianScore, 1).padStart(5)} ${f(b.perfectRate * 100, 1).padStart(6)}% ${f(b.bombOutRate * 100, 1).padStart(5)}% ${f(b.actsPerGame, 1).padStart(5)}  ${f(r.random.meanScore).padStart(11)} ${f(r.random.bombOutRate * 100, 1).padStart(5)}%  ${String(b.longestPrompt).padStart(6)}  ${f(b.actsPerSecondMedian, 0).padStart(10)}  ${f(r.random.actsPerSecondMedian, 0).padStart(13)}`,
  );
}
const out = fileURLToPath(new URL('../results/hanabi.json', import.meta.url));
writeFileSync(out, `${JSON.stringify({ bench: 'hanabi', games, seeds: `validationSeed(${TEST_SEED_OFFSET} + i)`, machine: { cpus: (await import('node:os')).cpus().length }, results }, null, 2)}\n`);
console.log(`wrote ${out}`);
