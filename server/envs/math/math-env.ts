/**
 * The math environment (PettingLLMs' `math_env`): a tool agent writes a Python program whose printed
 * output is its answer, the program runs in the sandbox, and a reasoner who sees that output gives
 * the team's answer. The episode ends when the two agree, or after `maxTurns` rounds.
 *
 * Variants (the `variant` option):
 *  - 'team' (agents ['tool', 'reasoner']): each round the tool writes a program; its run's output
 *    (the last printed line, or how it failed) goes into the reasoner's prompt; the reasoner answers.
 *  - 'single' (['solo']): one reasoner answers from the question alone, with no code run: the
 *    baseline a team with execution must beat.
 *  - 'single-tool' (['solo']): one agent writes a program and its printed output is its answer
 *    (one policy playing both roles, with execution).
 *  A single agent's episode is one round: it sees nothing new in a second.
 *
 * Terse prompts (the embedded character-level model's), e.g. for the reasoner:
 *   Q: 482*39
 *   out: 18798
 *   reasoner: answer
 * The tool's response is the program itself (`print(482*39)`); the reasoner's is the answer.
 * The program's output enters the reasoner's prompt reduced to printable ASCII and cut short, and
 * a failed run shows only its status (and Python's exception name), so no raw text the model
 * wrote reaches a prompt unchecked. From the second round the tool sees its last output and the
 * reasoner's last answer (`last: out 18798, answer 18789`).
 *
 * Rewards, per act (the reference's, PettingLLMs' per-environment rewards, HEAD):
 *  - tool: team 0 (its program does not change the task state); local +1 when its output is the
 *    right answer, 0 when it runs and prints something else, -1 when it cannot run: no program,
 *    an error, a timeout, too much output.
 *  - reasoner, solo: team +1 when its answer is right, else 0; local the same +1 / 0, and -1 for an
 *    answer that does not parse. (With alpha = 1 a right answer is worth 2, as in the reference.)
 *  - single-tool solo: team +1 when right; local as the tool's.
 * Answers are compared with `verifyAnswer(gold, answer)` (answer-check.ts), gold first.
 * `success`: the reasoner's (solo's) latest answer is right.
 */
import { z } from 'zod';
import type { Execution, ProgramRequest } from '../../protocol/trajectory.ts';
import { trimAscii } from '../action-text.ts';
import { exceptionName } from '../program-acts.ts';
import { checkActor, checkAgent, checkSeed, parseOptions, type AgentTurnResult, type Environment, type EnvironmentFactory } from '../environment.ts';
import { RoundRobinEnvironment } from '../round-robin.ts';
import { verifyAnswer } from './answer-check.ts';
import { generateProblem, mathTiers, type MathProblem } from './math-problems.ts';

export const mathVariants = ['team', 'single', 'single-tool'] as const;
export type MathVariant = (typeof mathVariants)[number];

/** Rewards of the math workflow (see the header). */
export const mathRewards = { right: 1, wrong: 0, failed: -1 } as const;

/** Longest program a tool may write, in characters (the sandbox refuses far larger ones anyway). */
export const MAX_PROGRAM_CHARS = 4000;
/** Longest output line shown to the reasoner. */
const MAX_SHOWN_OUTPUT = 40;

export const mathOptionsSchema = z
  .object({
    /** Problem tiers to draw from, each equally likely. */
    tiers: z
      .array(z.enum(mathTiers))
      .min(1)
      .max(mathTiers.length)
      .default(['mul'])
      .describe("Problem tiers drawn from, each equally likely: add (two 4-digit numbers), mul (3-digit times 2-digit), mod (a modular power), linear (solve a*x+b=c), count (n up to N divisible by p or q)."),
    /** Rounds before the episode ends without agreement. */
    maxTurns: z.int().min(1).max(8).default(2).describe('Team variant: rounds before the episode ends without the tool and the reasoner agreeing.'),
    /** team, single or single-tool. */
    variant: z
      .enum(mathVariants)
      .default('team')
      .describe("'team' (tool writes a program that runs, reasoner answers), 'single' (one reasoner, no code run), or 'single-tool' (one agent writes a program; its output is the answer)."),
  })
  .strict();
