/**
 * Chat prompts for the grid puzzles' workflow (puzzle-environment.ts): the tool agent proposes,
 * the environment tries the proposal on a copy and reports, the plan agent commits; or one solo
 * agent commits directly. The wording follows the reference's stateful prompts (pettingllms.md
 * 3.1): the task and its rules, the agent's part in the team, the state, then reasoning and a
 * final `####` line. The reference's tool agent wrote Python that printed `**Actions List**: [...]`;
 * Troupe runs no model-written code, so the tool answers its list directly (that line is accepted).
 */
import type { Parsed } from '../action-text.ts';
import type { Environment } from '../environment.ts';
import { acceptAnswer, PuzzleEnvironment } from '../puzzle-environment.ts';
import { finalAnswer } from './chat-answer.ts';
import { stateLines, type ChatPrompter } from './chat-environment.ts';

/** What differs between the puzzles. */
export interface PuzzleChatSpec {
  /** One sentence: the task, e.g. "walk the player P to the goal G on a grid with walls". */
  readonly task: string;
  /** The rules and the state notation, as lines. */
  readonly rules: readonly string[];
  /** How the tool's report line reads, e.g. "tool: <moves>: <n> from G, <k> blocked, goal yes|no". */
  readonly report: string;
  /** What the report's numbers mean. */
  readonly reportMeaning: string;
  /** The answer format sentence and an example answer line. */
  readonly answer: string;
  readonly example: string;
  /** What the user message asks for. */
  readonly request: { readonly tool: string; readonly plan: string; readonly solo: string };
  /** The final answer's payload → the environment's action text. */
  toAction(payload: string, observation: string): Parsed<string>;
  /** The environment's action text → the answer line. */
  formatAnswer(action: string): string;
}

function role(spec: PuzzleChatSpec, agent: string): string[] {
  if (agent === 'tool') {
    return [
      `You are the tool agent of a two-agent team that must ${spec.task}.`,
      'Each round you propose an answer first. The environment tries your proposal on a copy of the puzzle and reports the result to the plan agent, who then commits the answer that is really applied.',
    ];
  }
  if (agent === 'plan') {
    return [
      `You are the plan agent of a two-agent team that must ${spec.task}.`,
      'Each round the tool agent proposes an answer first and the environment reports what it would do on a copy of the puzzle; you then commit the answer that is really applied. Use the proposal when the report shows it solves the puzzle; otherwise do better.',
    ];
  }
  return [`You must ${spec.task}. Your answer is applied to the puzzle directly.`];
}

/** Whether the planner may answer `accept` (`planAccepts`). */
const accepts = (env: Environment): boolean => env instanceof PuzzleEnvironment && env.planAccepts;

/** The chat prompter of a puzzle, from its spec. */
export function puzzleChatPrompter(spec: PuzzleChatSpec): ChatPrompter {
  return {
    system: (env: Environment, agent: string) =>
      [
        ...role(spec, agent),
        '',
        ...spec.rules,
        ...(env.agents.includes('tool') ? [`The tool's report reads "${spec.report}": ${spec.reportMeaning}.`] : []),
        ...(agent === 'plan' && accepts(env) ? [`To commit the tool's proposal exactly as it stands, you may answer "#### ${acceptAnswer}" instead of writing it out again.`] : []),
        ...(env instanceof PuzzleEnvironment && env.reportToTool ? [`A line "last tool: ..." is the report of the tool's proposal in the previous round.`] : []),
        `You have ${env.maxTurns} rounds; the first line of the state says which round it is.`,
        '',
        `${spec.answer} Think step by step, then write your final answer on the last line as #### followed by the answer, for example:`,
        spec.example,
      ].join('\n'),
    user: (_env: Environment, agent: string, observation: string) => {
      const request = agent === 'tool' ? spec.request.tool : agent === 'plan' ? spec.request.plan : spec.request.solo;
      return `The current state:\n\n${stateLines(observation, agent)}\n\n${request} Reason briefly, then end with the line "#### <answer>".`;
    },
    toAction: (env: Environment, agent: string, response: string, observation: string) => {
      const payload = finalAnswer(response, { actionsList: agent === 'tool' });
      if (!payload.ok) return payload;
      if (agent === 'plan' && accepts(env) && payload.action.toLowerCase() === acceptAnswer) return { ok: true, action: acceptAnswer };
      return spec.toAction(payload.action, observation);
    },
    formatAnswer: (env: Environment, agent: string, action: string) =>
      agent === 'plan' && accepts(env) && action === acceptAnswer ? `#### ${acceptAnswer}` : spec.formatAnswer(action),
  };
}
