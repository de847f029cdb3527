/** Plan-Path in the chat format (plan-path.ts has the puzzle and its terse prompt). */
import { formatMoveList, parseMoveList } from './chat-answer.ts';
import { puzzleChatPrompter } from './puzzle-chat.ts';

export const planPathChat = puzzleChatPrompter({
  task: 'walk the player P to the goal G on a grid with walls',
  rules: [
    'The grid shows P (you), G (the goal), # (a wall) and . (a free cell); the first grid line is the top row.',
    'A move is U (up), D (down), L (left) or R (right), one cell each, made in order. A move into a wall or off the grid is blocked: you stay put and the move is wasted. Moves after reaching the goal are wasted too. Fewer moves are better.',
    'Above the grid, "goal:" says where G lies from P (2D 1L: two down, one left) and "open:" lists the moves not blocked from where P stands.',
  ],
  report: 'tool: <moves>: <n> from G, <k> blocked, goal yes|no',
  reportMeaning: 'where the moves would end as a distance from G, how many were blocked, and whether they reach the goal',
  answer: 'the list of moves to make, as a JSON list of letters',
  example: '["D","D","R"]',
  request: {
    tool: 'Propose the moves that take P to G.',
    plan: 'Decide the moves to make now.',
    solo: 'Give the moves that take P to G.',
  },
  toAction: (payload) => parseMoveList(payload),
  formatPayload: formatMoveList,
});