export type MathOptions = z.output<typeof mathOptionsSchema>;

const agentsOf: Record<MathVariant, readonly string[]> = { team: ['tool', 'reasoner'], single: ['solo'], 'single-tool': ['solo'] };

/** The last non-empty line of a program's output, or null. */
export function lastLine(stdout: string): string | null {
  const lines = stdout.split('\n').map((l) => l.trim()).filter((l) => l !== '');
  return lines.at(-1) ?? null;
}

/** Printable ASCII only, cut to `max` characters: what may enter a prompt of a program's output. */
function shown(text: string, max = MAX_SHOWN_OUTPUT): string {
  const clean = text.replace(/[^\x20-\x7e]/g, '?');
  return clean.length > max ? `${clean.slice(0, max)}...` : clean;
}

/** What a tool's run amounted to: its answer line, or why it has none. */
interface ToolOutcome {
  /** The answer the program printed (its last line), or null when it failed or printed nothing. */
  readonly answer: string | null;
  /** The line shown in prompts: `out: 1913937`, `out: error ZeroDivisionError`, `out: timeout`. */
  readonly report: string;
  readonly ran: boolean;
}

function toolOutcome(e: Execution): ToolOutcome {
  if (e.status === 'ok') {
    const line = lastLine(e.stdout);
    return line === null ? { answer: null, report: 'nothing printed', ran: true } : { answer: line, report: shown(line), ran: true };
  }
  if (e.status === 'error') return { answer: null, report: `error${exceptionName(e.stderr) ? ` ${exceptionName(e.stderr)}` : ''}`, ran: false };
  return { answer: null, report: e.status, ran: false };
}

export class MathEnvironment extends RoundRobinEnvironment implements Environment {
  readonly name = 'math';
  readonly seed: number;
  readonly optimalMoves = null;
  readonly options: MathOptions;
  readonly problem: MathProblem;
  #toolAnswer: string | null = null; // this round's tool answer
  #toolReport: string | null = null; // this round's `out:` line
  #last: string | null = null; // the previous round's summary, for the tool

  constructor(seed: number, options: MathOptions, problem?: MathProblem) {
    super(agentsOf[options.variant], options.variant === 'team' ? options.maxTurns : 1);
    this.seed = seed;
    this.options = Object.freeze({ ...options, tiers: [...options.tiers] });
    this.problem = problem ?? generateProblem(seed, options.tiers);
  }

