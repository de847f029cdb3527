/**
 * Completion in a config file, from the JSON Schema and the document itself:
 *  - at a property name: the properties the schema allows in that object and the file does not
 *    have yet, documented with their description, inserted as a snippet `"name": <value>`; in
 *    `router`, the environment's agents that have no policy yet;
 *  - at a value: enum members, constants and booleans; routing-aware ids where the schema only
 *    says "an id": declared policy ids for a router value, declared model ids for a policy's model.
 *
 * The tree comes from jsonc-parser, which keeps going through syntax errors, so completion works
 * in the half-typed text it is asked about. Edits replace the token under the cursor (a quoted
 * key or a scalar), and the filter text includes the quotes the edit replaces, as VS Code filters
 * on the replaced text.
 */
import { getLocation, type Node } from 'jsonc-parser';
import { CompletionItemKind, InsertTextFormat, type CompletionItem, type CompletionList, type Position } from '../protocol/lsp.ts';
import { allowedValues, field, first, propertiesOf, schemaAt, typesOf, type Facet } from './config-schema.ts';
import { agentsOf } from './environment-check.ts';
import { keysOf, ParsedConfig } from './parsed-config.ts';
import { describeFacets, typeLabel } from './schema-docs.ts';

/** The completion list at `position`. */
export function completeConfig(doc: ParsedConfig, position: Position): CompletionList {
  const offset = doc.lines.offsetAt(position);
  const location = getLocation(doc.text, offset);
  const value = doc.looseValue();
  const items = location.isAtPropertyKey
    ? propertyItems(doc, value, location.path.slice(0, -1), offset, location.previousNode)
    : valueItems(doc, value, location.path, offset, location.previousNode);
  return { isIncomplete: false, items };
}

