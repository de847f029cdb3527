/**
 * Acting with programs: the one way callers apply a response whose act runs code. The environment
 * names the programs (`Environment.programs`), a `ProgramRunner` runs them (the sandbox pool, in
 * `server/sandbox/`), and `act` reads the executions. Environments that never run code act
 * directly, with no runner needed.
 */
import type { Execution, ProgramRequest } from '../protocol/trajectory.ts';
import type { AgentTurnResult, Environment } from './environment.ts';

/** Runs programs (concurrently where it can) and returns one execution per request, in order. */
export type ProgramRunner = (requests: readonly ProgramRequest[]) => Promise<Execution[]>;

/** An act's result and the executions it was scored with ([] when it ran no code). */
export interface ProgramAct {
  readonly result: AgentTurnResult;
  readonly executions: readonly Execution[];
}

/** Whether this kind of environment ever runs code in its acts. */
export function runsPrograms(env: Environment): boolean {
  return typeof env.programs === 'function';
}

/** The programs `agent`'s `text` asks to run in `env` ([] for environments that run none). */
export function programsOf(env: Environment, agent: string, text: string): ProgramRequest[] {
  return env.programs ? env.programs(agent, text) : [];
}

/** Thrown when an act needs programs run and the caller has no runner: a wiring bug, not a model error. */
export class NoProgramRunnerError extends Error {
  constructor(env: Environment, agent: string) {
    super(`${env.name}: agent '${agent}' wrote code to run, but this caller has no sandbox to run it in`);
    this.name = 'NoProgramRunnerError';
  }
}

/** Runs the programs of `agent`'s `text` with `run`, then applies the act with their executions. */
export async function actWithPrograms(env: Environment, agent: string, text: string, run: ProgramRunner | undefined): Promise<ProgramAct> {
  const requests = programsOf(env, agent, text);
  if (requests.length === 0) return { result: env.act(agent, text), executions: [] };
  if (!run) throw new NoProgramRunnerError(env, agent);
  const executions = await run(requests);
  return { result: env.act(agent, text, executions), executions };
}

/**
 * Applies many acts at once: every act's programs go to `run` in one call (so a pool runs the
 * branches and environments of a step together), then each act is applied with its own slice.
 */
export async function actAllWithPrograms(
  acts: readonly { readonly env: Environment; readonly agent: string; readonly text: string }[],
  run: ProgramRunner | undefined,
): Promise<ProgramAct[]> {
  const requests = acts.map((a) => programsOf(a.env, a.agent, a.text));
  const all = requests.flat();
  if (all.length > 0 && !run) {
    const first = acts[requests.findIndex((r) => r.length > 0)]!;
    throw new NoProgramRunnerError(first.env, first.agent);
  }
  const executions = all.length > 0 ? await run!(all) : [];
  if (executions.length !== all.length) throw new Error(`program runner returned ${executions.length} executions for ${all.length} programs`);
  let at = 0;
  return acts.map((a, i) => {
    const mine = executions.slice(at, at + requests[i]!.length);
    at += requests[i]!.length;
    return { result: mine.length > 0 ? a.env.act(a.agent, a.text, mine) : a.env.act(a.agent, a.text), executions: mine };
  });
}

/**
 * The name of the Python exception a failed run ended with (`ZeroDivisionError`), when the last
 * line of its stderr starts with one: an identifier, so it is safe to show in a prompt or an
 * error; the rest of stderr is not.
 */
export function exceptionName(stderr: string): string | null {
  const last = stderr.split('\n').map((l) => l.trim()).filter((l) => l !== '').at(-1) ?? '';
  const m = /^([A-Za-z_][A-Za-z0-9_.]{0,60}(?:Error|Exception|Exit|Interrupt))\b/.exec(last);
  return m ? m[1]! : null;
}
