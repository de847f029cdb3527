/**
 * The code environment (PettingLLMs' `code_env`): a coder writes a Python program for a stdin/stdout
 * task, a tester writes one test for it, and both really run in the sandbox. Each round the coder
 * acts first, then the tester; the episode ends when the coder's program passes the tester's test
 * (the two are "aligned"), or after `maxTurns` rounds.
 *
 * Variants (the `variant` option):
 *  - 'team' (agents ['coder', 'tester']).
 *  - 'single' (['coder']): the coder alone (L0): one round, its program scored on the hidden tests.
 *
 * Terse prompts (the embedded character-level model's), e.g. for the coder in round 2:
 *   task: read a b, print a*b
 *   last: in 3 4, want 12, got 7
 *   coder: python
 * The coder's response is the whole program (it reads stdin and prints). The tester's prompt ends
 * in `tester: test` and its response is one test, `<input> -> <expected output>` (`3 4 -> 12`): the
 * input is everything before the last `->` (it may span lines; it is fed to stdin with a final
 * newline), the expected output everything after. The `last:` line (from round 2, both agents)
 * shows the previous round's mismatch: the tester's input and expected output and what the coder's
 * program printed (or how it failed), each reduced to printable ASCII and cut short, so no raw
 * model or program text reaches a prompt unchecked. The tester never sees the coder's program.
 *
 * Programs run per act (`programs`), in this order:
 *  - coder: its program on each of the first `MAX_HIDDEN_TESTS` (4) hidden tests;
 *  - tester: the task's reference solution on the tester's input (the check the reference forgot:
 *    its `golden_code` was never set, so its tester's reward was always 0), then, when the coder
 *    wrote a program this round, that program on the tester's input.
 * Outputs compare whitespace-normalised (`" ".join(x.split())`, code-tasks.ts `normaliseOutput`).
 *
 * Rewards, per act (the reference's HEAD, PettingLLMs' per-environment rewards, with the golden check restored):
 *  - coder: local = team = p, the fraction of hidden tests its program passes (a crash, timeout or
 *    too much output fails that test). With alpha = 1 that is the reference's 2p. A response with
 *    no program is a parse error: local -1, team 0.
 *  - tester: team 0; local +1 when its expected output equals the reference solution's output on its
 *    input, 0 when it differs, -1 when the test does not parse or the reference solution cannot run
 *    on its input (an input the task does not admit is no test). The reference also added the
 *    coder's pass ratio to the tester as a global reward; every branch of a tester's AT-GRPO group
 *    shares the coder's program, so that term is a constant within the group and moves no
 *    advantage: it is left out rather than counted twice in the team return.
 * `success`: the coder's latest program passes every hidden test it was run on.
 */
import { z } from 'zod';
import type { Execution, ProgramRequest } from '../../protocol/trajectory.ts';
import type { Parsed } from '../action-text.ts';
import { exceptionName } from '../program-acts.ts';
import { checkActor, checkAgent, checkSeed, parseOptions, roundReward, type AgentTurnResult, type Environment, type EnvironmentFactory } from '../environment.ts';
import { RoundRobinEnvironment } from '../round-robin.ts';
import { codeTiers, generateCodeTask, MAX_HIDDEN_TESTS, normaliseOutput, type CodeTask, type CodeTest } from './code-tasks.ts';

export const codeVariants = ['team', 'single'] as const;
export type CodeVariant = (typeof codeVariants)[number];

/** The tester's rewards (see the header); the coder's is its pass ratio, or `failed`. */
export const codeRewards = { agrees: 1, disagrees: 0, failed: -1 } as const;

/** Longest program a coder may write, in characters (the math tool's limit). */
export const MAX_PROGRAM_CHARS = 4000;
/** Longest test a tester may write, in characters. */
export const MAX_TEST_CHARS = 1000;
/** Longest piece of a test or an output shown in a `last:` line. */
const MAX_SHOWN = 24;

export const codeOptionsSchema = z
  .object({
    /** Task tiers to draw from, each equally likely. */
    tiers: z
      .array(z.enum(codeTiers))
      .min(1)
      .max(codeTiers.length)
      .default(['pair'])
      .describe('Task tiers drawn from, each equally likely: pair (two integers: a+b, a*b, max...), list (integers on a line: sum, max, count of evens...), string (a word: reversed, upper case, length...), loop (n: 1+..+n, n!, Fibonacci...), cond (n: even/odd, FizzBuzz, prime...).'),
    /** Rounds before the episode ends without alignment. */
    maxTurns: z.int().min(1).max(8).default(2).describe("Team variant: rounds before the episode ends without the coder's program passing the tester's test."),
    /** team or single. */
    variant: z.enum(codeVariants).default('team').describe("'team' (a coder writes the program, a tester writes a test; both run in the sandbox) or 'single' (the coder alone, one round)."),
  })
  .strict();
