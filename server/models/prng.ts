/**
 * Small seeded pseudo-random generators for reproducible initialisation.
 *
 * mulberry32 (Tommy Ettinger's 32-bit generator) is fast, passes the usual statistical batteries
 * well enough for weight initialisation, and is trivially portable, so the same seed gives the
 * same numbers on every platform. Normals use Box–Muller; V8's Math.log/sin/cos are fdlibm ports,
 * so they are deterministic too. This is not a cryptographic generator.
 */

const TWO_POW_32 = 4294967296;

/** A seeded stream of pseudo-random numbers. */
export interface Prng {
  /** Uniform integer in [0, 2^32). */
  nextUint32(): number;
  /** Uniform float in [0, 1), 32 bits of resolution. */
  nextFloat(): number;
  /** Standard normal sample N(0, 1) (Box–Muller; the second value of each pair is cached). */
  nextNormal(): number;
}

/** splitmix32-style finaliser: a bijective avalanche on 32 bits. */
export function mix32(x: number): number {
  x = (x ^ (x >>> 16)) >>> 0;
  x = Math.imul(x, 0x21f0aaad);
  x = (x ^ (x >>> 15)) >>> 0;
  x = Math.imul(x, 0x735a2d97);
  return (x ^ (x >>> 15)) >>> 0;
}

function checkSeed(seed: number): void {
  if (!Number.isSafeInteger(seed)) throw new RangeError(`seed must be a safe integer, got ${seed}`);
}

/** Folds a safe integer seed (up to 53 bits, negative allowed) into 32 bits without dropping the high bits. */
function foldSeed(seed: number): number {
  checkSeed(seed);
  const lo = seed >>> 0;
  const hi = Math.floor(seed / TWO_POW_32) >>> 0;
  return mix32(lo ^ mix32(hi ^ 0x9e3779b9));
}

/**
 * Derives an independent 32-bit seed for a named stream (e.g. one per parameter tensor), so a
 * tensor's values depend only on (seed, name) and not on which other tensors exist or their order.
 */
export function deriveSeed(seed: number, label: string): number {
  let h = foldSeed(seed);
  // FNV-1a over UTF-16 code units, then a final avalanche.
  for (let i = 0; i < label.length; i++) h = Math.imul(h ^ label.charCodeAt(i), 0x01000193);
  return mix32(h);
}

/** A mulberry32 generator seeded from any safe integer. */
export function createPrng(seed: number): Prng {
  let state = foldSeed(seed);
  let spare: number | undefined;
  const nextUint32 = (): number => {
    state = (state + 0x6d2b79f5) | 0;
    let t = Math.imul(state ^ (state >>> 15), 1 | state);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return (t ^ (t >>> 14)) >>> 0;
  };
  return {
    nextUint32,
    nextFloat: () => nextUint32() / TWO_POW_32,
    nextNormal: () => {
      if (spare !== undefined) {
        const s = spare;
        spare = undefined;
        return s;
      }
      // u1 in (0, 1] so the logarithm is finite.
      const u1 = (nextUint32() + 1) / TWO_POW_32;
      const u2 = nextUint32() / TWO_POW_32;
      const r = Math.sqrt(-2 * Math.log(u1));
      const theta = 2 * Math.PI * u2;
      spare = r * Math.sin(theta);
      return r * Math.cos(theta);
    },
  };
}

/** Fills `out` with N(mean, std²) samples. */
export function fillNormal(out: Float32Array, prng: Prng, mean: number, std: number): Float32Array {
  for (let i = 0; i < out.length; i++) out[i] = mean + std * prng.nextNormal();
  return out;
}

/** Fills `out` with U(lo, hi) samples. */
export function fillUniform(out: Float32Array, prng: Prng, lo: number, hi: number): Float32Array {
  const span = hi - lo;
  for (let i = 0; i < out.length; i++) out[i] = lo + span * prng.nextFloat();
  return out;
}
