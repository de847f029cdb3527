/** Sokoban in the chat format (sokoban.ts has the puzzle and its terse prompt). */
import { formatMoveList, parseMoveList } from './chat-answer.ts';
import { puzzleChatPrompter } from './puzzle-chat.ts';

export const sokobanChat = puzzleChatPrompter({
  task: 'push the box B onto the goal G in a walled room (Sokoban)',
  rules: [
    'The room shows P (you), B (the box), G (the goal), # (a wall) and . (floor); + is you standing on the goal and * the box on the goal. The first line of the room is the top row.',
    'A move is U (up), D (down), L (left) or R (right), one cell each, made in order. Walking into the box pushes it one cell the same way if the cell beyond it is free; you cannot pull it. A move into a wall, or a push into a wall, is blocked and wasted. A box pushed into a corner can never reach the goal, so think before pushing.',
  ],
  report: 'tool: <moves>: box <n> from G, <k> blocked, solved yes|no',
  reportMeaning: 'how far from G the box would end, how many moves were blocked, and whether the box reaches the goal',
  answer: 'the list of moves to make, as a JSON list of letters',
  example: '["R","R","D","D"]',
  request: {
    tool: 'Propose the moves that push the box onto the goal.',
    plan: 'Decide the moves to make now.',
    solo: 'Give the moves that push the box onto the goal.',
  },
  toAction: (payload) => parseMoveList(payload),
  formatPayload: formatMoveList,
});
