// Diagnostics of config files: every shipped config is clean; representative errors land on the
// exact text at fault (asserted as the text the range covers plus its line), with messages that
// name the culprit; warnings and information for legal but suspicious settings.
import assert from 'node:assert/strict';
import { readdirSync, readFileSync } from 'node:fs';
import { join, relative } from 'node:path';
import { describe, test } from 'node:test';
import { fileURLToPath } from 'node:url';
import type { Diagnostic } from '../protocol/lsp.ts';
import { ConfigLanguageService } from './config-language-service.ts';
import { LineIndex } from './line-index.ts';

const root = fileURLToPath(new URL('../..', import.meta.url));
const configsDir = join(root, 'configs');

function configFiles(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((e) => {
    const path = join(dir, e.name);
    if (e.isDirectory()) return configFiles(path);
    return e.name.endsWith('.json') && e.name !== 'schema.json' ? [path] : [];
  });
}

// The edits below start from fixtures of this folder's own, not from shipped configs, which change with
// every measured recipe.
const fixtures = join(root, 'server', 'config-language', 'fixtures');
const team = readFileSync(join(fixtures, 'team.json'), 'utf8');
const service = new ConfigLanguageService();

/** `text` with `from` replaced by `to`, failing loudly if `from` is not there (a stale test). */
function edit(text: string, from: string, to: string): string {
  assert.ok(text.includes(from), `test text lacks ${JSON.stringify(from)}`);
  return text.replace(from, to);
}

/** What a diagnostic underlines, and where. */
function at(text: string, d: Diagnostic): { line: number; covered: string } {
  const index = new LineIndex(text);
  return { line: d.range.start.line, covered: text.slice(index.offsetAt(d.range.start), index.offsetAt(d.range.end)) };
}

/** The one diagnostic of `text`, asserting there is exactly one. */
function only(text: string): Diagnostic {
  const ds = service.diagnose(text);
  assert.equal(ds.length, 1, `expected one diagnostic, got ${JSON.stringify(ds.map((d) => d.message), null, 1)}`);
  return ds[0]!;
}

const lineOf = (text: string, needle: string): number => text.slice(0, text.indexOf(needle)).split('\n').length - 1;

describe('diagnostics: shipped configs and the fixtures', () => {
  for (const path of [...configFiles(configsDir), ...configFiles(fixtures)]) {
    test(`${relative(root, path)} has none`, () => {
      assert.deepEqual(service.diagnose(readFileSync(path, 'utf8')), []);
    });
  }
});

describe('diagnostics: syntax', () => {
  test('a missing comma, at the token that needed one', () => {
    const text = '{\n  "name": "x"\n  "seed": 1\n}';
    const d = only(text);
    assert.deepEqual(d.range, { start: { line: 2, character: 2 }, end: { line: 2, character: 8 } });
    assert.equal(d.severity, 1);
    assert.equal(d.code, 'json-syntax');
    assert.equal(d.source, 'troupe');
    assert.match(d.message, /expected "," between items, found "\\"seed\\""/);
  });

  test('a trailing comma, once, at the comma', () => {
    const text = edit(team, '"alpha": 32\n      }\n    },\n    "plan', '"alpha": 32,\n      }\n    },\n    "plan');
    const d = only(text);
    assert.deepEqual(at(text, d), { line: lineOf(team, '"alpha": 32'), covered: ',' });
    assert.equal(d.message, 'trailing comma before "}": JSON allows none');
  });

  test('a comment, which plain JSON does not allow', () => {
    const d = only('{"name": "x" // why\n}');
    assert.deepEqual(d.range, { start: { line: 0, character: 13 }, end: { line: 0, character: 19 } });
    assert.match(d.message, /^comments are not allowed/);
  });

  test('an empty file', () => {
    assert.match(only('  \n').message, /the file is empty: a config is a JSON object/);
  });
});

