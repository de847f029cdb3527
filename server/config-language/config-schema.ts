/**
 * The config's JSON Schema (generated from the zod schema, so its descriptions are the `.describe()`
 * texts) navigated by JSON path, for completion and hover. `env.options` is `{}` in the config
 * schema, since options belong to the environment; here it is replaced by the JSON Schema of the
 * chosen environment's own options schema, so its fields complete and hover too.
 *
 * A path can lead to several schemas at once ("facets"): a `$ref`'s target, the branches of
 * `allOf`, and the branches of `anyOf`/`oneOf` that the document does not rule out. A branch is
 * ruled out when it fixes a property to a constant the document contradicts: the optimizer
 * schedule's `kind` picks constant or cosine that way. Facets are read first-wins.
 */
import { z } from 'zod';
import { environments, environmentNames, type EnvironmentName } from '../envs/environments.ts';
import { experimentConfigJsonSchema } from '../protocol/experiment-config.ts';

/** The parts of a draft-07 JSON Schema the language features read; the rest is stripped. */
export interface JsonSchema {
  type?: string | string[] | undefined;
  description?: string | undefined;
  properties?: Record<string, JsonSchema> | undefined;
  additionalProperties?: boolean | JsonSchema | undefined;
  items?: JsonSchema | undefined;
  required?: string[] | undefined;
  enum?: unknown[] | undefined;
  const?: unknown;
  default?: unknown;
  anyOf?: JsonSchema[] | undefined;
  oneOf?: JsonSchema[] | undefined;
  allOf?: JsonSchema[] | undefined;
  $ref?: string | undefined;
  minimum?: number | undefined;
  maximum?: number | undefined;
  exclusiveMinimum?: number | undefined;
  exclusiveMaximum?: number | undefined;
  minLength?: number | undefined;
  maxLength?: number | undefined;
  minItems?: number | undefined;
}

const jsonSchemaSchema: z.ZodType<JsonSchema> = z.lazy(() =>
  z.object({
    type: z.union([z.string(), z.array(z.string())]).optional(),
    description: z.string().optional(),
    properties: z.record(z.string(), jsonSchemaSchema).optional(),
    additionalProperties: z.union([z.boolean(), jsonSchemaSchema]).optional(),
    items: jsonSchemaSchema.optional(),
    required: z.array(z.string()).optional(),
    enum: z.array(z.unknown()).optional(),
    const: z.unknown().optional(),
    default: z.unknown().optional(),
    anyOf: z.array(jsonSchemaSchema).optional(),
    oneOf: z.array(jsonSchemaSchema).optional(),
    allOf: z.array(jsonSchemaSchema).optional(),
    $ref: z.string().optional(),
    minimum: z.number().optional(),
    maximum: z.number().optional(),
    exclusiveMinimum: z.number().optional(),
    exclusiveMaximum: z.number().optional(),
    minLength: z.number().optional(),
    maxLength: z.number().optional(),
    minItems: z.number().optional(),
  }),
);

/** A schema document: the schema and its root, against which `$ref`s resolve. */
export interface SchemaRoot {
  readonly raw: unknown;
  readonly schema: JsonSchema;
}

function loadRoot(raw: unknown, what: string): SchemaRoot {
  const r = jsonSchemaSchema.safeParse(raw);
  if (!r.success) throw new Error(`the JSON Schema of ${what} is not one the config language features can read: ${r.error.message}`);
  return { raw, schema: r.data };
}

let configRoot: SchemaRoot | undefined;
const optionRoots = new Map<EnvironmentName, SchemaRoot>();

/** The experiment config's JSON Schema, parsed once. */
function configSchemaRoot(): SchemaRoot {
  configRoot ??= loadRoot(experimentConfigJsonSchema(), 'the experiment config');
  return configRoot;
}

