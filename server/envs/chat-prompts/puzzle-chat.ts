/**
 * Chat prompts for the grid puzzles' workflow (puzzle-environment.ts): the tool agent proposes,
 * the environment tries the proposal on a copy and reports, the plan agent commits; or one solo
 * agent commits directly. The wording follows the reference's stateful prompts (PettingLLMs'
 * `stateful_env`): the task and its rules, the agent's part in the team, the state, then reasoning and a
 * final `####` line. As the reference's tool agent does, the tool writes one Python program that
 * prints its proposal as `**Actions List**: [...]`; the program runs in the sandbox
 * (`programAgents`, chat-environment.ts) and its output is the proposal. The planner sees the
 * environment's report on that proposal, never the code or its raw output.
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
  /** What an answer is, e.g. "the list of moves to make, as a JSON list of letters". */
  readonly answer: string;
  /** An example answer (the payload after `#### ` or `**Actions List**: `), e.g. `["D","D","R"]`. */
  readonly example: string;
  /** What the user message asks for. */
  readonly request: { readonly tool: string; readonly plan: string; readonly solo: string };
  /** The final answer's payload → the environment's action text. */
  toAction(payload: string, observation: string): Parsed<string>;
  /** The environment's action text → the answer's payload (what follows `#### `). */
  formatPayload(action: string): string;
}

/** The line the tool's program prints last; the reference's `extract_actions_from_code_output` reads it. */
const actionsListLabel = '**Actions List**:';

function role(spec: PuzzleChatSpec, agent: string): string[] {
  if (agent === 'tool') {
    return [
      `You are the tool agent of a two-agent team that must ${spec.task}.`,
      'Each round you propose an answer first, by writing a Python program that computes it. The program runs, the environment tries what it printed on a copy of the puzzle and reports the result to the plan agent, who then commits the answer that is really applied.',
    ];
  }
  if (agent === 'plan') {
    return [
      `You are the plan agent of a two-agent team that must ${spec.task}.`,
      "Each round the tool agent proposes an answer first (a program it wrote computes it) and the environment reports what it would do on a copy of the puzzle; you then commit the answer that is really applied. Use the proposal when the report shows it solves the puzzle; otherwise do better.",
    ];
  }
  return [`You must ${spec.task}. Your answer is applied to the puzzle directly.`];
}

/** The answer format: the tool's program and its last printed line, or everyone else's `####` line. */
function answerFormat(spec: PuzzleChatSpec, agent: string): string[] {
  if (agent === 'tool') {
    return [
      `Your answer is ${spec.answer}. Write a complete Python 3 program that computes it from the state (write the state into the program) and prints it on its last line as ${actionsListLabel} followed by the list, for example:`,
      `${actionsListLabel} ${spec.example}`,
      'The program runs with no network and no input, for a few seconds at most; only what it prints counts. Format your response as:',
      '**Code:**\n```python\n# your code\n```',
    ];
  }
  return [`Your answer is ${spec.answer}. Think step by step, then write your final answer on the last line as #### followed by the answer, for example:`, `#### ${spec.example}`];
}

/** A Python string literal of `text` (printable ASCII): single-quoted, or JSON's escapes, which Python reads alike. */
function pythonString(text: string): string {
  return /['\\]/.test(text) ? JSON.stringify(text) : `'${text}'`;
}

/** The tool's answer for `payload`: a program that prints it as the actions list. */
export function actionsListProgram(payload: string): string {
  return `**Code:**\n\`\`\`python\nprint(${pythonString(`${actionsListLabel} ${payload}`)})\n\`\`\``;
}

/** Whether the planner may answer `accept` (`planAccepts`). */
const accepts = (env: Environment): boolean => env instanceof PuzzleEnvironment && env.planAccepts;

/** The chat prompter of a puzzle, from its spec. */
export function puzzleChatPrompter(spec: PuzzleChatSpec): ChatPrompter {
  return {
    programAgents: ['tool'],
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
        ...answerFormat(spec, agent),
      ].join('\n'),
    user: (_env: Environment, agent: string, observation: string) => {
      const request = agent === 'tool' ? spec.request.tool : agent === 'plan' ? spec.request.plan : spec.request.solo;
      const close = agent === 'tool' ? `Reason briefly, then write the program; its last printed line must be "${actionsListLabel} <list>".` : 'Reason briefly, then end with the line "#### <answer>".';
      return `The current state:\n\n${stateLines(observation, agent)}\n\n${request} ${close}`;
    },
    // For the tool this reads its program's output (ChatEnvironment runs the program first).
    toAction: (env: Environment, agent: string, response: string, observation: string) => {
      const payload = finalAnswer(response, { actionsList: agent === 'tool' });
      if (!payload.ok) return agent === 'tool' ? { ok: false, error: `no line '${actionsListLabel} [...]'` } : payload;
      if (agent === 'plan' && accepts(env) && payload.action.toLowerCase() === acceptAnswer) return { ok: true, action: acceptAnswer };
      return spec.toAction(payload.action, observation);
    },
    formatAnswer: (env: Environment, agent: string, action: string) => {
      if (agent === 'tool') return actionsListProgram(spec.formatPayload(action));
      return agent === 'plan' && accepts(env) && action === acceptAnswer ? `#### ${acceptAnswer}` : `#### ${spec.formatPayload(action)}`;
    },
  };
}