describe('diagnostics: schema and cross-field rules', () => {
  test('a bad enum value, on the value, naming the allowed ones', () => {
    const text = edit(team, '"name": "at-grpo"', '"name": "atgrpo"');
    const d = only(text);
    assert.deepEqual(at(text, d), { line: lineOf(text, '"atgrpo"'), covered: '"atgrpo"' });
    assert.equal(d.message, 'algorithm.name: expected one of "at-grpo", "grpo", "ppo"');
    assert.equal(d.code, 'config');
  });

  test('an unknown key, on the key, with a suggestion', () => {
    const text = edit(team, '"envsPerStep"', '"envPerStep"');
    const d = only(text);
    assert.deepEqual(at(text, d), { line: lineOf(text, '"envPerStep"'), covered: '"envPerStep"' });
    assert.match(d.message, /^algorithm\.envPerStep: unknown key "envPerStep" \(did you mean "envsPerStep"\?\); allowed: "name", "branches"/);
  });

  test('a missing field, on the enclosing object\'s key, naming the field', () => {
    const text = edit(team, '"name": "plan-path",', '');
    const d = only(text);
    assert.deepEqual(at(text, d), { line: lineOf(text, '"env"'), covered: '"env"' });
    assert.equal(d.message, 'missing required property "name" in env: expected one of "plan-path", "sudoku", "sokoban", "tic-tac-toe", "math", "code", "hanabi"');
  });

  test('a missing top-level field, on the opening brace', () => {
    const text = edit(team, '"specialization": "L2",', '');
    const d = only(text);
    assert.deepEqual(d.range, { start: { line: 0, character: 0 }, end: { line: 0, character: 1 } });
    assert.equal(d.message, 'missing required property "specialization": expected one of "L0", "L1", "L2", "L3"');
  });

  test('K < 2, on the value', () => {
    const text = edit(team, '"branches": 4', '"branches": 1');
    const d = only(text);
    assert.deepEqual(at(text, d), { line: lineOf(text, '"branches"'), covered: '1' });
    assert.equal(d.message, 'algorithm.branches: must be >= 2');
  });

  test('an unknown policy in the router, on the value, with a suggestion (and the orphaned policy)', () => {
    const text = edit(team, '"plan": "plan-lora"', '"plan": "plan-lra"');
    const ds = service.diagnose(text);
    assert.deepEqual(
      ds.map((d) => at(text, d)),
      [
        { line: lineOf(text, '"plan-lora": {'), covered: '"plan-lora"' },
        { line: lineOf(text, '"plan-lra"'), covered: '"plan-lra"' },
      ],
    );
    assert.equal(ds[1]!.message, 'router.plan: names no declared policy (did you mean "plan-lora"?); declared policies: "tool-lora", "plan-lora"');
    assert.equal(ds[0]!.message, 'policies.plan-lora: policy "plan-lora" is not used: no agent in "router" maps to it');
  });

  test('an invalid id as a record key, on the key', () => {
    const text = edit(team, '"tool-lora": {', '"1tool": {');
    const d = service.diagnose(text).find((x) => x.message.includes('invalid name'));
    assert.ok(d);
    assert.deepEqual(at(text, d), { line: lineOf(text, '"1tool"'), covered: '"1tool"' });
  });

  test('a rule failing on a default, on the nearest key the file has', () => {
    const text = edit(edit(team, '    "validateEvery": 20,\n', ''), '"steps": 40,\n    "validationEpisodes"', '"steps": 6,\n    "validationEpisodes"');
    const ds = service.diagnose(text);
    const d = ds.find((x) => x.message.startsWith('training.validateEvery'));
    assert.ok(d, JSON.stringify(ds));
    assert.deepEqual(at(text, d), { line: lineOf(text, '"training"'), covered: '"training"' });
    assert.equal(d.message, 'training.validateEvery (not set, so its default applies): must be at most training.steps');
  });

  test('UTF-16 columns after text outside the BMP', () => {
    const ds = service.diagnose('{"name": "🚀 run", "seed": -1}');
    const seed = ds.find((d) => d.message.startsWith('seed:'));
    // `{"name": "🚀 run", "seed": ` is 27 UTF-16 units: the rocket counts 2.
    assert.deepEqual(seed?.range, { start: { line: 0, character: 27 }, end: { line: 0, character: 29 } });
  });
});