export type CodeOptions = z.output<typeof codeOptionsSchema>;

const agentsOf: Record<CodeVariant, readonly string[]> = { team: ['coder', 'tester'], single: ['coder'] };

/** Printable ASCII only (line breaks as `|`), cut to `max` characters: what may enter a prompt. */
function shown(text: string, max = MAX_SHOWN): string {
  const clean = text.replace(/\r?\n/g, '|').replace(/[^\x20-\x7e]/g, '?');
  return clean.length > max ? `${clean.slice(0, max)}...` : clean;
}

/** The coder's program: the whole response, trimmed. */
export function parseProgram(text: string): Parsed<string> {
  const code = typeof text === 'string' ? text.trim() : '';
  if (code === '') return { ok: false, error: 'empty program' };
  if (code.length > MAX_PROGRAM_CHARS) return { ok: false, error: `program longer than ${MAX_PROGRAM_CHARS} characters` };
  if (code.includes('\0')) return { ok: false, error: 'program contains a NUL character' };
  return { ok: true, action: code };
}

/** The tester's test `<input> -> <output>`: split at the last `->`, both sides trimmed and non-empty. */
export function parseTest(text: string): Parsed<CodeTest> {
  const t = typeof text === 'string' ? text.trim() : '';
  if (t === '') return { ok: false, error: 'empty test' };
  if (t.length > MAX_TEST_CHARS) return { ok: false, error: `test longer than ${MAX_TEST_CHARS} characters` };
  if (t.includes('\0')) return { ok: false, error: 'test contains a NUL character' };
  const at = t.lastIndexOf('->');
  if (at < 0) return { ok: false, error: "no '->' between the test's input and its expected output" };
  const input = t.slice(0, at).trim();
  const output = t.slice(at + 2).trim();
  if (input === '') return { ok: false, error: 'the test has no input before ->' };
  if (output === '') return { ok: false, error: 'the test has no expected output after ->' };
  return { ok: true, action: { input, output } };
}

/** A test as the tester writes it. */
export function formatTest(test: CodeTest): string {
  return `${test.input} -> ${test.output}`;
}

const run = (code: string, input: string): ProgramRequest => ({ language: 'python', code, stdin: `${input}\n` });
const passes = (e: Execution, expected: string): boolean => e.status === 'ok' && normaliseOutput(e.stdout) === normaliseOutput(expected);

/** What a run printed, or how it failed, as shown in a `last:` line. */
function outcome(e: Execution): string {
  if (e.status === 'ok') return normaliseOutput(e.stdout) === '' ? 'nothing' : shown(normaliseOutput(e.stdout));
  if (e.status === 'error') return `error${exceptionName(e.stderr) ? ` ${exceptionName(e.stderr)}` : ''}`;
  return e.status;
}

export class CodeEnvironment extends RoundRobinEnvironment implements Environment {
  readonly name = 'code';
  readonly seed: number;
  readonly optimalMoves = null;
  readonly options: CodeOptions;
  readonly task: CodeTask;
  #program: string | null = null; // this round's program, which the tester's test runs against
  #last: string | null = null; // the previous round's mismatch, for both agents

  /** `task` replaces the generated one (a dataset task); it is not copied, so it must not change. */
  constructor(seed: number, options: CodeOptions, task?: CodeTask) {
    super(agentsOf[options.variant], options.variant === 'team' ? options.maxTurns : 1);
    this.seed = seed;
    this.options = Object.freeze({ ...options, tiers: [...options.tiers] });
    this.task = task ?? generateCodeTask(seed, options.tiers);
    if (this.task.tests.length === 0) throw new Error(`code: task ${this.task.source} has no hidden tests`);
  }

  /** The hidden tests a coder's program runs on. */
  get hiddenTests(): readonly CodeTest[] {
    return this.task.tests.slice(0, MAX_HIDDEN_TESTS);
  }

