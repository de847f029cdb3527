/**
 * The per-kernel profiles of `profile-both.ts`: which runs make a Troupe step, how node time is
 * tallied, PyTorch's reply read into the same terms; and the bench's CI-sized form end to end (a tiny
 * model, Troupe and, where this machine's python3 has torch, PyTorch).
 */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, test } from 'node:test';
import { fileURLToPath } from 'node:url';
import type { ProfileEvent } from '../gpu/profile-summary.ts';
import { benchPython } from './bench-util.ts';
import { graphOfSession, lastPass, sessionOfFile, sideBySide, splitTrace, torchGemmOps, torchStep, troupeStep, type StepProfile } from './kernel-profile.ts';

const run = (ts: number, dur: number): ProfileEvent => ({ cat: 'Session', name: 'model_run', ts, dur });
const node = (name: string, op: string, ts: number, dur: number, shapes: number[][] = []): ProfileEvent => ({
  cat: 'Node',
  name: `${name}_kernel_time`,
  ts,
  dur,
  args: { op_name: op, input_type_shape: shapes.map((s) => ({ float: s })) },
});

test('graphOfSession reads the graph from a session trace file name, shared scopes and truncation included', () => {
  assert.equal(graphOfSession(sessionOfFile('/t/default_decode_2026-11-28_04-20-01.json')), 'decode');
  assert.equal(graphOfSession(sessionOfFile('default-fused_decode-fp32_2026-11-28_04-20-01_2.json')), 'decode-fp32');
  // A LoRA policy's shared session, its name cut to the first 40 and last 79 characters.
  assert.equal(graphOfSession('shared_base_qwen2.5-0.5b_lora_rank_8_alpha_16_targets_q_k_v_o_gate_up_down_kl_true_entropy_true_train-ppo-shared'), 'train-ppo-shared');
  assert.equal(graphOfSession('qwen2.5-0.5b_adamw'), 'adamw');
});

test('lastPass takes the last of equal passes, less its first runs, and refuses uneven ones', () => {
  const t = splitTrace('s', [run(50, 5), run(0, 10), run(20, 10), run(40, 5), run(70, 5), run(60, 5)]);
  assert.deepEqual(lastPass(t, 2).map((r) => r.ts), [50, 60, 70]);
  assert.deepEqual(lastPass(t, 3, 1).map((r) => r.ts), [70]);
  assert.throws(() => lastPass(t, 4), /6 runs do not split into 4 equal passes/);
  assert.throws(() => lastPass(t, 6, 1), /none left/);
});

test('troupeStep tallies the picked runs\' nodes per step, GEMM share, and the time outside them', () => {
  const a = splitTrace('train', [run(0, 100), run(200, 100), node('mm0', 'MatMul', 10, 30, [[4, 8], [8, 16]]), node('add0', 'Add', 50, 10), node('mm1', 'MatMul', 210, 40, [[4, 8], [8, 16]]), node('add1', 'Add', 260, 20)]);
  const b = splitTrace('adamw', [run(0, 10), run(1000, 10), node('opt0', 'Mul', 2, 5), node('opt1', 'Mul', 1002, 6)]);
  // The last of two updates: each session's second run.
  const s = troupeStep([{ trace: a, runs: lastPass(a, 2) }, { trace: b, runs: lastPass(b, 2) }], 1, 100);
  assert.equal(s.opMs, 0.066);
  assert.equal(s.calls, 3);
  assert.ok(Math.abs(s.outsideMs - (100 - 0.066)) < 1e-9);
  assert.deepEqual(s.ops.map((r) => [r.op, r.ms, r.count]), [['MatMul', 0.04, 1], ['Add', 0.02, 1], ['Mul', 0.006, 1]]);
  assert.ok(Math.abs(s.gemmShare - 40 / 66) < 1e-9);
  assert.equal(s.shapes[0]!.op, 'MatMul [4,8]x[8,16]');
  // Two decode steps: per-step figures are halves.
  const d = troupeStep([{ trace: a, runs: a.runs }], 2, 5);
  assert.equal(d.calls, 2);
  assert.deepEqual(d.ops.map((r) => [r.op, r.ms, r.count]), [['MatMul', 0.035, 1], ['Add', 0.015, 1]]);
});