  /** Whether `agent` answers by writing a program. */
  #writesCode(agent: string): boolean {
    return agent === 'tool' || (agent === 'solo' && this.options.variant === 'single-tool');
  }

  observe(agent: string): string {
    checkAgent(this, agent);
    // No header line: with one ('math mul, turn 1/2') the embedded model did not learn to copy the
    // question's digits in 500 warm-start steps; without it, it copied them all within 300.
    const lines = [`Q: ${this.problem.question}`];
    if (agent === 'reasoner') lines.push(`out: ${this.#toolReport ?? 'no program'}`);
    else if (agent === 'tool' && this.#last !== null) lines.push(`last: ${this.#last}`);
    lines.push(`${agent}: ${this.#writesCode(agent) ? 'python' : 'answer'}`);
    return `${lines.join('\n')}\n`;
  }

  /** The program in a code-writing agent's response (the whole response, trimmed), or why there is none. */
  #parseProgram(text: string): { ok: true; code: string } | { ok: false; error: string } {
    const code = typeof text === 'string' ? text.trim() : '';
    if (code === '') return { ok: false, error: 'empty program' };
    if (code.length > MAX_PROGRAM_CHARS) return { ok: false, error: `program longer than ${MAX_PROGRAM_CHARS} characters` };
    if (code.includes('\0')) return { ok: false, error: 'program contains a NUL character' };
    return { ok: true, code };
  }

  programs(agent: string, text: string): ProgramRequest[] {
    checkAgent(this, agent);
    if (!this.#writesCode(agent)) return [];
    const p = this.#parseProgram(text);
    return p.ok ? [{ language: 'python', code: p.code, stdin: '' }] : [];
  }

  act(agent: string, text: string, executions: readonly Execution[] = []): AgentTurnResult {
    checkActor(this, agent);
    const stats = this.rounds.stats[agent]!;
    stats.acts++;
    let teamReward = 0;
    let localReward: number;
    let parseError: string | null = null;
    let info: string;
    if (this.#writesCode(agent)) {
      const p = this.#parseProgram(text);
      if (p.ok && executions.length !== 1) throw new Error(`math: agent '${agent}' wrote a program but act got ${executions.length} executions for it (run programs() first)`);
      if (!p.ok) {
        parseError = p.error;
        stats.parseErrors++;
        localReward = mathRewards.failed;
        this.#toolAnswer = null;
        this.#toolReport = 'no program';
        info = `parse error: ${p.error}`;
      } else {
        const out = toolOutcome(executions[0]!);
        if (!out.ran) stats.invalidMoves++;
        const right = out.answer !== null && verifyAnswer(this.problem.answer, out.answer);
        localReward = !out.ran ? mathRewards.failed : right ? mathRewards.right : mathRewards.wrong;
        this.#toolAnswer = out.answer;
        this.#toolReport = out.report;
        info = `program ${executions[0]!.status}, out ${out.report}: ${right ? 'right' : 'wrong'}`;
        if (agent === 'solo') {
          teamReward = right ? 1 : 0;
          this.rounds.success = right;
        }
      }
      // A single agent's episode is one round (maxTurns 1): #advance ends it.
    } else {
      const answer = trimAscii(typeof text === 'string' ? text : '');
      if (answer === '' || answer.length > 200) {
        parseError = answer === '' ? 'empty answer' : 'answer longer than 200 characters';
        stats.parseErrors++;
        localReward = mathRewards.failed;
        this.rounds.success = false;
        info = `parse error: ${parseError}`;
      } else {
        const right = verifyAnswer(this.problem.answer, answer);
        teamReward = right ? 1 : 0;
        localReward = right ? mathRewards.right : mathRewards.wrong;
        this.rounds.success = right;
        const agreed = this.#toolAnswer !== null && verifyAnswer(this.#toolAnswer, answer);
        info = `answer ${right ? 'right' : 'wrong'}${agent === 'reasoner' ? `, ${agreed ? 'agrees' : 'disagrees'} with the tool` : ''}`;
        if (agreed) this.rounds.done = true;
        this.#last = `out ${this.#toolReport ?? 'no program'}, answer ${shown(answer, 24)}`;
      }
      if (agent === 'reasoner' && parseError !== null) this.#last = `out ${this.#toolReport ?? 'no program'}, no answer`;
    }
    this.#advance();
    return { teamReward, localReward, parseError, done: this.rounds.done, success: this.rounds.success, info };
  }

  #advance(): void {
    if (!this.rounds.pass()) return;
    this.#toolAnswer = null;
    this.#toolReport = null;
  }

  clone(): MathEnvironment {
    const copy = new MathEnvironment(this.seed, this.options, this.problem);
    copy.rounds = this.rounds.copy();
    copy.#toolAnswer = this.#toolAnswer;
    copy.#toolReport = this.#toolReport;
    copy.#last = this.#last;
    return copy;
  }

  /** The solver: the tier's program for a code-writing agent, the gold answer for a reasoner. */
  solution(agent: string): string {
    checkAgent(this, agent);
    if (this.rounds.done) throw new Error('math: no solution once the episode is over');
    return this.#writesCode(agent) ? this.problem.program : this.problem.answer;
  }
}

export const math = {
  description: 'Math problems in tiers (add, mul, mod, linear, count): a tool agent writes a Python program that runs in the sandbox, a reasoner answers from its output.',
  optionsSchema: mathOptionsSchema,
  runsCode: true,
  create(seed: number, options?: unknown): MathEnvironment {
    checkSeed(seed, 'math');
    return new MathEnvironment(seed, parseOptions(mathOptionsSchema, options, 'math'));
  },
} satisfies EnvironmentFactory<MathOptions>;
