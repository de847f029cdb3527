/**
 * Procedurally generated stdin/stdout programming tasks for the code environment, in tiers from
 * easy to hard, each with hidden tests and a reference solution in Python (PettingLLMs' `code_env` uses
 * APPS / CodeContests / LiveCodeBench; these stand in for them at a size the embedded ~1M-parameter
 * character model can learn: a one-line statement, a program of two to five short lines).
 *
 * A task's expected outputs are computed here in TypeScript by the template's `solve`, never by
 * running the Python reference: a test (code-env.test.ts) runs every tier's Python reference on its
 * own hidden tests in the sandbox, so the two implementations check each other.
 *
 * Tiers (every input is one line; what varies per seed is the template and its constant k or c):
 *  - pair:   two integers `a b`        a+b, a*b, a-b, max, min, a+b+k, a*k+b
 *  - list:   integers on a line        sum, max, min, count of evens, count > k, last - first
 *  - string: a lowercase word          reversed, upper case, length, count of c, doubled, first*k
 *  - loop:   an integer n              1+..+n, n!, 1..n, sum of squares, n-th Fibonacci
 *  - cond:   an integer n or a list    even/odd, sign, FizzBuzz, prime yes/no, values > k or none
 * Statements, inputs and outputs are printable ASCII.
 */
import { Rng } from '../rng.ts';

export const codeTiers = ['pair', 'list', 'string', 'loop', 'cond'] as const;
export type CodeTier = (typeof codeTiers)[number];

/** One test: the program's standard input (without the final newline) and its expected output. */
export interface CodeTest {
  readonly input: string;
  readonly output: string;
}

/** A task: what the agents are told, how it is checked, and the solver's answers. */
export interface CodeTask {
  /** Where it came from: a tier name, or `<file>:<line>` for a dataset task. */
  readonly source: string;
  /** The terse one-line statement, e.g. `read a b, print a*b` (printable ASCII). */
  readonly statement: string;
  /** The statement as prose, for chat prompts. */
  readonly words: string;
  /** The hidden tests the coder's program is scored on (at most `MAX_HIDDEN_TESTS` are run). */
  readonly tests: readonly CodeTest[];
  /** The reference solution (Python, reads stdin): the solver's program and the tester's judge. */
  readonly program: string;
  /** The solver's test for the tester: an input that is not one of the hidden ones, and its output. */
  readonly probe: CodeTest;
  /** Wrong programs for the same input format, for warm-start demonstrations of a mismatch. */
  readonly flawed: readonly string[];
}

/** One task shape with its constants fixed. */
interface Template {
  readonly statement: string;
  readonly words: string;
  readonly program: string;
  readonly input: (rng: Rng) => string;
  readonly solve: (input: string) => string;
}

const ints = (s: string): number[] => s.trim().split(/\s+/).map(Number);
const between = (rng: Rng, lo: number, hi: number): number => lo + rng.int(hi - lo + 1);
/** Mostly small non-negative numbers, sometimes negative: a program that ignores the sign fails. */
const smallInt = (rng: Rng): number => (rng.chance(0.15) ? -between(rng, 1, 99) : between(rng, 0, 99));
const pairInput = (rng: Rng): string => `${smallInt(rng)} ${smallInt(rng)}`;
const listInput = (rng: Rng): string => Array.from({ length: between(rng, 1, 6) }, () => smallInt(rng)).join(' ');
const letters = 'abcdefgh';
const wordInput = (rng: Rng): string => Array.from({ length: between(rng, 1, 8) }, () => letters[rng.int(letters.length)]!).join('');
const readPair = 'a,b=map(int,input().split())\n';
const readList = 'x=list(map(int,input().split()))\n';
const readN = 'n=int(input())\n';