/** The JSON Schema of an environment's options, generated once per environment. */
function optionsSchemaRoot(name: EnvironmentName): SchemaRoot {
  let root = optionRoots.get(name);
  if (root === undefined) {
    const raw = z.toJSONSchema(environments[name].optionsSchema, {
      target: 'draft-07',
      io: 'input',
      // As for the config schema: z.int()'s safe-integer bounds say nothing to a reader.
      override: ({ jsonSchema: s }) => {
        if (s.maximum === Number.MAX_SAFE_INTEGER) delete s.maximum;
        if (s.minimum === Number.MIN_SAFE_INTEGER) delete s.minimum;
      },
    });
    root = loadRoot(raw, `the ${name} options`);
    optionRoots.set(name, root);
  }
  return root;
}

/** The environment a (possibly invalid) config value names, if it names a known one. */
export function environmentNameOf(config: unknown): EnvironmentName | undefined {
  const name = field(field(config, 'env'), 'name');
  return environmentNames.find((n) => n === name);
}

/** `value[key]` for a plain object, else undefined. */
export function field(value: unknown, key: string | number): unknown {
  if (typeof value !== 'object' || value === null) return undefined;
  return Object.hasOwn(value, key) ? (value as Record<string | number, unknown>)[key] : undefined;
}

/** One facet of the schema at a path, with the root its `$ref`s resolve against. */
export interface Facet {
  readonly schema: JsonSchema;
  readonly root: SchemaRoot;
}

/**
 * The facets of the config schema at `path` in `config` (the whole document's value, possibly
 * partial), or an empty list where the schema says nothing (an unknown key).
 */
export function schemaAt(config: unknown, path: ReadonlyArray<string | number>): Facet[] {
  const env = environmentNameOf(config);
  return walk(configSchemaRoot(), config, path, (prefix) => {
    if (env === undefined || prefix.length !== 2 || prefix[0] !== 'env' || prefix[1] !== 'options') return undefined;
    return optionsSchemaRoot(env);
  });
}

/** The facets at `path` of any JSON Schema document (`raw`), for `value`. */
export function schemaAtIn(raw: unknown, value: unknown, path: ReadonlyArray<string | number>): Facet[] {
  return walk(loadRoot(raw, 'a schema'), value, path, () => undefined);
}

/**
 * Walks `path` down from the root. `substitute` may replace the schema at a path prefix by another
 * schema document (the environment's options).
 */
function walk(root: SchemaRoot, value: unknown, path: ReadonlyArray<string | number>, substitute: (prefix: ReadonlyArray<string | number>) => SchemaRoot | undefined): Facet[] {
  let facets = expand({ schema: root.schema, root }, value);
  let v = value;
  for (let i = 0; i < path.length && facets.length > 0; i++) {
    const segment = path[i]!;
    v = field(v, segment);
    const other = substitute(path.slice(0, i + 1));
    facets = other !== undefined ? expand({ schema: other.schema, root: other }, v) : facets.flatMap((f) => childFacets(f, segment)).flatMap((f) => expand(f, v));
  }
  return facets;
}

/** The facets for one key or index below a facet. */
function childFacets(parent: Facet, segment: string | number): Facet[] {
  const s = parent.schema;
  if (typeof segment === 'number') return s.items === undefined ? [] : [{ schema: s.items, root: parent.root }];
  const named = s.properties?.[segment];
  if (named !== undefined) return [{ schema: named, root: parent.root }];
  if (typeof s.additionalProperties === 'object') {
    // Entries of a record (router, policies, models) rarely describe themselves; the record's
    // description says what an entry is.
    const entry = s.additionalProperties;
    const description = entry.description ?? s.description;
    return [{ schema: description === undefined ? entry : { ...entry, description }, root: parent.root }];
  }
  return [];
}

