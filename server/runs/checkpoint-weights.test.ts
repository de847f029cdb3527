/**
 * `--checkpoint` choices and how `best` is found in a run folder (checkpoints/best.json): the
 * folders are written by hand here; trainer.ort.test.ts checks what a real run writes.
 */
import assert from 'node:assert/strict';
import { mkdir, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { bestFile, stepDir, writeBest } from '../rl/run-checkpoint.ts';
import { writeSafetensorsFile } from '../models/safetensors.ts';
import type { ResolvedExperiment } from '../rl/experiment.ts';
import { findRunCheckpoint, parseCheckpointChoice, policyTensors } from './checkpoint-weights.ts';

test('--checkpoint parses initial, latest, best and step numbers (0 is initial)', () => {
  assert.deepEqual(parseCheckpointChoice('initial'), { kind: 'initial' });
  assert.deepEqual(parseCheckpointChoice('latest'), { kind: 'latest' });
  assert.deepEqual(parseCheckpointChoice('best'), { kind: 'best' });
  assert.deepEqual(parseCheckpointChoice('40'), { kind: 'step', step: 40 });
  assert.deepEqual(parseCheckpointChoice('0'), { kind: 'initial' });
  for (const bad of ['Best', '-1', '04', '1.5', '']) assert.equal(parseCheckpointChoice(bad), null, bad);
});

test('best follows best.json to its step checkpoint, and says what is missing', async () => {
  const run = await mkdtemp(join(tmpdir(), 'troupe-best-'));
  try {
    await assert.rejects(findRunCheckpoint(run, { kind: 'best' }), /has no best validation \(.*best\.json is missing/);
    // Step 0 is the warm-started team, rebuilt like 'initial' when its checkpoint is absent.
    await writeBest(run, { step: 0, validationSuccess: 0.5, episodes: 8 });
    assert.deepEqual(await findRunCheckpoint(run, { kind: 'best' }), { label: 'best', step: 0, dir: null });
    await writeBest(run, { step: 20, validationSuccess: 0.75, episodes: 8 });
    await assert.rejects(findRunCheckpoint(run, { kind: 'best' }), /has no checkpoint of step 20; available: initial, latest, best/);
    await mkdir(stepDir(run, 20), { recursive: true });
    await writeFile(join(stepDir(run, 20), 'state.json'), JSON.stringify({ step: 20, policies: {} }));
    assert.deepEqual(await findRunCheckpoint(run, { kind: 'best' }), { label: 'best', step: 20, dir: stepDir(run, 20) });
    // A damaged pointer is named, with what is wrong in it.
    await writeFile(bestFile(run), JSON.stringify({ step: -1, validationSuccess: 0.75, episodes: 8 }));
    await assert.rejects(findRunCheckpoint(run, { kind: 'best' }), (e: Error) => e.message.includes('best.json') && /step: /.test(e.message));
    await writeFile(bestFile(run), '{"step": 2');
    await assert.rejects(findRunCheckpoint(run, { kind: 'best' }), /best\.json: not valid JSON/);
  } finally {
    await rm(run, { recursive: true, force: true });
  }
});

test("a step checkpoint's policy file zero-filled after writing fails naming the file (troupe eval --checkpoint N)", async () => {
  const run = await mkdtemp(join(tmpdir(), 'troupe-sum-'));
  try {
    const dir = stepDir(run, 6);
    await mkdir(dir, { recursive: true });
    const path = join(dir, 'tool-lora.safetensors');
    await writeSafetensorsFile(path, new Map([['layers.0.attn.q.lora_A', { shape: [2, 3], data: new Float32Array([1, 2, 3, 4, 5, 6]) }]]), { policy: 'tool-lora', step: '6' });
    // Only the fields policyTensors reads for a checkpoint folder.
    const exp = { policies: new Map([['tool-lora', { model: 'base', lora: { rank: 2, alpha: 2, targets: ['q'] } }]]), models: new Map([['base', {}]]) } as unknown as ResolvedExperiment;
    const ck = { label: 'step 6', step: 6, dir };
    assert.deepEqual([...(await policyTensors(exp, ck, new Map())).get('tool-lora')!.get('layers.0.attn.q.lora_A')!], [1, 2, 3, 4, 5, 6]);
    const bytes = new Uint8Array(await readFile(path));
    bytes.fill(0, bytes.byteLength - 24);
    await writeFile(path, bytes);
    await assert.rejects(policyTensors(exp, ck, new Map()), (e: Error) => e.name === 'ChecksumMismatchError' && e.message.startsWith(`${path}: checksum mismatch`));
  } finally {
    await rm(run, { recursive: true, force: true });
  }
});