test('torchStep reads torch_bench.py\'s profile: shares as given, GEMM share from the BLAS ops, outside = wall − self', () => {
  const s = torchStep({
    steps: 2,
    wallMs: 10,
    selfMs: 8,
    ops: [{ op: 'aten::addmm', selfMs: 4, count: 3, share: 0.5 }, { op: 'aten::_log_softmax', selfMs: 2, count: 1, share: 0.25 }, { op: 'aten::bmm', selfMs: 1, count: 2, share: 0.125 }],
    shapes: [{ op: 'aten::addmm', inputShapes: [[512], [512, 896], [896, 512], [], []], selfMs: 4, count: 3, share: 0.5 }],
  });
  assert.equal(s.outsideMs, 2);
  assert.equal(s.gemmShare, 0.625);
  assert.equal(s.calls, 6);
  assert.equal(s.shapes[0]!.op, 'aten::addmm [512]x[512,896]x[896,512]');
  assert.match(sideBySide('t', s, s, 2), /\| 1 \| aten::addmm \| 50\.0% \| 4\.000 \| 3 \| aten::addmm/);
});

const root = fileURLToPath(new URL('../..', import.meta.url));
const dir = mkdtempSync(join(tmpdir(), 'troupe-profile-both-'));
after(() => rmSync(dir, { recursive: true, force: true }));
const torch = spawnSync(benchPython(), ['-c', 'import torch'], { encoding: 'utf8' }).status === 0;

test(`profile-both's tiny form: a train step and two decoders profiled${torch ? ', beside PyTorch' : ' (PyTorch side skipped: python3 has no torch)'}`, () => {
  const out = join(dir, 'profile-both.json');
  const r = spawnSync(process.execPath, ['--import', 'tsx', 'bench/engine/profile-both.ts'], {
    cwd: root,
    env: { ...process.env, PROFILE_BOTH_SHAPES: 'tiny', PROFILE_BOTH_THREADS: '1', PROFILE_BOTH_OUT: out, PROFILE_BOTH_TRACES: join(dir, 'traces'), PROFILE_BOTH_SIDES: torch ? 'troupe,pytorch' : 'troupe' },
    encoding: 'utf8',
    timeout: 300_000,
  });
  assert.equal(r.status, 0, `profile-both.ts exited ${r.status ?? r.signal}:\n${(r.stderr ?? '').slice(-2000)}`);
  const j = JSON.parse(readFileSync(out, 'utf8')) as { workloads: { tiny: { train: { troupe: StepProfile; pytorch: StepProfile | null }; decode: Record<string, { troupe: StepProfile; pytorch: StepProfile | null }> } } };
  const w = j.workloads.tiny;
  const sane = (what: string, s: StepProfile, gemm: string | readonly string[]) => {
    assert.ok(s.calls > 0 && s.opMs > 0 && s.opMs <= s.stepMs, `${what}: ${s.calls} calls, ops ${s.opMs} ms of a ${s.stepMs} ms step`);
    const shares = s.ops.reduce((a, o) => a + o.share, 0);
    assert.ok(shares > 0.5 && shares <= 1 + 1e-9, `${what}: top ops' shares add to ${shares}`);
    assert.ok(s.ops.some((o) => (typeof gemm === 'string' ? o.op === gemm : gemm.includes(o.op))), `${what}: no ${String(gemm)} in ${s.ops.map((o) => o.op).join(', ')}`);
  };
  sane('Troupe train', w.train.troupe, 'MatMul');
  // The tiny train step runs 4 × 16 tokens in micro-batches of 32: two train-graph runs, one AdamW.
  assert.ok(w.train.troupe.ops.some((o) => o.op === 'MatMul' && o.count > 0));
  assert.deepEqual(Object.keys(w.decode), ['plain', 'int4']);
  sane('Troupe plain decode', w.decode['plain']!.troupe, 'MatMul');
  sane('Troupe int4 decode', w.decode['int4']!.troupe, 'MatMulNBits');
  assert.equal(w.decode['plain']!.troupe.steps, 5, 'a generation of 6 new tokens: 5 single-token steps after the prefill');
  if (torch) {
    sane('PyTorch train', w.train.pytorch!, torchGemmOps);
    sane('PyTorch decode', w.decode['plain']!.pytorch!, torchGemmOps);
    assert.equal(w.decode['plain']!.pytorch!.steps, 5);
  }
});
