// Hover in config files: the schema's description with type, bounds, default and allowed values,
// for keys and scalar values, through unions and records, env options and router entries.
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { describe, test } from 'node:test';
import { fileURLToPath } from 'node:url';
import type { Hover } from '../protocol/lsp.ts';
import { ConfigLanguageService } from './config-language-service.ts';
import { LineIndex } from './line-index.ts';

const team = readFileSync(fileURLToPath(new URL('./fixtures/team.json', import.meta.url)), 'utf8');
const service = new ConfigLanguageService();

/** Hover at the first character of the `nth` occurrence of `needle` in `text`, plus what its range covers. */
function hoverOn(text: string, needle: string, nth = 0): { hover: Hover | null; covered: string | undefined } {
  let offset = -1;
  for (let k = 0; k <= nth; k++) offset = text.indexOf(needle, offset + 1);
  assert.ok(offset >= 0, `no ${JSON.stringify(needle)} in the text`);
  const index = new LineIndex(text);
  const hover = service.hover(text, index.positionAt(offset + 1));
  const range = hover?.range;
  return { hover, covered: range === undefined ? undefined : text.slice(index.offsetAt(range.start), index.offsetAt(range.end)) };
}

describe('hover', () => {
  test('a key: description, type with bounds, default', () => {
    const { hover, covered } = hoverOn(team, '"branches"');
    assert.equal(covered, '"branches"');
    assert.equal(hover?.contents.kind, 'markdown');
    assert.equal(
      hover?.contents.value,
      '**branches** · `integer, 2 to 64` · default `4`\n\nGroup size K. at-grpo: responses sampled at each (turn, agent) node; grpo: independent rollouts per task. ' +
        'At least 2: advantages are normalised within a group, and a group of one has none.',
    );
  });

  test('a value: its property\'s documentation, with the allowed values', () => {
    const { hover, covered } = hoverOn(team, '"at-grpo"');
    assert.equal(covered, '"at-grpo"');
    assert.match(hover?.contents.value ?? '', /^\*\*name\*\* · `"at-grpo" \| "grpo" \| "ppo"` · default `"at-grpo"`\n\nat-grpo: at each \(turn, agent\)/);
  });

  test('markdown in descriptions is escaped', () => {
    const { hover } = hoverOn(team, '"teamRewardWeight"');
    assert.match(hover?.contents.value ?? '', /alpha \\\* r\\_team \+ r\\_local/);
  });

  test('a field of the cosine branch of the schedule union', () => {
    const { hover } = hoverOn(team, '"warmupSteps"');
    assert.equal(hover?.contents.value, '**warmupSteps** · `integer, 0 to 1000000000`\n\nOptimizer steps of linear warm-up from 0 to lr. At most 1000000000.');
  });

  test('an env option, from the environment\'s own schema', () => {
    const { hover, covered } = hoverOn(team, '"size"');
    assert.equal(covered, '"size"');
    assert.equal(hover?.contents.value, '**size** · `integer, 3 to 16` · default `5`\n\nSide of the square grid (reference: 10).');
  });

  test('a record entry takes the record\'s description; a router entry says whose agent and which policy', () => {
    const policy = hoverOn(team, '"tool-lora"').hover?.contents.value ?? '';
    assert.match(policy, /^\*\*tool-lora\*\* · `object`\n\nA trainable policy/);
    const route = hoverOn(team, '"tool"', 0).hover?.contents.value ?? '';
    assert.match(route, /^\*\*tool\*\* · `string`\n\nWhich policy acts for each agent/);
    assert.match(route, /Agent `tool` of plan-path, acted by policy `tool-lora` on model `base` with a LoRA adapter\.$/);
  });

  test('nothing over punctuation or an unknown key', () => {
    assert.equal(service.hover(team, { line: 0, character: 0 }), null);
    assert.equal(hoverOn(team.replace('"envsPerStep"', '"envPerStep"'), '"envPerStep"').hover, null);
  });

  test('works while the text has a syntax error', () => {
    const text = team.replace('"branches": 4,', '"branches": 4,,');
    assert.match(hoverOn(text, '"envsPerStep"').hover?.contents.value ?? '', /^\*\*envsPerStep\*\*/);
  });
});
