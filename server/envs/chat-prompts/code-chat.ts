/**
 * The code environment in the chat format, for instruction-tuned models, after the reference's
 * prompts (PettingLLMs' `code_env`): the coder is asked for a complete program that reads standard input
 * with input() and prints the answer, in a ```python block (`**Code:**`); the tester for one test
 * case as `**Test Input:**` and `**Test Output:**`, each a ``` block. Later rounds show the last
 * mismatch (the tester's input and expected output and what the program printed), taken from the
 * terse `last:` line, so it is already printable and cut short.
 *
 * The tester's blocks become the environment's `<input> -> <output>` test, split at the last `->`,
 * so an expected output containing `->` cannot be carried and is refused with a reason.
 */
import type { Parsed } from '../action-text.ts';
import type { Environment } from '../environment.ts';
import { CodeEnvironment, parseTest } from '../code/code-env.ts';
import { lastPythonBlock } from './chat-answer.ts';
import type { ChatPrompter } from './chat-environment.ts';

function codeEnvOf(env: Environment): CodeEnvironment {
  if (!(env instanceof CodeEnvironment)) throw new Error(`code chat prompts wrap the code environment, got '${env.name}'`);
  return env;
}

const fail = (error: string): { ok: false; error: string } => ({ ok: false, error });

/** The content of the ``` block after `label` (its last occurrence), or null. */
function blockAfter(response: string, label: RegExp): string | null {
  const matches = [...response.matchAll(new RegExp(`${label.source}[\\s*:]*\`\`\`[^\\n]*\\n([\\s\\S]*?)\`\`\``, 'gi'))];
  const body = matches.at(-1)?.[1];
  return body === undefined ? null : body.replace(/\s+$/, '');
}

/** The tester's `**Test Input:**` / `**Test Output:**` blocks as the environment's test text. */
export function readChatTest(response: string): Parsed<string> {
  let body = typeof response === 'string' ? response : '';
  const close = body.lastIndexOf('</think>');
  if (close >= 0) body = body.slice(close + '</think>'.length);
  const input = blockAfter(body, /\*{0,2}Test Input/);
  const output = blockAfter(body, /\*{0,2}Test Output/);
  if (input === null) return fail('no **Test Input:** ``` block');
  if (output === null) return fail('no **Test Output:** ``` block');
  if (output.includes('->')) return fail("the expected output contains '->', which this environment's tests cannot carry");
  const action = `${input.trim()}\n-> ${output.trim()}`;
  const parsed = parseTest(action);
  return parsed.ok ? { ok: true, action } : parsed;
}

const system = {
  coder: [
    'You are the coder of a two-agent team that solves a programming task: you write the program, a tester writes a test case for it, and both are run.',
    'Write a complete Python 3 program that reads the input from standard input with input() and prints the output. It runs with no network, for a few seconds at most, and is judged on hidden tests by comparing what it prints (whitespace-normalised).',
    'Format your response as:\n**Code:**\n```python\n# your code\n```',
  ],
  solo: [
    'You solve a programming task.',
    'Write a complete Python 3 program that reads the input from standard input with input() and prints the output. It runs with no network, for a few seconds at most, and is judged on hidden tests by comparing what it prints (whitespace-normalised).',
    'Format your response as:\n**Code:**\n```python\n# your code\n```',
  ],
  tester: [
    "You are the tester of a two-agent team that solves a programming task: a coder writes the program, you write one test case for it. Your test is run against the coder's program and checked against a correct solution, so the expected output must be exactly right.",
    'Write one test case: an input the task allows and the output a correct program prints for it.',
    'Format your response as:\n**Test Input:**\n```\ninput here\n```\n**Test Output:**\n```\noutput here\n```',
  ],
};

export const codeChat: ChatPrompter = {
  system(env, agent) {
    const c = codeEnvOf(env);
    const lines = agent === 'tester' ? system.tester : c.options.variant === 'single' ? system.solo : system.coder;
    return lines.join('\n');
  },
  user(env, agent, observation) {
    const c = codeEnvOf(env);
    const lines = [`Task: ${c.task.words}`];
    const last = /^last: (.*)$/m.exec(observation)?.[1];
    if (last !== undefined) {
      lines.push(
        last === 'no test'
          ? 'Last round the tester wrote no readable test.'
          : `Last round the tester's test and the program disagreed (${last}: the test's input, its expected output, and what the program printed).`,
      );
      lines.push(agent === 'tester' ? 'Check your expected output against the task; fix the test if it is wrong, or keep it if the program is.' : 'Find the bug and write the program again.');
    }
    lines.push(agent === 'tester' ? 'Write the test case.' : 'Write the program.');
    return lines.join('\n');
  },
  toAction(env, agent, response) {
    codeEnvOf(env);
    return agent === 'tester' ? readChatTest(response) : lastPythonBlock(typeof response === 'string' ? response : '');
  },
  formatAnswer(env, agent, action) {
    codeEnvOf(env);
    if (agent !== 'tester') return `**Code:**\n\`\`\`python\n${action}\n\`\`\``;
    const t = parseTest(action);
    if (!t.ok) throw new Error(`code chat: the solver's test does not parse: ${t.error}`);
    return `**Test Input:**\n\`\`\`\n${t.action.input}\n\`\`\`\n**Test Output:**\n\`\`\`\n${t.action.output}\n\`\`\``;
  },
};
