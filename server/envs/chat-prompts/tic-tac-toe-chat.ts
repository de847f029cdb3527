/**
 * Tic-tac-toe in the chat format (tic-tac-toe.ts has the game and its terse prompt). The answer is
 * the number of a free cell after `####`; `#### 5`, `#### [5]`, `#### "5"` and `#### cell 5` read
 * the same.
 */
import type { Parsed } from '../action-text.ts';
import type { Environment } from '../environment.ts';
import { finalAnswer } from './chat-answer.ts';
import { stateLines, type ChatPrompter } from './chat-environment.ts';

const markOf = (agent: string): string => agent.toUpperCase();

function toCell(payload: string): Parsed<string> {
  const s = payload.trim().replace(/\.$/, '').replace(/^\[|\]$/g, '').replace(/^["']|["']$/g, '').replace(/^cell\s*/i, '').trim();
  return /^[1-9]$/.test(s) ? { ok: true, action: s } : { ok: false, error: 'the answer must be one cell number from 1 to 9' };
}

export const ticTacToeChat: ChatPrompter = {
  system: (env: Environment, agent: string) =>
    [
      `You play tic-tac-toe as ${markOf(agent)} against ${markOf(env.agents.find((a) => a !== agent) ?? '')}.`,
      'The board has three rows; X and O are marks, and each free cell shows its number: 1 2 3 on the top row, 4 5 6 in the middle, 7 8 9 at the bottom. Three of your marks in a row, a column or a diagonal win. Marking an occupied cell, or an answer that is not a free cell number, loses the game at once.',
      '',
      'Think step by step (can you win now? must you block?), then write the cell you mark on the last line as #### followed by its number, for example:',
      '#### 5',
    ].join('\n'),
  user: (_env: Environment, agent: string, observation: string) =>
    `The board:\n\n${stateLines(observation, agent)}\n\nYou are ${markOf(agent)}; choose a free cell. Reason briefly, then end with the line "#### <cell number>".`,
  toAction: (_env: Environment, _agent: string, response: string) => {
    const payload = finalAnswer(response);
    return payload.ok ? toCell(payload.action) : payload;
  },
  formatAnswer: (_env: Environment, _agent: string, action: string) => `#### ${action}`,
};
