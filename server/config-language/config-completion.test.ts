// Completion in config files: property names from the JSON Schema (present ones left out, required
// ones first, snippets, descriptions), values from enums and booleans, union branches picked by the
// document, env options from the environment's schema, and ids declared in the same file.
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { describe, test } from 'node:test';
import { fileURLToPath } from 'node:url';
import type { CompletionItem, CompletionList } from '../protocol/lsp.ts';
import { ConfigLanguageService } from './config-language-service.ts';
import { LineIndex } from './line-index.ts';

const team = readFileSync(fileURLToPath(new URL('./fixtures/team.json', import.meta.url)), 'utf8');
const service = new ConfigLanguageService();
const cursor = '¦';

/** Completion at the `¦` in `marked`, plus the text without the marker. */
function completeAt(marked: string): { list: CompletionList; text: string } {
  const i = marked.indexOf(cursor);
  assert.ok(i >= 0 && marked.indexOf(cursor, i + 1) < 0, 'exactly one cursor marker');
  const text = marked.slice(0, i) + marked.slice(i + 1);
  return { list: service.complete(text, new LineIndex(text).positionAt(i)), text };
}

function edit(text: string, from: string, to: string): string {
  assert.ok(text.includes(from), `test text lacks ${JSON.stringify(from)}`);
  return text.replace(from, to);
}

const labels = (list: CompletionList): string[] => list.items.map((i) => i.label);
const item = (list: CompletionList, label: string): CompletionItem => {
  const found = list.items.find((i) => i.label === label);
  assert.ok(found, `no item ${label} in ${JSON.stringify(labels(list))}`);
  return found;
};

/** The text an item's edit replaces. */
function replaced(text: string, it: CompletionItem): string {
  assert.ok(it.textEdit);
  const index = new LineIndex(text);
  return text.slice(index.offsetAt(it.textEdit.range.start), index.offsetAt(it.textEdit.range.end));
}

describe('completion: property names', () => {
  test('offers the properties the object lacks, with snippets and descriptions', () => {
    const { list, text } = completeAt(edit(team, '"branches": 4,', '"branches": 4,\n    ¦'));
    assert.deepEqual(labels(list), ['topP', 'topK', 'distinctBranches', 'advantageNorm', 'invalidAdvantage', 'gamma', 'gaeLambda', 'valueClip', 'valueLr', 'clipEps', 'entropyCoef', 'ppoEpochs', 'microBatch', 'curriculum']);
    const topP = item(list, 'topP');
    assert.equal(topP.kind, 10);
    assert.equal(topP.insertTextFormat, 2);
    // The next line holds another property, so the snippet brings its comma.
    assert.equal(topP.textEdit?.newText, '"topP": ${1:1},');
    assert.equal(replaced(text, topP), '');
    assert.equal(topP.detail, 'optional · number, > 0, ≤ 1');
    assert.match(topP.documentation?.value ?? '', /Nucleus sampling/);
    assert.equal(topP.documentation?.kind, 'markdown');
  });

  test('replaces a partly typed key and filters on it with its quote', () => {
    const { list, text } = completeAt(edit(team, '"branches": 4,', '"branches": 4, "to¦'));
    const it = item(list, 'topP');
    assert.equal(replaced(text, it), '"to');
    assert.equal(it.filterText, '"topP"');
  });

  test('a new key typed above existing ones (VS Code closed its quote) does not offer them again', () => {
    // The parser reads `""` as a key without a colon and the next key as its value, so the keys
    // must come from the text without the one being typed.
    const { list } = completeAt(edit(team, '"training": {', '"training": {\n    "¦",'));
    const offered = labels(list);
    assert.ok(offered.length > 0);
    for (const present of Object.keys(JSON.parse(team).training)) assert.ok(!offered.includes(present), `${present} offered again: ${offered.join(', ')}`);
    const { list: unclosed } = completeAt(edit(team, '"training": {', '"training": {\n    "¦"'));
    for (const present of Object.keys(JSON.parse(team).training)) assert.ok(!labels(unclosed).includes(present), `${present} offered again: ${labels(unclosed).join(', ')}`);
  });

  test('over an existing key, replaces only the name and keeps its value', () => {
    const { list, text } = completeAt(edit(team, '"branches": 4', '"bran¦ches": 4'));
    const it = item(list, 'branches');
    assert.equal(replaced(text, it), '"branches"');
    assert.equal(it.textEdit?.newText, '"branches"');
    assert.equal(it.insertTextFormat, 1);
  });

  test('at the root: required properties first, $schema escaped in the snippet, enums as choices', () => {
    const { list } = completeAt('{¦}');
    const sorted = [...list.items].sort((a, b) => (a.sortText ?? '').localeCompare(b.sortText ?? '')).map((i) => i.label);
    assert.deepEqual(sorted.slice(0, 5), ['name', 'env', 'specialization', 'policies', 'router']);
    assert.equal(item(list, '$schema').textEdit?.newText, '"\\$schema": "$1"');
    assert.equal(item(list, 'specialization').textEdit?.newText, '"specialization": ${1|"L0","L1","L2","L3"|}');
    assert.equal(item(list, 'env').textEdit?.newText, '"env": {$1}');
    assert.equal(item(list, 'name').detail, 'required · string, 1 to 200 characters');
  });

  test('env.options complete from the chosen environment\'s options schema', () => {
    const { list } = completeAt(edit(team, '"size": 5,', '"size": 5, ¦'));
    assert.deepEqual(labels(list), ['wallRatio', 'verdictToPlanner', 'planAccepts', 'reportToTool']);
    assert.match(item(list, 'wallRatio').documentation?.value ?? '', /Probability that a cell is a wall/);
    const tic = completeAt('{"env": {"name": "tic-tac-toe", "options": {¦}}}').list;
    assert.deepEqual(labels(tic), ['openingMoves', 'reward', 'randomOpening', 'perfectOpponent', 'solutionTies']);
  });

  test('a union picks its branch by the document: cosine fields only for a cosine schedule', () => {
    assert.deepEqual(labels(completeAt('{"optimizer": {"schedule": {"kind": "cosine", ¦}}}').list), ['warmupSteps', 'totalSteps', 'minLrRatio']);
    assert.deepEqual(labels(completeAt('{"optimizer": {"schedule": {"kind": "constant", ¦}}}').list), []);
  });

  test('router keys complete to the environment\'s agents that have no policy yet', () => {
    const { list } = completeAt(edit(team, '"plan": "plan-lora"', '¦'));
    assert.deepEqual(labels(list), ['plan']);
    assert.equal(item(list, 'plan').textEdit?.newText, '"plan": "${1|tool-lora,plan-lora|}"');
    assert.equal(item(list, 'plan').detail, 'agent of plan-path');
  });
});

