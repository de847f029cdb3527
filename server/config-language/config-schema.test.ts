// Navigating a JSON Schema by path: $ref (with sibling keys), allOf, anyOf/oneOf branches ruled out
// by a constant the document contradicts, record entries inheriting the record's description, and
// the config schema's env.options replaced by the chosen environment's options schema.
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { allowedValues, first, propertiesOf, schemaAt, schemaAtIn, typesOf } from './config-schema.ts';
import { describeFacets, typeLabel } from './schema-docs.ts';

const schema = {
  definitions: {
    count: { type: 'integer', minimum: 1, description: 'How many.' },
    shape: {
      oneOf: [
        { type: 'object', properties: { kind: { const: 'circle' }, radius: { type: 'number', exclusiveMinimum: 0 } } },
        { type: 'object', properties: { kind: { const: 'square' }, side: { type: 'number' } } },
      ],
    },
  },
  type: 'object',
  properties: {
    n: { $ref: '#/definitions/count', default: 3 },
    shape: { $ref: '#/definitions/shape', description: 'The shape.' },
    both: { allOf: [{ properties: { a: { type: 'string' } } }, { properties: { b: { type: 'boolean' } } }] },
    byId: { type: 'object', description: 'Things by id.', additionalProperties: { type: 'object', properties: { x: { type: 'number' } } } },
  },
};

describe('JSON Schema navigation', () => {
  test('$ref resolves, keeping the keys beside it', () => {
    const facets = schemaAtIn(schema, {}, ['n']);
    assert.equal(first(facets, 'description'), 'How many.');
    assert.equal(first(facets, 'default'), 3);
    assert.equal(typeLabel(facets), 'integer, ≥ 1');
  });

  test('oneOf branches are picked by the constant the document sets', () => {
    const names = (value: unknown): string[] => propertiesOf(schemaAtIn(schema, value, ['shape'])).map((p) => p.name);
    assert.deepEqual(names({ shape: { kind: 'square' } }), ['kind', 'side']);
    assert.deepEqual(names({ shape: { kind: 'circle' } }), ['kind', 'radius']);
    assert.deepEqual(names({ shape: {} }), ['kind', 'radius', 'side'], 'undecided: every branch');
    assert.deepEqual(allowedValues(schemaAtIn(schema, {}, ['shape', 'kind'])), ['circle', 'square']);
    assert.equal(first(schemaAtIn(schema, {}, ['shape']), 'description'), 'The shape.');
  });

  test('allOf merges its branches', () => {
    assert.deepEqual(propertiesOf(schemaAtIn(schema, {}, ['both'])).map((p) => p.name), ['a', 'b']);
  });

  test('record entries take the record\'s description; unknown keys have no schema', () => {
    const entry = schemaAtIn(schema, {}, ['byId', 'anything']);
    assert.equal(first(entry, 'description'), 'Things by id.');
    assert.deepEqual(typesOf(schemaAtIn(schema, {}, ['byId', 'anything', 'x'])), ['number']);
    assert.deepEqual(schemaAtIn(schema, {}, ['nope']), []);
    assert.equal(describeFacets('nope', []), undefined);
  });

  test('the config schema: env.options follow env.name', () => {
    const options = (env: string): string[] => propertiesOf(schemaAt({ env: { name: env } }, ['env', 'options'])).map((p) => p.name);
    assert.deepEqual(options('tic-tac-toe'), ['openingMoves', 'reward', 'randomOpening', 'perfectOpponent', 'solutionTies']);
    assert.ok(options('sudoku').includes('emptyCells'));
    assert.deepEqual(propertiesOf(schemaAt({ env: { name: 'nope' } }, ['env', 'options'])), [], 'an unknown environment: free-form options');
  });
});
