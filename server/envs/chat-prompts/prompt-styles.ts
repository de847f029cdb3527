/**
 * Prompt styles: 'terse' is the environments' own text, the default, made for the embedded
 * character-level model; 'chat' wraps each environment in `ChatEnvironment` with its chat
 * prompter, for instruction-tuned pretrained models. The experiment config picks one
 * (`env.promptStyle`); the trainer makes every environment through `withPromptStyle`.
 */
import type { Environment } from '../environment.ts';
import type { EnvironmentName } from '../environments.ts';
import { ChatEnvironment, type ChatPrompter } from './chat-environment.ts';
import { planPathChat } from './plan-path-chat.ts';
import { sokobanChat } from './sokoban-chat.ts';
import { sudokuChat } from './sudoku-chat.ts';
import { ticTacToeChat } from './tic-tac-toe-chat.ts';
import { mathChat } from './math-chat.ts';
import { codeChat } from './code-chat.ts';
import { hanabiChat } from './hanabi-chat.ts';

export const promptStyles = ['terse', 'chat'] as const;
export type PromptStyle = (typeof promptStyles)[number];

/** Every environment has chat prompts (the type checker refuses a registry entry without). */
export const chatPrompters = {
  'plan-path': planPathChat,
  sokoban: sokobanChat,
  sudoku: sudokuChat,
  'tic-tac-toe': ticTacToeChat,
  math: mathChat,
  code: codeChat,
  hanabi: hanabiChat,
} satisfies Record<EnvironmentName, ChatPrompter>;

const hasChatPrompter = (name: string): name is keyof typeof chatPrompters => Object.hasOwn(chatPrompters, name);

/** The environment as agents of `style` see it. */
export function withPromptStyle(env: Environment, style: PromptStyle): Environment {
  if (style === 'terse') return env;
  if (!hasChatPrompter(env.name)) throw new Error(`no chat prompts for environment '${env.name}' (have: ${Object.keys(chatPrompters).join(', ')})`);
  return new ChatEnvironment(env, chatPrompters[env.name]);
}
