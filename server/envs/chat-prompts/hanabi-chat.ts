/**
 * Hanabi in the chat format (hanabi-env.ts has the game and its terse prompt). The answer is the
 * move after `####`: `#### play 2`, `#### discard 1`, `#### hint p2 R` or `#### hint p2 3`; case,
 * quotes, a trailing period, "card" before a number and colour names (`hint p2 red`) read the same.
 */
import type { Parsed } from '../action-text.ts';
import type { Environment } from '../environment.ts';
import { colourLetters, colourNames } from '../hanabi/hanabi-game.ts';
import { finalAnswer } from './chat-answer.ts';
import { stateLines, type ChatPrompter } from './chat-environment.ts';

function toMove(payload: string): Parsed<string> {
  const s = payload.trim().replace(/\.$/, '').replace(/^["'`]|["'`]$/g, '').trim().toLowerCase().replace(/\s+/g, ' ').replace(/\bcard /, '');
  const slot = /^(play|discard) ([1-9])$/.exec(s);
  if (slot) return { ok: true, action: `${slot[1]} ${slot[2]}` };
  const hint = /^hint (?:player )?p?([1-9]) ([a-z]+|[1-5])$/.exec(s);
  if (hint) {
    const what = hint[2]!;
    if (/^[1-5]$/.test(what)) return { ok: true, action: `hint p${hint[1]} ${what}` };
    const byName = colourNames.indexOf(what as (typeof colourNames)[number]);
    const byLetter = colourLetters.indexOf(what.toUpperCase() as (typeof colourLetters)[number]);
    const colour = byName >= 0 ? byName : what.length === 1 ? byLetter : -1;
    if (colour >= 0) return { ok: true, action: `hint p${hint[1]} ${colourLetters[colour]}` };
  }
  return { ok: false, error: 'the answer must be play N, discard N, or hint pK followed by a colour or a rank' };
}

export const hanabiChat: ChatPrompter = {
  system: (env: Environment, agent: string) =>
    [
      `You play the cooperative card game Hanabi as ${agent}, with ${env.agents.filter((a) => a !== agent).join(', ')}. The team scores the highest card played in each colour's firework; fireworks are built in rank order 1 to 5.`,
      "You see everyone's cards but your own; you know your cards only through hints (shown as colour letter and rank, '?' where unknown). Cards are numbered from 1, the oldest first.",
      'Each turn, do one of: play a card (if it is not the next rank of its colour, it is discarded and a fuse is lost; the third lost fuse ends the game with score 0); discard a card (regains a hint token; not allowed with all 8 tokens); or spend a hint token to tell another player every card of one colour or one rank in their hand.',
      '',
      'Think step by step, then write your move on the last line after ####, for example:',
      '#### play 2',
      '#### discard 1',
      '#### hint p2 R',
    ].join('\n'),
  user: (_env: Environment, agent: string, observation: string) =>
    `The table:\n\n${stateLines(observation, agent)}\n\nYou are ${agent}; choose your move. Reason briefly, then end with the line "#### <move>".`,
  toAction: (_env: Environment, _agent: string, response: string) => {
    const payload = finalAnswer(response);
    return payload.ok ? toMove(payload.action) : payload;
  },
  formatAnswer: (_env: Environment, _agent: string, action: string) => `#### ${action}`,
};
