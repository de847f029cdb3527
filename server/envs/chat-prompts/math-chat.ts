/**
 * The math environment in the chat format, for instruction-tuned models, after the reference's
 * prompts (PettingLLMs' `math_env`): the tool agent is asked for a Python program in a ```python block
 * that prints the final answer; the reasoner is asked to think step by step and put its final answer
 * in \boxed{} (a `####` line is read too). Answers are read with `extractAnswer` (answer-check.ts).
 */
import type { Environment } from '../environment.ts';
import { extractAnswer } from '../math/answer-check.ts';
import { MathEnvironment } from '../math/math-env.ts';
import { lastPythonBlock } from './chat-answer.ts';
import type { ChatPrompter } from './chat-environment.ts';

function problemOf(env: Environment): MathEnvironment {
  if (!(env instanceof MathEnvironment)) throw new Error(`math chat prompts wrap the math environment, got '${env.name}'`);
  return env;
}

const writesCode = (env: MathEnvironment, agent: string): boolean => agent === 'tool' || (agent === 'solo' && env.options.variant === 'single-tool');

export const mathChat: ChatPrompter = {
  system(env, agent) {
    const m = problemOf(env);
    if (writesCode(m, agent)) {
      return [
        'You solve math problems by writing Python code.',
        agent === 'tool' ? 'A reasoning agent will read what your program prints and give the final answer.' : 'What your program prints last is your final answer.',
        'Write a complete Python 3 program that computes the answer and prints it on the last line. The program runs with no network and no input, for a few seconds at most.',
        'Format your response as:\n**Code:**\n```python\n# your code\n```',
      ].join('\n');
    }
    return [
      'You solve math problems.',
      agent === 'reasoner' ? 'A tool agent wrote a Python program for the problem; you see what it printed. Check it against your own reasoning.' : '',
      'Think step by step, then give the final answer in \\boxed{}.',
    ]
      .filter((l) => l !== '')
      .join('\n');
  },
  user(env, agent, observation) {
    const m = problemOf(env);
    const lines = [`Problem: ${m.problem.words}`];
    const out = /^out: (.*)$/m.exec(observation)?.[1];
    if (agent === 'reasoner' && out !== undefined) lines.push(`The tool agent's program printed: ${out}`);
    const last = /^last: (.*)$/m.exec(observation)?.[1];
    if (agent === 'tool' && last !== undefined) lines.push(`Last round: ${last}. The reasoner did not agree with your program's output; check your code and write it again.`);
    lines.push(writesCode(m, agent) ? 'Write the program.' : 'Give the final answer in \\boxed{}.');
    return lines.join('\n');
  },
  toAction(env, agent, response) {
    if (writesCode(problemOf(env), agent)) return lastPythonBlock(response);
    const answer = extractAnswer(response);
    return answer === null ? { ok: false, error: 'no final answer in \\boxed{} or on a #### line' } : { ok: true, action: answer };
  },
  formatAnswer(env, agent, action) {
    if (writesCode(problemOf(env), agent)) return `**Code:**\n\`\`\`python\n${action}\n\`\`\``;
    return `The answer is \\boxed{${action}}.`;
  },
};
