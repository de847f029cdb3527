/**
 * Checking tensors against the names and shapes a model expects, shared by every loader and
 * writer (our checkpoints, Hugging Face folders, LoRA adapters): one error lists every missing,
 * mis-shaped and unexpected tensor, named the way the file names it.
 */
import type { SafetensorsInput } from './safetensors.ts';

/** Expected tensors: name and shape, in canonical order. */
export type ExpectedShapes = ReadonlyArray<readonly [name: string, shape: readonly number[]]>;

/** A problem list is capped so a wholly wrong file (say, another architecture) gives a readable error. */
const MAX_LISTED = 20;

const fmtShape = (s: readonly number[]): string => `[${s.join(', ')}]`;
const sameShape = (a: readonly number[], b: readonly number[]): boolean =>
  a.length === b.length && a.every((d, i) => d === b[i]);

function fail(source: string, what: string, problems: string[]): never {
  const shown = problems.slice(0, MAX_LISTED).map((p) => `  ${p}`);
  if (problems.length > MAX_LISTED) shown.push(`  … and ${problems.length - MAX_LISTED} more`);
  throw new Error(`${source}: ${what}:\n${shown.join('\n')}`);
}

/**
 * Checks tensors read from `source` against the expected names and shapes and returns their data
 * in the expected order. Every missing, mis-shaped and unexpected tensor is listed in one error.
 * `describe` renders a name in that error (e.g. with the file's own naming); default `'name'`.
 */
export function matchTensors(
  expected: ExpectedShapes,
  tensors: ReadonlyMap<string, { readonly shape: readonly number[]; readonly data: Float32Array }>,
  source: string,
  describe: (name: string) => string = (n) => `'${n}'`,
): Map<string, Float32Array> {
  const problems: string[] = [];
  const out = new Map<string, Float32Array>();
  const known = new Set<string>();
  for (const [name, shape] of expected) {
    known.add(name);
    const t = tensors.get(name);
    if (!t) problems.push(`missing tensor ${describe(name)} (expected shape ${fmtShape(shape)})`);
    else if (!sameShape(t.shape, shape)) problems.push(`tensor ${describe(name)} has shape ${fmtShape(t.shape)}, expected ${fmtShape(shape)}`);
    else out.set(name, t.data);
  }
  for (const [name, t] of tensors) {
    if (!known.has(name)) problems.push(`unexpected tensor ${describe(name)} (shape ${fmtShape(t.shape)})`);
  }
  if (problems.length > 0) fail(source, 'tensors do not match the model config', problems);
  return out;
}

/**
 * Pairs flat parameter arrays with their expected shapes for writing, checking that every
 * expected parameter is there with the right number of elements and nothing else is.
 */
export function shapeParameters(
  expected: ExpectedShapes,
  params: ReadonlyMap<string, Float32Array>,
  source: string,
): Map<string, SafetensorsInput> {
  const problems: string[] = [];
  const out = new Map<string, SafetensorsInput>();
  const known = new Set<string>();
  for (const [name, shape] of expected) {
    known.add(name);
    const data = params.get(name);
    const n = shape.reduce((a, b) => a * b, 1);
    if (!data) problems.push(`missing parameter '${name}' (expected shape ${fmtShape(shape)})`);
    else if (data.length !== n) problems.push(`parameter '${name}' has ${data.length} elements, expected ${n} for shape ${fmtShape(shape)}`);
    else out.set(name, { shape, data });
  }
  for (const [name, data] of params) {
    if (!known.has(name)) problems.push(`unexpected parameter '${name}' (${data.length} elements)`);
  }
  if (problems.length > 0) fail(source, 'parameters do not match the model config', problems);
  return out;
}

