/**
 * Markdown for a schema position, shared by hover and completion documentation: the type with its
 * bounds, the default, the allowed values and the description (the zod `.describe()` text).
 */
import { allowedValues, first, typesOf, type Facet } from './config-schema.ts';

/** One line: `integer, 2 to 64` / `"at-grpo" | "grpo"` / `object`. */
export function typeLabel(facets: readonly Facet[]): string {
  const values = allowedValues(facets);
  if (values.length > 0) return values.map((v) => JSON.stringify(v)).join(' | ');
  const types = typesOf(facets);
  const label = types.length === 0 ? 'any' : types.join(' | ');
  const bounds = boundsOf(facets);
  return bounds === '' ? label : `${label}, ${bounds}`;
}

/** `2 to 64`, `> 0, ≤ 1`, `1 to 200 characters`, or ''. */
function boundsOf(facets: readonly Facet[]): string {
  const parts: string[] = [];
  const min = first(facets, 'minimum');
  const max = first(facets, 'maximum');
  const xmin = first(facets, 'exclusiveMinimum');
  const xmax = first(facets, 'exclusiveMaximum');
  if (min !== undefined && max !== undefined) parts.push(`${min} to ${max}`);
  else {
    if (min !== undefined) parts.push(`≥ ${min}`);
    if (xmin !== undefined) parts.push(`> ${xmin}`);
    if (max !== undefined) parts.push(`≤ ${max}`);
    if (xmax !== undefined) parts.push(`< ${xmax}`);
  }
  const minLength = first(facets, 'minLength');
  const maxLength = first(facets, 'maxLength');
  if (maxLength !== undefined) parts.push(`${minLength ?? 0} to ${maxLength} characters`);
  else if (minLength === 1) parts.push('not empty');
  else if (minLength !== undefined) parts.push(`at least ${minLength} characters`);
  return parts.join(', ');
}

/**
 * The markdown for the property `name` (or an array item, for a number) whose schema is `facets`;
 * undefined when the schema says nothing worth showing.
 */
export function describeFacets(name: string | number | undefined, facets: readonly Facet[]): string | undefined {
  if (facets.length === 0) return undefined;
  const description = first(facets, 'description');
  const label = typeLabel(facets);
  if (description === undefined && label === 'any') return undefined;
  const title = name === undefined ? '' : typeof name === 'number' ? `**item ${name}** · ` : `**${name}** · `;
  const fallback = first(facets, 'default');
  const defaultText = fallback === undefined ? '' : ` · default \`${JSON.stringify(fallback)}\``;
  const lines = [`${title}\`${label}\`${defaultText}`];
  if (description !== undefined) lines.push('', escapeMarkdown(description));
  return lines.join('\n');
}

/** Descriptions are prose, but `*`, `_` and `<` in them (`alpha * r_team`) must not format. */
function escapeMarkdown(text: string): string {
  return text.replace(/([\\*_<>[\]`#|])/g, '\\$1');
}