/** The span to replace: the token under the cursor, or the bare word typed so far. */
function replaceSpan(doc: ParsedConfig, offset: number, previous: Node | undefined): { start: number; end: number } {
  if (previous !== undefined && previous.offset <= offset && offset <= previous.offset + previous.length) {
    const end = previous.offset + previous.length;
    const token = doc.text.slice(previous.offset, end);
    // An unterminated string runs on to the end of the line or file: replace only up to the cursor.
    const complete = !token.startsWith('"') || (token.length >= 2 && token.endsWith('"') && !/[\r\n]/.test(token));
    return { start: previous.offset, end: complete ? end : offset };
  }
  // A word without quotes (`{ na| }`) is a syntax error, so no node; replace it all the same.
  let start = offset;
  while (start > 0 && /[\w$"-]/.test(doc.text[start - 1]!)) start--;
  return { start, end: offset };
}

/** `,` when the next thing after `end` is another property or value, which needs separating. */
function separatorAfter(doc: ParsedConfig, end: number): string {
  const next = /\S/.exec(doc.text.slice(end));
  return next !== null && /["{[\dtfn-]/.test(next[0]) ? ',' : '';
}

function propertyItems(doc: ParsedConfig, value: unknown, objectPath: Array<string | number>, offset: number, previous: Node | undefined): CompletionItem[] {
  const span = replaceSpan(doc, offset, previous);
  const range = doc.lines.rangeOf(span.start, span.end);
  const objectNode = doc.nodeAt(objectPath);
  const typedKey = previous?.type === 'property' ? previous : undefined;
  // Keys present, except the one being typed (so retyping a key offers it again), read from the
  // text without that token: with a half-typed key (`""` before `"steps": 3`, VS Code having closed
  // the quote) the parser reads the next key as the typed key's value, and it would be offered again.
  const withoutTyped = new ParsedConfig(doc.text.slice(0, span.start) + doc.text.slice(span.end));
  const present = new Set(keysOf(withoutTyped.nodeAt(objectPath)).map((k) => k.value));
  // Completing over an existing key keeps its colon and value: replace the name only.
  const hasColon = typedKey !== undefined && (objectNode?.children ?? []).some((p) => p.children?.[0]?.offset === typedKey.offset && p.colonOffset !== undefined);
  const filterQuoted = doc.text[span.start] === '"';
  const comma = separatorAfter(doc, span.end);

  const item = (name: string, facets: Facet[], detail: string, sortText: string, snippet: string): CompletionItem => {
    const documentation = describeFacets(name, facets);
    const newText = hasColon ? JSON.stringify(name) : `${escapeSnippet(JSON.stringify(name))}: ${snippet}${comma}`;
    return {
      label: name,
      kind: CompletionItemKind.Property,
      detail,
      ...(documentation === undefined ? {} : { documentation: { kind: 'markdown' as const, value: documentation } }),
      textEdit: { range, newText },
      insertTextFormat: hasColon ? InsertTextFormat.PlainText : InsertTextFormat.Snippet,
      sortText,
      ...(filterQuoted ? { filterText: JSON.stringify(name) } : {}),
    };
  };

  const facets = schemaAt(value, objectPath);
  const items = propertiesOf(facets)
    .filter((p) => !present.has(p.name))
    .map((p, i) => item(p.name, p.schema, `${p.required ? 'required' : 'optional'} · ${typeLabel(p.schema)}`, `${p.required ? 0 : 1}${String(i).padStart(3, '0')}`, valueSnippet(p.schema)));

  // Router keys are the environment's agents, which only the environment knows.
  if (objectPath.length === 1 && objectPath[0] === 'router') {
    const env = field(field(value, 'env'), 'name');
    const policies = Object.keys(objectOrEmpty(field(value, 'policies')));
    (agentsOf(value) ?? []).filter((a) => !present.has(a)).forEach((agent, i) => {
      const choice = policies.length > 0 ? `"\${1|${policies.map(escapeChoice).join(',')}|}"` : '"$1"';
      items.push(item(agent, schemaAt(value, ['router', agent]), `agent of ${String(env)}`, `0${String(i).padStart(3, '0')}`, choice));
    });
  }
  return items;
}

function valueItems(doc: ParsedConfig, value: unknown, path: Array<string | number>, offset: number, previous: Node | undefined): CompletionItem[] {
  const scalar = previous !== undefined && previous.type !== 'property' && previous.type !== 'object' && previous.type !== 'array' ? previous : undefined;
  const span = replaceSpan(doc, offset, scalar);
  const range = doc.lines.rangeOf(span.start, span.end);
  const filterQuoted = doc.text[span.start] === '"';
  const comma = separatorAfter(doc, span.end);
  const item = (v: unknown, kind: number, detail: string | undefined, documentation?: string): CompletionItem => {
    const text = JSON.stringify(v);
    return {
      label: text,
      kind,
      ...(detail === undefined ? {} : { detail }),
      ...(documentation === undefined ? {} : { documentation: { kind: 'markdown' as const, value: documentation } }),
      textEdit: { range, newText: text + comma },
      insertTextFormat: InsertTextFormat.PlainText,
      ...(filterQuoted || typeof v !== 'string' ? {} : { filterText: v }),
    };
  };

  const facets = schemaAt(value, path);
  const items: CompletionItem[] = allowedValues(facets).map((v) => item(v, CompletionItemKind.EnumMember, undefined, describeFacets(undefined, facets)));
  if (items.length === 0 && typesOf(facets).includes('boolean')) {
    items.push(item(true, CompletionItemKind.Keyword, undefined), item(false, CompletionItemKind.Keyword, undefined));
  }

  // Ids the schema cannot list: they are declared elsewhere in the same file.
  if (path.length === 2 && path[0] === 'router') {
    for (const [id, policy] of Object.entries(objectOrEmpty(field(value, 'policies')))) {
      const model = field(policy, 'model');
      const lora = field(field(policy, 'lora'), 'rank');
      const detail = `policy${typeof model === 'string' ? ` on model ${model}` : ''}${typeof lora === 'number' ? `, LoRA rank ${lora}` : ''}`;
      items.push(item(id, CompletionItemKind.Reference, detail));
    }
  }
  if (path.length === 3 && path[0] === 'policies' && path[2] === 'model') {
    const models = field(value, 'models');
    // Without "models" the config gets the default {"base": {"preset": "default"}}.
    const declared = models === undefined ? { base: { preset: 'default' } } : objectOrEmpty(models);
    for (const [id, source] of Object.entries(declared)) {
      const preset = field(source, 'preset');
      const checkpoint = field(source, 'checkpoint');
      const detail = typeof preset === 'string' ? `model, preset ${preset}` : typeof checkpoint === 'string' ? `model from ${checkpoint}` : 'model';
      items.push(item(id, CompletionItemKind.Reference, detail));
    }
  }
  return items;
}

/** The value part of a property snippet, by the property's schema. */
function valueSnippet(facets: readonly Facet[]): string {
  const values = allowedValues(facets);
  if (values.length > 0) return `\${1|${values.map((v) => escapeChoice(JSON.stringify(v))).join(',')}|}`;
  const types = typesOf(facets);
  const fallback = first(facets, 'default');
  if (types[0] === 'object') return '{$1}';
  if (types[0] === 'array') return '[$1]';
  if (types[0] === 'string') return '"$1"';
  if (types[0] === 'boolean') return `\${1|${fallback === false ? 'false,true' : 'true,false'}|}`;
  if ((types[0] === 'integer' || types[0] === 'number') && typeof fallback === 'number') return `\${1:${fallback}}`;
  return '$1';
}

/** Text inside a snippet: `$`, `}` and `\` are syntax there. */
function escapeSnippet(text: string): string {
  return text.replace(/[$}\\]/g, '\\$&');
}

/** Text inside a snippet choice `${1|a,b|}`: `,` and `|` are syntax there too. */
function escapeChoice(text: string): string {
  return text.replace(/[$}\\,|]/g, '\\$&');
}

function objectOrEmpty(value: unknown): object {
  return typeof value === 'object' && value !== null && !Array.isArray(value) ? value : {};
}
