import assert from 'node:assert/strict';
import { test } from 'node:test';
import { diagnoseConfig } from '../../server/config-language/config-diagnostics.ts';
import { ParsedConfig } from '../../server/config-language/parsed-config.ts';
import { tinyConfigWithSteps } from '../../test/fixtures/tiny-config.ts';
import { jsonLanguageSource, withoutSchemaEchoes, type EchoDiagnostic } from './schema-echoes.ts';

/** The line and character range of the first `needle` in `text`. */
function rangeOf(text: string, needle: string): EchoDiagnostic['range'] {
  const i = text.indexOf(needle);
  assert.ok(i >= 0, needle);
  const before = text.slice(0, i).split('\n');
  const line = before.length - 1;
  const character = before.at(-1)!.length;
  return { start: { line, character }, end: { line, character: character + needle.length } };
}

/** The range of the one-character value after the first `key` in `text`. */
function valueRange(text: string, key: string): EchoDiagnostic['range'] {
  const { end } = rangeOf(text, key);
  return { start: end, end: { line: end.line, character: end.character + 1 } };
}

// A config with three mistakes: a value the schema bounds (branches 1), an environment option
// only the server checks (plan-path's maxTurns as a string), a property the schema requires left out (name).
const { name: _name, ...config } = tinyConfigWithSteps(3);
const text = `${JSON.stringify({ $schema: './schema.json', ...config, algorithm: { ...config.algorithm, branches: 1 }, env: { ...config.env, options: { ...config.env.options, maxTurns: 'two' } } }, null, 2)}\n`;
// The server's own diagnostics for it, as the language service makes them.
const server = diagnoseConfig(new ParsedConfig(text));
// What VS Code's JSON language features say against the `$schema` (vscode-json-languageservice's words and codes).
const json: EchoDiagnostic[] = [
  // The schema check's diagnostics carry no source (VS Code 1.100), the parser's say "json".
  { range: valueRange(text, '"branches": '), message: 'Value is below the minimum of 2.', code: 0 },
  { range: rangeOf(text, '{'), message: 'Missing property "name".' },
  { range: rangeOf(text, '"seed"'), message: 'Duplicate object key', source: jsonLanguageSource, code: 0x208 },
];

test('the setup: the server reports the bound, the missing property and the option', () => {
  const messages = server.map((d) => `${d.code}: ${d.message}`);
  assert.ok(messages.some((m) => /^config: algorithm\.branches: /.test(m)), messages.join('\n'));
  assert.ok(messages.some((m) => /^config: missing required property "name"/.test(m)), messages.join('\n'));
  assert.ok(messages.some((m) => /^environment: env\.options\.maxTurns: /.test(m)), messages.join('\n'));
});

test("a mistake the $schema check reports is the server's no more; what only the server knows stays", () => {
  const branches = server.find((d) => d.message.startsWith('algorithm.branches'))!;
  // VS Code's bound diagnostic sits on the value, as the server's does.
  assert.deepEqual(json[0]!.range, branches.range);
  const kept = withoutSchemaEchoes(server, json).map((d) => d.message);
  assert.ok(!kept.some((m) => m.startsWith('algorithm.branches')), kept.join('\n'));
  assert.ok(!kept.some((m) => m.startsWith('missing required property "name"')), kept.join('\n'));
  assert.ok(kept.some((m) => m.startsWith('env.options.maxTurns')), kept.join('\n'));
  assert.equal(kept.length, server.length - 2);
});

test('without a schema check from VS Code (no $schema, or its syntax codes only) the server says everything', () => {
  assert.deepEqual(withoutSchemaEchoes(server, []), server);
  assert.deepEqual(withoutSchemaEchoes(server, [json[2]!]), server);
  // A schema diagnostic elsewhere does not take a server diagnostic it does not cover.
  const elsewhere: EchoDiagnostic = { ...json[0]!, range: rangeOf(text, '"seed"') };
  assert.equal(withoutSchemaEchoes(server, [elsewhere]).length, server.length);
  // Nor does another extension's diagnostic (a spell checker's, say) on the same text.
  const other: EchoDiagnostic = { ...json[0]!, source: 'cSpell' };
  assert.equal(withoutSchemaEchoes(server, [other]).length, server.length);
});