function pairOp(expr: string, words: string, f: (a: number, b: number) => number): Template {
  return { statement: `read a b, print ${expr}`, words: `Read two integers a and b from one line and print ${words}.`, program: `${readPair}print(${expr})`, input: pairInput, solve: (s) => String(f(...(ints(s) as [number, number]))) };
}
function listOp(what: string, line: string, f: (x: number[]) => number): Template {
  return { statement: `read numbers, print ${what}`, words: `Read integers from one line and print ${what}.`, program: `${readList}print(${line})`, input: listInput, solve: (s) => String(f(ints(s))) };
}
function wordOp(what: string, line: string, f: (w: string) => string): Template {
  return { statement: `read a word, print ${what}`, words: `Read a word of lowercase letters and print ${what}.`, program: `print(${line})`, input: wordInput, solve: f };
}
function nOp(what: string, body: string, lo: number, hi: number, f: (n: number) => string): Template {
  return { statement: `read n, print ${what}`, words: `Read an integer n and print ${what}.`, program: `${readN}${body}`, input: (rng) => String(between(rng, lo, hi)), solve: (s) => f(Number(s.trim())) };
}

const sum = (x: number[]): number => x.reduce((a, b) => a + b, 0);
const range = (lo: number, hi: number): number[] => Array.from({ length: Math.max(0, hi - lo + 1) }, (_, i) => lo + i);
function isPrime(n: number): boolean {
  if (n < 2) return false;
  for (let d = 2; d * d <= n; d++) if (n % d === 0) return false;
  return true;
}

/** Each tier's templates; constants (k, c) are drawn from the task's generator. */
const tierTemplates: Record<CodeTier, (rng: Rng) => Template[]> = {
  pair(rng) {
    const k = between(rng, 2, 9);
    return [
      pairOp('a+b', 'a+b', (a, b) => a + b),
      pairOp('a*b', 'a*b', (a, b) => a * b),
      pairOp('a-b', 'a-b', (a, b) => a - b),
      pairOp('max(a,b)', 'the larger of a and b', Math.max),
      pairOp('min(a,b)', 'the smaller of a and b', Math.min),
      pairOp(`a+b+${k}`, `a+b+${k}`, (a, b) => a + b + k),
      pairOp(`a*${k}+b`, `a*${k}+b`, (a, b) => a * k + b),
    ];
  },
  list(rng) {
    const k = between(rng, 10, 80);
    return [
      listOp('their sum', 'sum(x)', sum),
      listOp('the largest', 'max(x)', (x) => Math.max(...x)),
      listOp('the smallest', 'min(x)', (x) => Math.min(...x)),
      listOp('how many are even', 'sum(v%2==0 for v in x)', (x) => x.filter((v) => v % 2 === 0).length),
      listOp(`how many are >${k}`, `sum(v>${k} for v in x)`, (x) => x.filter((v) => v > k).length),
      listOp('last minus first', 'x[-1]-x[0]', (x) => x.at(-1)! - x[0]!),
    ];
  },
  string(rng) {
    const c = letters[rng.int(letters.length)]!;
    const k = between(rng, 2, 5);
    return [
      wordOp('it reversed', 'input()[::-1]', (w) => [...w].reverse().join('')),
      wordOp('it in upper case', 'input().upper()', (w) => w.toUpperCase()),
      wordOp('its length', 'len(input())', (w) => String(w.length)),
      wordOp(`the count of ${c}`, `input().count('${c}')`, (w) => String([...w].filter((ch) => ch === c).length)),
      wordOp('it twice', 'input()*2', (w) => w + w),
      wordOp(`its first letter ${k} times`, `input()[0]*${k}`, (w) => w[0]!.repeat(k)),
    ];
  },
  loop() {
    return [
      nOp('1+2+..+n', 'print(sum(range(1,n+1)))', 1, 100, (n) => String(sum(range(1, n)))),
      nOp('n!', 'p=1\nfor i in range(2,n+1):\n    p*=i\nprint(p)', 1, 12, (n) => String(range(2, n).reduce((p, i) => p * i, 1))),
      nOp('1 to n', 'print(*range(1,n+1))', 1, 12, (n) => range(1, n).join(' ')),
      nOp('1*1+..+n*n', 'print(sum(i*i for i in range(1,n+1)))', 1, 50, (n) => String(sum(range(1, n).map((i) => i * i)))),
      nOp('fib(n)', 'a,b=0,1\nfor _ in range(n):\n    a,b=b,a+b\nprint(a)', 1, 30, (n) => {
        let [a, b] = [0, 1];
        for (let i = 0; i < n; i++) [a, b] = [b, a + b];
        return String(a);
      }),
    ];
  },
  cond(rng) {
    const k = between(rng, 10, 80);
    return [
      nOp('even or odd', "print('even' if n%2==0 else 'odd')", -50, 99, (n) => (n % 2 === 0 ? 'even' : 'odd')),
      nOp('pos, neg or zero', "if n>0:\n    print('pos')\nelif n<0:\n    print('neg')\nelse:\n    print('zero')", -9, 9, (n) => (n > 0 ? 'pos' : n < 0 ? 'neg' : 'zero')),
      nOp('fizzbuzz', "if n%15==0:\n    print('FizzBuzz')\nelif n%3==0:\n    print('Fizz')\nelif n%5==0:\n    print('Buzz')\nelse:\n    print(n)", 1, 100, (n) =>
        n % 15 === 0 ? 'FizzBuzz' : n % 3 === 0 ? 'Fizz' : n % 5 === 0 ? 'Buzz' : String(n)),
      nOp('yes if prime else no', "print('yes' if n>1 and all(n%d for d in range(2,n)) else 'no')", 1, 100, (n) => (isPrime(n) ? 'yes' : 'no')),
      {
        statement: `read numbers, print those >${k} or none`,
        words: `Read integers from one line and print, in order and separated by spaces, those greater than ${k}; print none if there are none.`,
        program: `${readList}y=[v for v in x if v>${k}]\nprint(*y) if y else print('none')`,
        input: listInput,
        solve: (s) => ints(s).filter((v) => v > k).join(' ') || 'none',
      },
    ];
  },
};

