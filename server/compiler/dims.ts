/**
 * Symbolic tensor dimensions.
 *
 * A dimension is either a known size (a number) or a symbol for a size known only at run time
 * (`'B'`, `'T'`, `'P'`). Products of symbols appear when tensors are flattened (`'B*T'`), sums when
 * they are concatenated (`'P+T'`). Both are kept in a canonical string form so equality is string
 * equality: products are `coef*sym*sym` with symbols sorted, sums are parenthesised operands sorted.
 * That is all the algebra a transformer graph needs; anything else is a verifier error.
 */
export type Dim = number | string;
export type Shape = readonly Dim[];

interface Monomial {
  coef: number;
  syms: string[];
}

function toMonomial(d: Dim): Monomial {
  if (typeof d === 'number') return { coef: d, syms: [] };
  let coef = 1;
  const syms: string[] = [];
  for (const part of splitTopLevel(d, '*')) {
    const n = Number(part);
    if (Number.isInteger(n) && part !== '') coef *= n;
    else syms.push(part);
  }
  return { coef, syms };
}

/** Splits on `sep` outside parentheses (a sum is an atom for multiplication). */
function splitTopLevel(s: string, sep: string): string[] {
  const parts: string[] = [];
  let depth = 0;
  let start = 0;
  for (let i = 0; i < s.length; i++) {
    const c = s[i];
    if (c === '(') depth++;
    else if (c === ')') depth--;
    else if (c === sep && depth === 0) {
      parts.push(s.slice(start, i));
      start = i + 1;
    }
  }
  parts.push(s.slice(start));
  return parts;
}

function fromMonomial(m: Monomial): Dim {
  if (m.syms.length === 0) return m.coef;
  if (m.coef === 0) return 0;
  const syms = [...m.syms].sort();
  return (m.coef === 1 ? '' : `${m.coef}*`) + syms.join('*');
}

/** a × b, canonical. */
export function dimMul(a: Dim, b: Dim): Dim {
  const x = toMonomial(a);
  const y = toMonomial(b);
  return fromMonomial({ coef: x.coef * y.coef, syms: [...x.syms, ...y.syms] });
}

/** Product of all dims (1 for a scalar). */
export function dimProduct(dims: Shape): Dim {
  return dims.reduce<Dim>((acc, d) => dimMul(acc, d), 1);
}

/** a + b, canonical: like terms combine (T + T = 2*T); other sums become a sum atom `(P+T)`. */
export function dimAdd(a: Dim, b: Dim): Dim {
  if (typeof a === 'number' && typeof b === 'number') return a + b;
  const terms = new Map<string, number>();
  const addTerms = (d: Dim) => {
    const s = String(d);
    const parts = s.startsWith('(') && s.endsWith(')') && splitTopLevel(s, '*').length === 1 ? splitTopLevel(s.slice(1, -1), '+') : [s];
    for (const part of parts) {
      const m = toMonomial(/^\d+$/.test(part) ? Number(part) : part);
      const key = [...m.syms].sort().join('*');
      terms.set(key, (terms.get(key) ?? 0) + m.coef);
    }
  };
  addTerms(a);
  addTerms(b);
  const out = [...terms].filter(([, c]) => c !== 0).map(([key, coef]) => (key === '' ? coef : fromMonomial({ coef, syms: key.split('*') })));
  if (out.length === 0) return 0;
  if (out.length === 1) return out[0]!;
  return `(${out.map(String).sort().join('+')})`;
}

export function formatShape(shape: Shape): string {
  return `[${shape.join(', ')}]`;
}

/**
 * Numpy-style broadcast of two shapes. Returns null when they do not broadcast; two different
 * symbols never broadcast (we cannot prove either is 1).
 */
export function broadcastShapes(a: Shape, b: Shape): Dim[] | null {
  const n = Math.max(a.length, b.length);
  const out: Dim[] = [];
  for (let i = 0; i < n; i++) {
    const x = a[a.length - n + i] ?? 1;
    const y = b[b.length - n + i] ?? 1;
    if (x === y || y === 1) out.push(x);
    else if (x === 1) out.push(y);
    else return null;
  }
  return out;
}

/** Evaluates a dim given values for its symbols. */
export function evalDim(d: Dim, env: Readonly<Record<string, number>>): number {
  if (typeof d === 'number') return d;
  const m = toMonomial(d);
  return m.syms.reduce((p, s) => {
    if (s.startsWith('(')) return p * splitTopLevel(s.slice(1, -1), '+').reduce((acc, t) => acc + evalDim(t, env), 0);
    const v = env[s];
    if (v === undefined) throw new Error(`no value for dimension symbol '${s}'`);
    return p * v;
  }, m.coef);
}
