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
import Database from 'better-sqlite3';
import { hanabi } from '../../server/envs/hanabi/hanabi-env.ts';
import { playerView, surelyPlayable } from '../../server/envs/hanabi/hanabi-game.ts';

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
  sureTurnsPlayed: number;
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

const db = new Database(dbPath, { readonly: true, fileMustExist: true });
try {
  const runs = db.prepare('SELECT id, name, config FROM runs ORDER BY created_at').all() as { id: string; name: string; config: string }[];
  const games = db.prepare('SELECT id, env_seed AS seed FROM trajectories WHERE run_id = ? AND step = ? AND phase = ? ORDER BY env_instance, rollout');
  const turns = db.prepare('SELECT agent_id AS agent, prompt_text AS prompt, response_text AS response FROM turns WHERE trajectory_id = ? AND kept = 1 ORDER BY ordinal');
  let reported = 0;
  for (const run of runs) {
    const config = JSON.parse(run.config) as { seed?: number; env?: { name?: string; options?: unknown } };
    if (config.env?.name !== 'hanabi') continue;
    const t: Tally = { games: 0, acts: 0, refused: 0, plays: 0, scored: 0, misplays: 0, surePlays: 0, sureTurns: 0, sureTurnsPlayed: 0, hints: 0, discards: 0, lostFuses: 0, score: 0, refusedWhy: new Map(), refusedText: new Map() };
    for (const g of games.all(run.id, step, phase) as { id: number; seed: number }[]) {
      const env = hanabi.create(g.seed, config.env.options);
      t.games++;
      for (const turn of turns.all(g.id) as { agent: string; prompt: string; response: string }[]) {
        if (env.done) throw new Error(`run ${run.id} game ${g.id} (seed ${g.seed}): a stored act after the game ended`);
        if (env.observe(turn.agent) !== turn.prompt) throw new Error(`run ${run.id} game ${g.id} (seed ${g.seed}): the replayed prompt differs from the stored one at act ${t.acts + 1}:\n${env.observe(turn.agent)}---\n${turn.prompt}`);
        const s = env.state;
        const seat = s.current;
        const sure = playerView(s, seat).own.map((k) => surelyPlayable(k, s.fireworks));
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
          continue;
        }
        const verb = turn.response.trim().split(' ')[0];
        if (verb === 'hint') t.hints++;
        else if (verb === 'discard') t.discards++;
        else {
          t.plays++;
          const after = env.state;
          if (after.fuses < fusesBefore) t.misplays++;
          else if (after.fireworks.reduce((a, b) => a + b, 0) > scoreBefore) t.scored++;
          if (sure[Number(turn.response.trim().split(' ')[1]) - 1] === true) {
            t.surePlays++;
            t.sureTurnsPlayed++;
          }
        }
      }
      if (env.state.ended === 'fuses') t.lostFuses++;
      t.score += env.score;
    }
    reported++;
    console.log(`run ${run.id} (${run.name}, seed ${config.seed ?? '?'}): ${phase} games at step ${step}`);
    if (t.games === 0) {
      console.log('  no stored games');
      continue;
    }
    console.log(`  games ${t.games}, mean score ${(t.score / t.games).toFixed(2)}, lost every fuse ${t.lostFuses}, acts ${t.acts} (${(t.acts / t.games).toFixed(1)} a game)`);
    console.log(`  refused ${t.refused} (${pct(t.refused, t.acts)}), plays ${t.plays} (${pct(t.plays, t.acts)}): scored ${t.scored}, misplayed ${t.misplays} (${pct(t.misplays, t.acts)} of acts), of a surely playable card ${t.surePlays}`);
    if (t.refused > 0) console.log(`  refused for: ${top(t.refusedWhy, 4)}; most refused answers: ${top(t.refusedText, 4)}`);
    console.log(`  turns holding a surely playable card ${t.sureTurns}, played one on ${t.sureTurnsPlayed} (${pct(t.sureTurnsPlayed, t.sureTurns)})`);
    console.log(`  hints ${t.hints} (${pct(t.hints, t.acts)}), discards ${t.discards} (${pct(t.discards, t.acts)})`);
  }
  if (reported === 0) throw new Error(`${dbPath}: no hanabi run in this store`);
} finally {
  db.close();
}