/** The most hidden tests a coder's program is run on (the reference keeps the first 4 for training). */
export const MAX_HIDDEN_TESTS = 4;

/** `count` distinct inputs from `input` (fewer only when the input space is that small). */
function distinctInputs(rng: Rng, input: (rng: Rng) => string, count: number, avoid: ReadonlySet<string> = new Set()): string[] {
  const seen = new Set<string>(avoid);
  const out: string[] = [];
  // Bounded: every input space here has more than `count` members, and 50 tries per slot is plenty.
  for (let tries = 0; out.length < count && tries < 50 * count; tries++) {
    const x = input(rng);
    if (!seen.has(x)) {
      seen.add(x);
      out.push(x);
    }
  }
  return out;
}

/** The task of `seed` in one of `tiers` (tier, template, constants and tests all come from the seed). */
export function generateCodeTask(seed: number, tiers: readonly CodeTier[]): CodeTask {
  if (tiers.length === 0) throw new Error('code: at least one tier is needed');
  const rng = new Rng(seed, 'code');
  const tier = tiers[rng.int(tiers.length)]!;
  const templates = tierTemplates[tier](rng);
  const index = rng.int(templates.length);
  const t = templates[index]!;
  const inputs = distinctInputs(rng, t.input, MAX_HIDDEN_TESTS);
  const [probe] = distinctInputs(rng, t.input, 1, new Set(inputs));
  const tests = inputs.map((input) => ({ input, output: t.solve(input) }));
  const probeInput = probe ?? inputs[0]!;
  // Same tier, same input format: another template's program is a plausible wrong answer.
  const flawed = templates.filter((_, i) => i !== index).map((o) => o.program);
  return { source: tier, statement: t.statement, words: t.words, tests, program: t.program, probe: { input: probeInput, output: t.solve(probeInput) }, flawed };
}

/** Output as compared: whitespace-separated tokens joined by single spaces (Python's `" ".join(x.split())`). */
export function normaliseOutput(text: string): string {
  return text.split(/\s+/).filter((t) => t !== '').join(' ');
}