describe('diagnostics: the environment', () => {
  test('an unknown agent, on the router key, and the agent left without a policy', () => {
    const text = edit(team, '"plan": "plan-lora"', '"planner": "plan-lora"');
    const ds = service.diagnose(text);
    assert.deepEqual(
      ds.map((d) => [at(text, d), d.code]),
      [
        [{ line: lineOf(text, '"router"'), covered: '"router"' }, 'environment'],
        [{ line: lineOf(text, '"planner"'), covered: '"planner"' }, 'environment'],
      ],
    );
    assert.equal(ds[0]!.message, 'router: no policy for agent "plan" of plan-path (its agents: "tool", "plan")');
    assert.equal(ds[1]!.message, 'router.planner: unknown agent "planner"; plan-path has agents "tool", "plan"');
  });

  test('agents follow the options: the single variant has one agent', () => {
    const text = edit(team, '"variant": "team"', '"variant": "single"');
    const ds = service.diagnose(text);
    assert.ok(ds.some((d) => at(text, d).covered === '"L2"' && /L2 is for several agents/.test(d.message)));
    assert.ok(ds.some((d) => at(text, d).covered === '"tool"' && /unknown agent "tool"; plan-path has agents "solo"/.test(d.message)));
  });

  test('a bad option value, on the value, even while the rest of the config is invalid', () => {
    const text = edit(edit(team, '"size": 5', '"size": 50'), '"branches": 4', '"branches": 1');
    const ds = service.diagnose(text);
    assert.deepEqual(
      ds.map((d) => at(text, d).covered),
      ['50', '1'],
    );
    assert.equal(ds[0]!.message, 'env.options.size: must be <= 16 (plan-path option)');
  });

  test('an unknown option, on its key', () => {
    const text = edit(team, '"size": 5', '"sise": 5');
    const d = only(text);
    assert.deepEqual(at(text, d), { line: lineOf(text, '"sise"'), covered: '"sise"' });
    assert.match(d.message, /^env\.options\.sise: unknown key "sise" \(did you mean "size"\?\)/);
  });
});

describe('diagnostics: warnings and information', () => {
  test('a duplicate key warns at the occurrence JSON.parse ignores', () => {
    const text = edit(team, '"lr": 0.003,', '"lr": 0.01,\n    "lr": 0.003,');
    const d = only(text);
    assert.equal(d.severity, 2);
    assert.equal(d.code, 'duplicate-key');
    assert.deepEqual(at(text, d), { line: lineOf(text, '"lr": 0.01,'), covered: '"lr"' });
  });

  test('a LoRA-sized learning rate on a policy that trains all its weights', () => {
    const l1 = readFileSync(join(fixtures, 'l1-shared.json'), 'utf8');
    const text = edit(l1, '"lr": 0.0001', '"lr": 0.001');
    const d = only(text);
    assert.equal(d.severity, 2);
    assert.deepEqual(at(text, d).covered, '0.001');
    assert.match(d.message, /^optimizer\.lr: 0\.001 is a learning rate for LoRA adapters, but policy "\w+" trains all its weights/);
  });

  test('warm-start settings while the warm start is off have no effect', () => {
    const text = edit(team, '"enabled": true', '"enabled": false');
    const ds = service.diagnose(text);
    assert.deepEqual(ds.map((d) => [d.severity, at(text, d).covered]), [[3, '1500'], [3, '300'], [3, '32'], [3, '0.003']]);
    assert.equal(ds[0]!.message, 'warmStart.demonstrations: has no effect: warmStart.enabled is false');
  });

  test('DAgger episodes without rounds, and curriculum candidates of the uniform curriculum, have no effect', () => {
    const text = edit(edit(team, '"batchSize": 32,', '"batchSize": 32,\n    "dagger": { "rounds": 0, "episodes": 500 },'), '"envsPerStep": 16,', '"envsPerStep": 16,\n    "curriculum": { "kind": "uniform", "candidates": 64 },');
    const ds = service.diagnose(text);
    assert.deepEqual(ds.map((d) => [d.severity, at(text, d).covered, d.message]), [
      [3, '64', "algorithm.curriculum.candidates: has no effect: only the 'greedy-failures' curriculum screens candidates"],
      [3, '500', 'warmStart.dagger.episodes: has no effect: warmStart.dagger.rounds is 0'],
    ]);
  });

  test('missing proposals without flawed ones have no effect', () => {
    const text = edit(team, '"batchSize": 32,', '"batchSize": 32,\n    "proposals": { "flawedEvery": 0, "missingEvery": 2 },');
    const ds = service.diagnose(text);
    assert.deepEqual(ds.map((d) => [d.severity, at(text, d).covered, d.message]), [
      [3, '2', 'warmStart.proposals.missingEvery: has no effect: warmStart.proposals.flawedEvery is 0 (missing proposals replace some of the flawed ones)'],
    ]);
    assert.deepEqual(service.diagnose(edit(team, '"batchSize": 32,', '"batchSize": 32,\n    "proposals": { "flawedEvery": 1, "missingEvery": 2 },')), []);
  });
});
