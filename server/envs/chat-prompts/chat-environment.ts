/**
 * Chat-format prompts for instruction-tuned models, as a wrapper around any environment.
 *
 * The environments speak a terse text made for the embedded character-level model (a state in a
 * few short lines, answers like `RRDL`). A pretrained chat model does better with what it was
 * tuned on: a system message with its role, the rules and the answer format, a user message with
 * the state, and room to reason before a final `#### ["R","R","D","L"]` line (the reference's
 * format, PettingLLMs' `stateful_env`). `ChatEnvironment` gives exactly that on top of an environment
 * without changing it:
 *  - `messages(agent)` is the system and the user message; `observe(agent)` is both as one text
 *    (the reference's layout: it sent a single user message), which is what the trainer's
 *    prompt encoders take today (`[{ role: 'user', text: observe(agent) }]`). Use `promptTurns`
 *    for the split form in every place that encodes a run's prompts, or in none: warm start,
 *    rollouts and validation must lay prompts out alike;
 *  - `act(agent, response)` reads the final answer tolerantly (`chat-answer.ts`), turns it into
 *    the environment's own action text and acts that. A response with no readable answer acts the
 *    empty action — every environment rejects it, counts a parse error and applies its penalty —
 *    and the result carries the chat reader's reason instead of the environment's;
 *  - `solution(agent)` is the solver's answer in the chat format, so warm-start demonstrations
 *    and `rolloutSolver` work unchanged.
 * Agents the prompter names in `programAgents` (the puzzles' tool, as the reference's tool agent,
 * PettingLLMs' `stateful_env`) answer with a Python program instead: `programs(agent, response)` is the
 * response's last ```python block, which the caller runs in the sandbox (program-acts.ts), and
 * `act` reads the run's standard output with `toAction` (its `**Actions List**: [...]` line) and
 * acts that on the environment. No block, a run that failed, or output with no readable answer
 * acts the empty action, as an unreadable answer does, with a reason that names the failure (the
 * run's status and Python's exception name) and never quotes the program or what it printed.
 * Rewards, turns, clones and seeds are the wrapped environment's.
 */
import type { Parsed } from '../action-text.ts';
import type { Execution, ProgramRequest } from '../../protocol/trajectory.ts';
import { checkAgent, type AgentTurnResult, type Environment } from '../environment.ts';
import { WrappedEnvironment } from '../wrapped-environment.ts';
import { lastPythonBlock } from './chat-answer.ts';
import { exceptionName } from '../program-acts.ts';

/** One message of a chat prompt (the shape of the models' `ChatTurn`). */
export interface PromptTurn {
  readonly role: 'system' | 'user';
  readonly text: string;
}

/** What one environment's chat prompts say and how its answers are read. */
export interface ChatPrompter {
  /** The agent's role, the rules, the state notation and the answer format. */
  system(env: Environment, agent: string): string;
  /** The state (from the terse observation) and the request. */
  user(env: Environment, agent: string, observation: string): string;
  /** The final answer of a free-form response as the environment's action text. */
  toAction(env: Environment, agent: string, response: string, observation: string): Parsed<string>;
  /**
   * The solver's action text written as a chat answer. For an agent in `programAgents`, a response
   * with a ```python block whose program prints what `toAction` reads back as `action`.
   */
  formatAnswer(env: Environment, agent: string, action: string): string;
  /**
   * Agents who answer with a Python program whose printed output is their answer (read by
   * `toAction`), run in the sandbox; absent or [] when every agent answers in words. An
   * environment whose own acts run code (math) is not listed here: its programs are its own.
   */
  readonly programAgents?: readonly string[];
}

/**
 * Longest program a chat agent may write, in characters: the math tool's limit
 * (math-env.ts MAX_PROGRAM_CHARS); a longer block is a parse error, never run.
 */
export const MAX_CHAT_PROGRAM_CHARS = 4000;

/** The program of a code-writing agent's response, or why there is none. */
function programOf(response: string): Parsed<string> {
  const block = lastPythonBlock(typeof response === 'string' ? response : '');
  if (!block.ok) return block;
  if (block.action.length > MAX_CHAT_PROGRAM_CHARS) return { ok: false, error: `the program is longer than ${MAX_CHAT_PROGRAM_CHARS} characters` };
  if (block.action.includes('\0')) return { ok: false, error: 'the program contains a NUL character' };
  return block;
}

/** Why a run gave no answer, in words safe to show anywhere; null when it ran to the end. */
function runFailure(e: Execution): string | null {
  if (e.status === 'ok') return null;
  if (e.status === 'error') {
    const name = exceptionName(e.stderr);
    return `the program failed (${name ?? `exit code ${e.exitCode ?? 'none'}`})`;
  }
  if (e.status === 'timeout') return 'the program ran out of time';
  if (e.status === 'output-limit') return 'the program printed more than the output limit';
  return 'the sandbox refused to run the program';
}