/** A facet with its `$ref` resolved and its `allOf` / applicable `anyOf` / `oneOf` branches. */
function expand(facet: Facet, value: unknown, depth = 0): Facet[] {
  if (depth > 16) return [];
  const s = resolveRef(facet);
  const out: Facet[] = [s];
  for (const branch of s.schema.allOf ?? []) out.push(...expand({ schema: branch, root: s.root }, value, depth + 1));
  for (const branch of [...(s.schema.anyOf ?? []), ...(s.schema.oneOf ?? [])]) {
    const b = resolveRef({ schema: branch, root: s.root });
    if (!contradicts(b.schema, value)) out.push(...expand(b, value, depth + 1));
  }
  return out;
}

/** Whether `value` sets a property this branch fixes to a constant to something else. */
function contradicts(branch: JsonSchema, value: unknown): boolean {
  for (const [key, p] of Object.entries(branch.properties ?? {})) {
    const fixed = p.const !== undefined ? [p.const] : p.enum?.length === 1 ? p.enum : undefined;
    const given = field(value, key);
    if (fixed !== undefined && given !== undefined && !fixed.includes(given)) return true;
  }
  return false;
}

/** Follows local `$ref`s (`#/definitions/x`, `#/$defs/x`) within the facet's root. */
function resolveRef(facet: Facet): Facet {
  let f = facet;
  for (let guard = 0; f.schema.$ref !== undefined && guard < 16; guard++) {
    const ref = f.schema.$ref;
    if (!ref.startsWith('#')) return f;
    let target: unknown = f.root.raw;
    for (const part of ref.slice(1).split('/').filter((p) => p !== '')) {
      target = field(target, decodeURIComponent(part).replaceAll('~1', '/').replaceAll('~0', '~'));
    }
    const parsed = jsonSchemaSchema.safeParse(target);
    if (!parsed.success) return f;
    // Keys beside the $ref (a description, a default) describe this use of the target: keep them.
    const { $ref: _ref, ...beside } = f.schema;
    f = { schema: { ...parsed.data, ...stripUndefined(beside) }, root: f.root };
  }
  return f;
}

function stripUndefined(s: JsonSchema): JsonSchema {
  return Object.fromEntries(Object.entries(s).filter(([, v]) => v !== undefined));
}

// ---------------------------------------------------------------------------------------------
// Reading facets

/** The first value a facet gives for `key`. */
export function first<K extends keyof JsonSchema>(facets: readonly Facet[], key: K): JsonSchema[K] | undefined {
  for (const f of facets) if (f.schema[key] !== undefined) return f.schema[key];
  return undefined;
}

/** The named properties the facets allow, in schema order, first facet wins. */
export function propertiesOf(facets: readonly Facet[]): Array<{ name: string; schema: Facet[]; required: boolean }> {
  const out = new Map<string, { name: string; schema: Facet[]; required: boolean }>();
  for (const f of facets) {
    for (const [name, schema] of Object.entries(f.schema.properties ?? {})) {
      const required = f.schema.required?.includes(name) ?? false;
      const seen = out.get(name);
      if (seen === undefined) out.set(name, { name, schema: expand({ schema, root: f.root }, undefined), required });
      else seen.required ||= required;
    }
  }
  return [...out.values()];
}

/** The values the facets allow outright: enum members and constants. */
export function allowedValues(facets: readonly Facet[]): unknown[] {
  const values: unknown[] = [];
  for (const f of facets) {
    for (const v of f.schema.enum ?? []) if (!values.includes(v)) values.push(v);
    if (f.schema.const !== undefined && !values.includes(f.schema.const)) values.push(f.schema.const);
  }
  return values;
}

/** The JSON types the facets allow ("integer", "string", ...), in order. */
export function typesOf(facets: readonly Facet[]): string[] {
  const types: string[] = [];
  for (const f of facets) {
    const t = f.schema.type;
    for (const name of t === undefined ? [] : Array.isArray(t) ? t : [t]) if (!types.includes(name)) types.push(name);
  }
  // "integer" is a "number"; saying both is noise.
  return types.includes('integer') ? types.filter((t) => t !== 'number') : types;
}
