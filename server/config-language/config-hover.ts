/**
 * Hover in a config file: over a property name or a scalar value, the property's documentation
 * from the JSON Schema (type, bounds, default, allowed values, description). Over `env.options`
 * fields it is the chosen environment's own options schema that speaks (see `config-schema.ts`).
 */
import { findNodeAtOffset } from 'jsonc-parser';
import type { Hover, Position } from '../protocol/lsp.ts';
import { environmentNameOf, field, schemaAt } from './config-schema.ts';
import { agentsOf } from './environment-check.ts';
import { pathOf, type ParsedConfig } from './parsed-config.ts';
import { describeFacets } from './schema-docs.ts';

/** The hover at `position`, or null where there is nothing to say (punctuation, unknown keys). */
export function hoverConfig(doc: ParsedConfig, position: Position): Hover | null {
  if (doc.root === undefined) return null;
  const offset = doc.lines.offsetAt(position);
  const node = findNodeAtOffset(doc.root, offset, false);
  // Containers are hovered through their key; hovering their brackets says nothing.
  if (node === undefined || node.type === 'object' || node.type === 'array' || node.type === 'property') return null;
  const path = pathOf(node);
  const json = doc.looseValue();
  const facets = schemaAt(json, path);
  const described = describeFacets(path[path.length - 1], facets);
  if (described === undefined) return null;
  const value = path.length === 2 && path[0] === 'router' ? `${described}\n\n${routeNote(json, String(path[1]))}` : described;
  return { contents: { kind: 'markdown', value }, range: doc.rangeOfNode(node) };
}

/** For a router entry: which environment the agent belongs to and what its policy is. */
function routeNote(config: unknown, agent: string): string {
  const env = environmentNameOf(config);
  const agents = agentsOf(config);
  const policyId = field(field(config, 'router'), agent);
  const policy = typeof policyId === 'string' ? field(field(config, 'policies'), policyId) : undefined;
  const model = field(policy, 'model');
  let whose = '';
  if (env !== undefined && agents !== undefined) whose = agents.includes(agent) ? ` of ${env}` : ` (not an agent of ${env}, whose agents are ${agents.join(', ')})`;
  let acted = '';
  if (typeof policyId === 'string') {
    if (policy === undefined) acted = `, routed to policy \`${policyId}\`, which is not declared`;
    else {
      const onModel = typeof model === 'string' ? ` on model \`${model}\`` : '';
      acted = `, acted by policy \`${policyId}\`${onModel}${field(policy, 'lora') === undefined ? '' : ' with a LoRA adapter'}`;
    }
  }
  return `Agent \`${agent}\`${whose}${acted}.`;
}