  observe(agent: string): string {
    checkAgent(this, agent);
    const lines = [`task: ${this.task.statement}`];
    if (this.#last !== null) lines.push(`last: ${this.#last}`);
    lines.push(agent === 'coder' ? 'coder: python' : 'tester: test');
    return `${lines.join('\n')}\n`;
  }

  programs(agent: string, text: string): ProgramRequest[] {
    checkAgent(this, agent);
    if (agent === 'coder') {
      const p = parseProgram(text);
      return p.ok ? this.hiddenTests.map((t) => run(p.action, t.input)) : [];
    }
    const t = parseTest(text);
    if (!t.ok) return [];
    return [run(this.task.program, t.action.input), ...(this.#program === null ? [] : [run(this.#program, t.action.input)])];
  }

  act(agent: string, text: string, executions: readonly Execution[] = []): AgentTurnResult {
    checkActor(this, agent);
    this.rounds.stats[agent]!.acts++;
    const r = agent === 'coder' ? this.#actCoder(text, executions) : this.#actTester(text, executions);
    this.#advance();
    return { ...r, teamReward: roundReward(r.teamReward), localReward: roundReward(r.localReward), done: this.rounds.done, success: this.rounds.success };
  }

  #actCoder(text: string, executions: readonly Execution[]): Omit<AgentTurnResult, 'done' | 'success'> {
    const stats = this.rounds.stats['coder']!;
    const p = parseProgram(text);
    this.#program = p.ok ? p.action : null;
    if (!p.ok) {
      stats.parseErrors++;
      this.rounds.success = false;
      return { teamReward: 0, localReward: codeRewards.failed, parseError: p.error, info: `parse error: ${p.error}` };
    }
    const tests = this.hiddenTests;
    if (executions.length !== tests.length) throw new Error(`code: the coder wrote a program but act got ${executions.length} executions for its ${tests.length} tests (run programs() first)`);
    const passed = tests.filter((t, i) => passes(executions[i]!, t.output)).length;
    const failedRun = executions.find((e) => e.status !== 'ok');
    if (failedRun) stats.invalidMoves++;
    const ratio = passed / tests.length;
    this.rounds.success = passed === tests.length;
    if (this.options.variant === 'single') this.rounds.done = true;
    return { teamReward: ratio, localReward: ratio, parseError: null, info: `passed ${passed}/${tests.length} hidden tests${failedRun ? ` (a run ended: ${outcome(failedRun)})` : ''}` };
  }

  #actTester(text: string, executions: readonly Execution[]): Omit<AgentTurnResult, 'done' | 'success'> {
    const stats = this.rounds.stats['tester']!;
    const t = parseTest(text);
    if (!t.ok) {
      stats.parseErrors++;
      this.#last = 'no test';
      return { teamReward: 0, localReward: codeRewards.failed, parseError: t.error, info: `parse error: ${t.error}` };
    }
    const wanted = 1 + (this.#program === null ? 0 : 1);
    if (executions.length !== wanted) throw new Error(`code: the tester wrote a test but act got ${executions.length} executions for its ${wanted} runs (run programs() first)`);
    const test = t.action;
    const reference = executions[0]!;
    const coder = this.#program === null ? null : executions[1]!;
    let localReward: number;
    let verdict: string;
    if (reference.status !== 'ok') {
      // The reference solution is right by definition: an input it cannot handle is not a valid test.
      stats.invalidMoves++;
      localReward = codeRewards.failed;
      verdict = `the reference solution failed on the input (${outcome(reference)})`;
    } else {
      const agrees = normaliseOutput(reference.stdout) === normaliseOutput(test.output);
      localReward = agrees ? codeRewards.agrees : codeRewards.disagrees;
      verdict = agrees ? 'agrees with the reference' : 'disagrees with the reference';
    }
    const aligned = coder !== null && passes(coder, test.output);
    if (aligned) this.rounds.done = true;
    this.#last = `in ${shown(test.input)}, want ${shown(test.output)}, got ${coder === null ? 'no program' : outcome(coder)}`;
    return { teamReward: 0, localReward, parseError: null, info: `test ${verdict}; the program ${aligned ? 'passes' : 'fails'} it` };
  }

  #advance(): void {
    if (this.rounds.pass()) this.#program = null;
  }

  clone(): CodeEnvironment {
    const copy = new CodeEnvironment(this.seed, this.options, this.task);
    copy.rounds = this.rounds.copy();
    copy.#program = this.#program;
    copy.#last = this.#last;
    return copy;
  }

  /** The solver: the reference solution for the coder, the task's probe test for the tester. */
  solution(agent: string): string {
    checkAgent(this, agent);
    if (this.rounds.done) throw new Error('code: no solution once the episode is over');
    return agent === 'coder' ? this.task.program : formatTest(this.task.probe);
  }

  /** A wrong program for the same input format (the coder only), so a warm start shows a mismatch round. */
  flawedSolution(agent: string, variant: number): string | null {
    checkAgent(this, agent);
    if (this.rounds.done) throw new Error('code: no solution once the episode is over');
    if (agent !== 'coder' || this.task.flawed.length === 0) return null;
    return this.task.flawed[Math.abs(variant) % this.task.flawed.length]!;
  }
}

export const code = {
  description: 'Programming tasks in tiers (pair, list, string, loop, cond): a coder writes a Python program and a tester writes a test; both run in the sandbox against hidden tests and a reference solution.',
  optionsSchema: codeOptionsSchema,
  runsCode: true,
  create(seed: number, options?: unknown): CodeEnvironment {
    checkSeed(seed, 'code');
    return new CodeEnvironment(seed, parseOptions(codeOptionsSchema, options, 'code'));
  },
} satisfies EnvironmentFactory<CodeOptions>;
