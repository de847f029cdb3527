/**
 * What a Hanabi policy did, act by act, in a run's stored games: replays every stored game of a
 * phase at a step from its seed with the stored answers, and counts the acts by kind.
 *
 * Usage: node --import tsx bench/learning/hanabi-acts.ts <troupe.db> [step] [validation|train]
 *   step: default 0 (the warm-started policy's validation); phase: default validation.
 *   bench:learning keeps its store with LEARNING_KEEP_RUNS=1 (the path is printed); run-variant.ts
 *   keeps /tmp/troupe-variant-*\/troupe.db. Every Hanabi run in the store is reported.
 *
 * The store holds the validation games (greedy self-play, at step 0 and at each validation) and
 * the training rollouts (sampled; only the kept branch of each turn is replayed, the game as it
 * went on); the test games and the games with the bot are not stored, so they cannot be read here.
 *
 * Each game is re-dealt from its seed with the run's env options and the stored answers are played
 * in order; the replayed prompt must equal the stored one (else the store and the environment
 * disagree and the script stops). Per act, from the game as it stood:
 *  - refused: a parse error or a move the rules refuse (a pass), with the commonest reasons and
 *    answers;
 *  - plays, scored or misplayed; "sure": the played card was surely playable by the acting player's
 *    knowledge (`surelyPlayable`, negative hints included: the convention bot's test and the
 *    `showPlayable` line's);
 *  - sure-play turns: turns where the actor held at least one surely playable card (the bot plays
 *    then), and of those, turns on which it played one;
 *  - hints, discards (legal ones).
 */
import type { HanabiEnvironment } from '../../server/envs/hanabi/hanabi-env.ts';
import { playerView, surelyPlayable } from '../../server/envs/hanabi/hanabi-game.ts';
import { openRunStore } from '../../server/store/index.ts';
import { hanabiRuns, replayGames, type StoredAct } from './hanabi-replay.ts';

const [dbPath, stepArg = '0', phase = 'validation'] = process.argv.slice(2);
if (!dbPath || !/^\d+$/.test(stepArg) || (phase !== 'validation' && phase !== 'train')) {
  throw new Error('usage: hanabi-acts.ts <troupe.db> [step] [validation|train]');
}
const step = Number(stepArg);

interface Tally {
  games: number;
  acts: number;
  refused: number;
  plays: number;
  scored: number;
  misplays: number;
  surePlays: number;
  sureTurns: number;
  hints: number;
  discards: number;
  lostFuses: number;
  score: number;
  /** Refused acts by the rules' reason ('unreadable' for a parse error), and by answer. */
  refusedWhy: Map<string, number>;
  refusedText: Map<string, number>;
}

/** The `n` most frequent keys of a tally, 'key N' comma-separated. */
const top = (m: ReadonlyMap<string, number>, n: number): string =>
  [...m].sort((a, b) => b[1] - a[1] || a[0].localeCompare(b[0])).slice(0, n).map(([k, v]) => `${JSON.stringify(k)} ${v}`).join(', ');

const pct = (n: number, d: number): string => (d === 0 ? '-' : `${((100 * n) / d).toFixed(1)}%`);

const store = openRunStore(dbPath, { queryOnly: true });
try {
  let reported = 0;
  for (const run of hanabiRuns(store)) {
    const t: Tally = { games: 0, acts: 0, refused: 0, plays: 0, scored: 0, misplays: 0, surePlays: 0, sureTurns: 0, hints: 0, discards: 0, lostFuses: 0, score: 0, refusedWhy: new Map(), refusedText: new Map() };
    const onAct = (env: HanabiEnvironment, turn: StoredAct): void => {
      const s = env.state;
      const sure = playerView(s, s.current).own.map((k) => surelyPlayable(k, s.fireworks));
      const fusesBefore = s.fuses;
      const scoreBefore = s.fireworks.reduce((a, b) => a + b, 0);
      const r = env.act(turn.agent, turn.response);
      t.acts++;
      if (sure.some(Boolean)) t.sureTurns++;
      if (r.parseError !== null || r.illegal === true) {
        t.refused++;
        const why = r.parseError !== null ? 'unreadable' : (/: ([^:]+)\)$/.exec(r.info)?.[1] ?? 'refused');
        t.refusedWhy.set(why, (t.refusedWhy.get(why) ?? 0) + 1);
        t.refusedText.set(turn.response, (t.refusedText.get(turn.response) ?? 0) + 1);
        return;
      }
      const verb = turn.response.trim().split(' ')[0];
      if (verb === 'hint') t.hints++;
      else if (verb === 'discard') t.discards++;
      else {
        t.plays++;
        const after = env.state;
        if (after.fuses < fusesBefore) t.misplays++;
        else if (after.fireworks.reduce((a, b) => a + b, 0) > scoreBefore) t.scored++;
        if (sure[Number(turn.response.trim().split(' ')[1]) - 1] === true) t.surePlays++;
      }
    };
    t.games = replayGames(store, run, step, phase, onAct, (env) => {
      if (env.state.ended === 'fuses') t.lostFuses++;
      t.score += env.score;
    });
    reported++;
    console.log(`run ${run.id} (${run.name}, seed ${run.config.seed ?? '?'}): ${phase} games at step ${step}`);
    if (t.games === 0) {
      console.log('  no stored games');
      continue;
    }
    console.log(`  games ${t.games}, mean score ${(t.score / t.games).toFixed(2)}, lost every fuse ${t.lostFuses}, acts ${t.acts} (${(t.acts / t.games).toFixed(1)} a game)`);
    console.log(`  refused ${t.refused} (${pct(t.refused, t.acts)}), plays ${t.plays} (${pct(t.plays, t.acts)}): scored ${t.scored}, misplayed ${t.misplays} (${pct(t.misplays, t.acts)} of acts), of a surely playable card ${t.surePlays}`);
    if (t.refused > 0) console.log(`  refused for: ${top(t.refusedWhy, 4)}; most refused answers: ${top(t.refusedText, 4)}`);
    console.log(`  turns holding a surely playable card ${t.sureTurns}, played one on ${t.surePlays} (${pct(t.surePlays, t.sureTurns)})`);
    console.log(`  hints ${t.hints} (${pct(t.hints, t.acts)}), discards ${t.discards} (${pct(t.discards, t.acts)})`);
  }
  if (reported === 0) throw new Error(`${dbPath}: no hanabi run in this store`);
} finally {
  store.close();
}
