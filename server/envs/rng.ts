/**
 * The environments' only source of randomness: a seeded 32-bit generator (mulberry32), so a
 * puzzle is a pure function of (environment, seed, options) on every platform. Math.random is
 * never used here: it cannot be seeded, and a puzzle that changes between runs cannot be
 * validated, compared or replayed.
 */

/** splitmix32-style finaliser: a bijective avalanche on 32 bits. */
function mix32(x: number): number {
  x = (x ^ (x >>> 16)) >>> 0;
  x = Math.imul(x, 0x21f0aaad);
  x = (x ^ (x >>> 15)) >>> 0;
  x = Math.imul(x, 0x735a2d97);
  return (x ^ (x >>> 15)) >>> 0;
}

/** Hashes (seed, salt) to a 32-bit state; the salt keeps two environments with one seed apart. */
function seedState(seed: number, salt: string): number {
  if (!Number.isSafeInteger(seed)) throw new RangeError(`seed must be a safe integer, got ${String(seed)}`);
  let h = mix32((seed >>> 0) ^ mix32(Math.floor(seed / 4294967296) >>> 0 ^ 0x9e3779b9));
  // FNV-1a over the salt's code units, then a final avalanche.
  for (let i = 0; i < salt.length; i++) h = Math.imul(h ^ salt.charCodeAt(i), 0x01000193);
  return mix32(h);
}

/** A seeded stream of pseudo-random numbers (not cryptographic). */
export class Rng {
  #state: number;

  /** `salt` names the stream, e.g. the environment's name. */
  constructor(seed: number, salt = '') {
    this.#state = seedState(seed, salt);
  }

  /** Uniform integer in [0, 2^32). */
  nextUint32(): number {
    this.#state = (this.#state + 0x6d2b79f5) | 0;
    let t = Math.imul(this.#state ^ (this.#state >>> 15), 1 | this.#state);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return (t ^ (t >>> 14)) >>> 0;
  }

  /** Uniform float in [0, 1). */
  float(): number {
    return this.nextUint32() / 4294967296;
  }

  /** Uniform integer in [0, n); n must be a positive integer. */
  int(n: number): number {
    if (!Number.isInteger(n) || n <= 0) throw new RangeError(`Rng.int: n must be a positive integer, got ${n}`);
    return Math.floor(this.float() * n);
  }

  /** True with probability p. */
  chance(p: number): boolean {
    return this.float() < p;
  }

  /** A uniformly chosen element; the list must not be empty. */
  pick<T>(items: readonly T[]): T {
    if (items.length === 0) throw new RangeError('Rng.pick: empty list');
    return items[this.int(items.length)] as T;
  }

  /** Fisher-Yates shuffle, in place; returns the same array. */
  shuffle<T>(items: T[]): T[] {
    for (let i = items.length - 1; i > 0; i--) {
      const j = this.int(i + 1);
      const a = items[i] as T;
      items[i] = items[j] as T;
      items[j] = a;
    }
    return items;
  }

  /** An independent generator that continues from this one's current state. */
  clone(): Rng {
    const copy = new Rng(0);
    copy.#state = this.#state;
    return copy;
  }
}
