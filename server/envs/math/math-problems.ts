/**
 * Procedurally generated math problems for the math environment, in difficulty tiers, chosen so
 * that the answer is easy to compute with a one-line Python program and hard to compute "in the
 * head" of a small model: that gap is what gives a tool agent whose code runs a skill the reasoner
 * lacks (the paper's math setting, PettingLLMs' `math_env`).
 *
 * Operands are short on purpose: every digit the tool copies into its program and the reasoner
 * copies from the output is a chance to slip for a small model (measured: 4-digit x 3-digit
 * products left the warm-started team at 3% on 256 test seeds, and RL found no signal).
 *
 * Each problem carries its question twice (a terse line for the embedded character-level model, a
 * sentence for chat prompts), the gold answer as an integer string, and the solver's program: one
 * Python line that prints the answer. Answers are computed here with BigInt, exactly; a test runs
 * every tier's solver program in the sandbox and compares its output with the gold answer.
 *
 * Tiers, from easy to hard for the embedded model (the program gets longer and less literal):
 *  - add:    sum of two 4-digit numbers                    print(4821+3967)
 *  - mul:    a 3-digit times a 2-digit number              print(482*39)
 *  - mod:    a modular power                               print(pow(37,45,1009))
 *  - linear: the integer x solving a*x+b=c                 print((1685-342)//17)
 *  - count:  n in 1..N divisible by p or by q              print(sum(n%3==0 or n%7==0 for n in range(1,801)))
 * Text is printable ASCII.
 */
import { Rng } from '../rng.ts';

export const mathTiers = ['add', 'mul', 'mod', 'linear', 'count'] as const;
export type MathTier = (typeof mathTiers)[number];

export interface MathProblem {
  readonly tier: MathTier;
  /** The terse question, e.g. `4821*397` (shown after `Q: `). */
  readonly question: string;
  /** The question as a sentence, for chat prompts. */
  readonly words: string;
  /** The gold answer: a decimal integer. */
  readonly answer: string;
  /** The solver's program: one line of Python that prints the answer. */
  readonly program: string;
}

/** An integer with exactly `digits` digits. */
function digitsInt(rng: Rng, digits: number): number {
  const lo = 10 ** (digits - 1);
  return lo + rng.int(9 * lo);
}

/** b^e mod m by square and multiply, exactly. */
function powMod(b: bigint, e: bigint, m: bigint): bigint {
  let r = 1n;
  let x = b % m;
  for (let k = e; k > 0n; k >>= 1n) {
    if (k & 1n) r = (r * x) % m;
    x = (x * x) % m;
  }
  return r;
}

const smallPrimes = [1009, 1013, 1019, 1021, 1031, 1033, 1039, 1049, 1051, 1061, 1063, 1069, 1087, 1091, 1093, 1097];

const generators: Record<MathTier, (rng: Rng) => MathProblem> = {
  add(rng) {
    const a = digitsInt(rng, 4);
    const b = digitsInt(rng, 4);
    return { tier: 'add', question: `${a}+${b}`, words: `What is ${a} + ${b}?`, answer: String(a + b), program: `print(${a}+${b})` };
  },
  mul(rng) {
    const a = digitsInt(rng, 3);
    const b = digitsInt(rng, 2);
    return { tier: 'mul', question: `${a}*${b}`, words: `What is ${a} times ${b}?`, answer: String(BigInt(a) * BigInt(b)), program: `print(${a}*${b})` };
  },
  mod(rng) {
    const b = 2 + rng.int(98);
    const e = 10 + rng.int(90);
    const m = smallPrimes[rng.int(smallPrimes.length)]!;
    return {
      tier: 'mod',
      question: `${b}^${e} mod ${m}`,
      words: `What is the remainder when ${b} to the power ${e} is divided by ${m}?`,
      answer: String(powMod(BigInt(b), BigInt(e), BigInt(m))),
      program: `print(pow(${b},${e},${m}))`,
    };
  },
  linear(rng) {
    const a = 2 + rng.int(98);
    const x = 10 + rng.int(990);
    const b = 1 + rng.int(999);
    const c = a * x + b;
    return { tier: 'linear', question: `${a}x+${b}=${c}, x=?`, words: `Solve ${a}x + ${b} = ${c} for the integer x.`, answer: String(x), program: `print((${c}-${b})//${a})` };
  },
  count(rng) {
    const n = 100 * (2 + rng.int(19));
    const p = 2 + rng.int(10);
    let q = 2 + rng.int(10);
    if (q === p) q = p === 11 ? 3 : p + 1;
    let count = 0;
    for (let k = 1; k <= n; k++) if (k % p === 0 || k % q === 0) count++;
    return {
      tier: 'count',
      question: `count n in 1..${n}, n%${p}==0 or n%${q}==0`,
      words: `How many integers n with 1 <= n <= ${n} are divisible by ${p} or by ${q}?`,
      answer: String(count),
      program: `print(sum(n%${p}==0 or n%${q}==0 for n in range(1,${n + 1})))`,
    };
  },
};

/** The problem of `seed` in one of `tiers` (the tier is drawn from the seed too). */
export function generateProblem(seed: number, tiers: readonly MathTier[]): MathProblem {
  if (tiers.length === 0) throw new Error('math: at least one tier is needed');
  const rng = new Rng(seed, 'math');
  const tier = tiers[rng.int(tiers.length)]!;
  return generators[tier](rng);
}
