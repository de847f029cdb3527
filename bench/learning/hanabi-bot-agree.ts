/**
 * Where a Hanabi policy departs from the convention bot, in a run's stored games: replays every
 * stored game of a phase at a step from its seed with the stored answers (as hanabi-acts.ts does)
 * and, at each act, compares the answer with the move the bot would make in that position
 * (`solution`, from the acting player's view).
 *
 * Usage: node --import tsx bench/learning/hanabi-bot-agree.ts <troupe.db> [step] [validation|train]
 *   step: default 0 (the warm-started policy's validation); phase: default validation.
 *
 * Acts are grouped by the bot's move: it plays; it hints a playable card (a hint, with a token,
 * while another player holds a card that is the next of its colour: the bot's rule 2); it hints
 * with nothing playable to hint (rule 4, all 8 tokens); it discards. Within each, the policy's
 * answer is the bot's move exactly, a refused move (unreadable or refused by the rules, by its
 * first word), or another legal move (by its first word).
 */
import { openRunStore } from '../../server/store/index.ts';
import { hanabiRuns, replayGames } from './hanabi-replay.ts';

const [dbPath, stepArg = '0', phase = 'validation'] = process.argv.slice(2);
if (!dbPath || !/^\d+$/.test(stepArg) || (phase !== 'validation' && phase !== 'train')) {
  throw new Error('usage: hanabi-bot-agree.ts <troupe.db> [step] [validation|train]');
}
const step = Number(stepArg);

const store = openRunStore(dbPath, { queryOnly: true });
try {
  let reported = 0;
  for (const run of hanabiRuns(store)) {
    const tally = new Map<string, Map<string, number>>();
    const add = (bot: string, what: string): void => {
      const m = tally.get(bot) ?? new Map<string, number>();
      m.set(what, (m.get(what) ?? 0) + 1);
      tally.set(bot, m);
    };
    const games = replayGames(store, run, step, phase, (env, turn) => {
      const s = env.state;
      const bot = env.solution(turn.agent);
      const playableElsewhere = s.hands.some((h, i) => i !== s.current && h.some((c) => s.fireworks[c.colour] === c.rank - 1));
      const botKind = bot.startsWith('play ') ? 'bot plays' : bot.startsWith('discard ') ? 'bot discards' : playableElsewhere && s.hints > 0 ? 'bot hints a playable card' : 'bot hints, nothing playable to hint';
      const r = env.act(turn.agent, turn.response);
      const answer = turn.response.trim();
      const verb = answer.split(' ')[0] ?? '';
      add(botKind, answer === bot ? 'the bot move' : r.parseError !== null ? 'unreadable' : r.illegal === true ? `refused ${verb}` : `other ${verb}`);
    });
    reported++;
    console.log(`run ${run.id} (${run.name}, seed ${run.config.seed ?? '?'}): ${phase} games at step ${step}, ${games} games`);
    for (const [kind, m] of [...tally].sort((a, b) => a[0].localeCompare(b[0]))) {
      const n = [...m.values()].reduce((a, b) => a + b, 0);
      console.log(`  ${kind} (${n} acts): ${[...m].sort((a, b) => b[1] - a[1] || a[0].localeCompare(b[0])).map(([w, c]) => `${w} ${c}`).join(', ')}`);
    }
  }
  if (reported === 0) throw new Error(`${dbPath}: no hanabi run in this store`);
} finally {
  store.close();
}