export class ChatEnvironment extends WrappedEnvironment implements Environment {
  readonly #env: Environment;
  readonly #prompter: ChatPrompter;

  constructor(env: Environment, prompter: ChatPrompter) {
    super(env);
    this.#env = env;
    this.#prompter = prompter;
  }

  /** The system and user messages as one prompt text. */
  observe(agent: string): string {
    return this.messages(agent).map((m) => m.text).join('\n\n');
  }

  /** The system message and the user message for `agent` now. */
  messages(agent: string): PromptTurn[] {
    const user = this.#prompter.user(this.#env, agent, this.#env.observe(agent));
    return [
      { role: 'system', text: this.#prompter.system(this.#env, agent) },
      { role: 'user', text: user },
    ];
  }

  /** Whether `agent` answers with a program (the prompter's `programAgents`). */
  writesCode(agent: string): boolean {
    return this.agents.includes(agent) && (this.#prompter.programAgents ?? []).includes(agent);
  }

  /**
   * A code-writing agent's program (the response's last ```python block, no input), or the wrapped
   * environment's programs for the action read out of the response.
   */
  programs(agent: string, text: string): ProgramRequest[] {
    checkAgent(this, agent);
    if (this.writesCode(agent)) {
      const program = programOf(text);
      return program.ok ? [{ language: 'python', code: program.action, stdin: '' }] : [];
    }
    if (!this.#env.programs) return [];
    const answer = this.#prompter.toAction(this.#env, agent, text, this.#env.observe(agent));
    return answer.ok ? this.#env.programs(agent, answer.action) : [];
  }

  act(agent: string, text: string, executions?: readonly Execution[]): AgentTurnResult {
    // observe() checks the agent, so a caller bug throws here as it would in the environment.
    const observation = this.#env.observe(agent);
    const answer = this.writesCode(agent) ? this.#programAnswer(agent, text, executions ?? [], observation) : this.#prompter.toAction(this.#env, agent, text, observation);
    if (answer.ok) return this.#env.act(agent, answer.action, this.writesCode(agent) ? undefined : executions);
    const r = this.#env.act(agent, '');
    return { ...r, parseError: answer.error, info: `parse error: ${answer.error}` };
  }

  /** The action a code-writing agent's program printed, or why there is none. */
  #programAnswer(agent: string, text: string, executions: readonly Execution[], observation: string): Parsed<string> {
    const program = programOf(text);
    if (!program.ok) return program;
    if (executions.length !== 1) throw new Error(`${this.name}: agent '${agent}' wrote a program but act got ${executions.length} executions for it (run programs() first)`);
    const run = executions[0]!;
    const failure = runFailure(run);
    if (failure !== null) return { ok: false, error: failure };
    if (run.stdout.trim() === '') return { ok: false, error: 'the program printed nothing' };
    const answer = this.#prompter.toAction(this.#env, agent, run.stdout, observation);
    return answer.ok ? answer : { ok: false, error: `the program's output: ${answer.error}` };
  }

  clone(): ChatEnvironment {
    return new ChatEnvironment(this.#env.clone(), this.#prompter);
  }

  solution(agent: string): string {
    return this.#prompter.formatAnswer(this.#env, agent, this.#env.solution(agent));
  }

  flawedSolution(agent: string, variant: number): string | null {
    const flawed = this.#env.flawedSolution?.(agent, variant) ?? null;
    return flawed === null ? null : this.#prompter.formatAnswer(this.#env, agent, flawed);
  }
}

/**
 * Whether `env`'s chat prompts ask some agent of it for a program that runs (a `programAgents`
 * agent it has): then a run needs the sandbox, as it does for an environment whose factory
 * `runsCode` (environments.ts `environmentRunsCode`). False for terse environments.
 */
export function chatWritesCode(env: Environment): boolean {
  return env instanceof ChatEnvironment && env.agents.some((a) => env.writesCode(a));
}

/**
 * The prompt turns for `agent`: a chat environment's system and user messages, or the terse
 * observation as the one user turn the embedded model was trained on. See the header: a run's
 * prompt encoders all use this, or none does.
 */
export function promptTurns(env: Environment, agent: string): PromptTurn[] {
  return env instanceof ChatEnvironment ? env.messages(agent) : [{ role: 'user', text: env.observe(agent) }];
}

/** The observation without its last line when that line is the agent's terse request (`plan: moves (U/D/L/R)`). */
export function stateLines(observation: string, agent: string): string {
  const lines = observation.replace(/\n$/, '').split('\n');
  if (lines.length > 1 && lines.at(-1)!.startsWith(`${agent}:`)) lines.pop();
  return lines.join('\n');
}