describe('completion: values', () => {
  test('enum members, replacing the value being typed', () => {
    const { list, text } = completeAt(edit(team, '"name": "at-grpo"', '"name": "at¦"'));
    assert.deepEqual(labels(list), ['"at-grpo"', '"grpo"', '"ppo"']);
    const it = item(list, '"at-grpo"');
    assert.equal(replaced(text, it), '"at"');
    assert.equal(it.textEdit?.newText, '"at-grpo"');
    assert.match(it.documentation?.value ?? '', /tree/);
  });

  test('enum members after the colon, with the comma the next property needs', () => {
    const { list } = completeAt(edit(team, '"name": "at-grpo",', '"name": ¦'));
    assert.equal(item(list, '"grpo"').textEdit?.newText, '"grpo",');
    assert.equal(item(list, '"grpo"').filterText, 'grpo');
  });

  test('booleans', () => {
    const { list } = completeAt(edit(team, '"dropZeroVariance": true', '"dropZeroVariance": ¦'));
    assert.deepEqual(labels(list), ['true', 'false']);
  });

  test('environment names, and an option\'s constants', () => {
    assert.deepEqual(labels(completeAt('{"env": {"name": ¦}}').list), ['"plan-path"', '"sudoku"', '"sokoban"', '"tic-tac-toe"', '"math"', '"code"', '"hanabi"']);
    assert.deepEqual(labels(completeAt('{"env": {"name": "sudoku", "options": {"size": ¦}}}').list), ['4', '9']);
  });

  test('router values complete to the declared policies', () => {
    const { list, text } = completeAt(edit(team, '"plan": "plan-lora"', '"plan": "pl¦"'));
    assert.deepEqual(labels(list), ['"tool-lora"', '"plan-lora"']);
    assert.equal(item(list, '"plan-lora"').detail, 'policy on model base, LoRA rank 16');
    assert.equal(replaced(text, item(list, '"plan-lora"')), '"pl"');
  });

  test('a policy\'s model completes to the declared models, or the default one', () => {
    const { list } = completeAt(edit(team, '"model": "base",\n      "lora": {\n        "rank": 16,\n        "alpha": 32\n      }\n    },\n    "plan', '"model": ¦,\n      "lora": {\n        "rank": 16,\n        "alpha": 32\n      }\n    },\n    "plan'));
    assert.deepEqual(labels(list), ['"base"']);
    assert.equal(item(list, '"base"').detail, 'model, preset default');
    const implicit = completeAt('{"policies": {"p": {"model": "¦"}}}').list;
    assert.deepEqual(labels(implicit), ['"base"'], 'without "models" the default base model exists');
  });
});
