/**
 * The engine on WebGPU against the engine on CPU: decode, score, a LoRA PPO train step and
 * AdamW give the same numbers (relative error ≤ 3e-6: max |gpu − cpu| / max |cpu| per tensor).
 *
 * Runs wherever Dawn finds an adapter — a real GPU, or in CI Mesa's lavapipe (software Vulkan),
 * which `test/gpu/setup-webgpu.sh` installs — and skips, naming what is missing, elsewhere.
 */
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { closeSync, mkdtempSync, openSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { Engine } from '../runtime/engine.ts';
import { initParameters } from './init.ts';
import { initLoraParameters, parseLoraConfig } from './lora.ts';
import { parseModelConfig, type ModelConfig } from './model-config.ts';
import { optimizerSchema } from './optimizer.ts';
import { Policy } from './policy.ts';
import type { TrainSequence } from './train-batch.ts';

const TOLERANCE = 3e-6;

const cpu = await Engine.start({ executionProvider: 'cpu', threads: 1, log: () => {} });
const gpu = await Engine.start({ executionProvider: 'webgpu', threads: 1, log: () => {} });
const skip = gpu.provider === 'webgpu' ? false : `no WebGPU adapter on this machine (${gpu.providerReason}); bash test/gpu/setup-webgpu.sh installs lavapipe`;
after(async () => {
  await cpu.close();
  await gpu.close();
});

// GQA (4 query heads over 2 key heads), attention biases, untied head: every op of the model.
const config: ModelConfig = parseModelConfig({ vocabSize: 48, hiddenSize: 64, numLayers: 2, numHeads: 4, numKvHeads: 2, intermediateSize: 128, tieEmbeddings: false, attentionBias: true });
const loraConfig = parseLoraConfig({ rank: 4, alpha: 8 });
const lora = { rank: loraConfig.rank, alpha: 8, targets: loraConfig.targets };
// A large ε keeps Adam's first step proportional to the gradient: with ε ≪ |g| every step is
// ±lr, and float noise on a gradient that is zero in exact arithmetic would decide its sign.
const optimizer = optimizerSchema.parse({ lr: 1e-2, weightDecay: 0.01, eps: 1e-2 });

/** max |a − b| / max |b|: the error relative to the tensor's scale. */
function relErr(a: ArrayLike<number>, b: ArrayLike<number>): number {
  assert.equal(a.length, b.length, 'lengths differ');
  let diff = 0;
  let scale = 0;
  for (let i = 0; i < b.length; i++) {
    diff = Math.max(diff, Math.abs(a[i]! - b[i]!));
    scale = Math.max(scale, Math.abs(b[i]!));
  }
  return scale === 0 ? diff : diff / scale;
}

function assertClose(what: string, gpuValues: ArrayLike<number>, cpuValues: ArrayLike<number>): void {
  const e = relErr(gpuValues, cpuValues);
  assert.ok(e <= TOLERANCE, `${what}: relative error ${e.toExponential(2)} > ${TOLERANCE}`);
}

/**
 * The step AdamW took (w − w0) on both, within TOLERANCE of its largest magnitude once the float32
 * rounding of w itself is allowed for: a step far smaller than the weight cannot be recovered
 * from the rounded weight more exactly than one ulp of the weight (|w|·2⁻²³ bounds it).
 */
function assertStepClose(what: string, gpuW: Float32Array, cpuW: Float32Array, w0: Float32Array): void {
  let scale = 0;
  let excess = 0;
  for (let i = 0; i < w0.length; i++) {
    scale = Math.max(scale, Math.abs(cpuW[i]! - w0[i]!));
    excess = Math.max(excess, Math.abs(gpuW[i]! - cpuW[i]!) - Math.abs(cpuW[i]!) * 2 ** -23);
  }
  assert.ok(excess <= TOLERANCE * scale, `${what}: the steps differ by ${excess.toExponential(2)} beyond rounding, ${(excess / scale).toExponential(2)} of the step`);
}

function adapter(): Map<string, Float32Array> {
  const a = initLoraParameters(config, loraConfig, 3);
  // PEFT starts B at zero, which makes A's gradient zero; a random B exercises both.
  for (const [name, v] of a) if (name.endsWith('lora_B')) v.forEach((_, i) => (v[i] = Math.sin(i + name.length) * 0.1));
  return a;
}

/** The same LoRA policy (same weights, same adapter) in both engines. */
async function pair(id: string): Promise<[Policy, Policy]> {
  const weights = initParameters(config, 1);
  const a = adapter();
  const make = (engine: Engine) => Policy.create(engine, { id, config, weights, lora, adapter: a, optimizer, kl: true, entropy: true });
  return [await make(cpu), await make(gpu)];
}

// Deterministic pseudo-random token rows of different lengths (right-padded in the batch).
const seqs: TrainSequence[] = [9, 14, 6, 12].map((n, b) => ({
  tokens: Int32Array.from({ length: n }, (_, i) => 1 + ((b * 31 + i * 17 + i * i) % (config.vocabSize - 1))),
  promptLength: 2 + b,
}));
const prompts = seqs.map((s) => s.tokens.slice(0, s.promptLength));

describe('WebGPU equals CPU', { skip }, () => {
  test('decode: KV-cache generation gives the same tokens and log-probs', async () => {
    const [c, g] = await pair('decode');
    for (const temperature of [0, 0.8]) {
      const o = { maxNewTokens: 10, sampling: { temperature, topP: 1, topK: 0 }, seed: 5, stopTokens: [], padToken: 0 };
      const rc = await c.generate(prompts, o);
      const rg = await g.generate(prompts, o);
      assert.deepEqual(rg.tokens, rc.tokens, `temperature ${temperature}: tokens`);
      rc.logprobs.forEach((row, b) => assertClose(`temperature ${temperature} row ${b} log-probs`, rg.logprobs[b]!, row));
    }
  });

  // On WebGPU the cache stays on the GPU (device-kv-decoder.ts, 'device'): a shared prompt is prefilled once
  // and its cache rows gathered on the device, and finished rows leave the batch by a gather too.
  test('decode: shared prompts and rows that stop early (device-side gathers) match the CPU', async () => {
    const [c, g] = await pair('decode-shared');
    const shared = [0, 0, 1, 1, 2, 2, 3, 3].map((i) => prompts[i]!);
    const o = { maxNewTokens: 12, sampling: { temperature: 0.8, topP: 1, topK: 0 }, seed: 11, stopTokens: [3, 7, 11, 19, 23, 29, 31], padToken: 0 };
    const rc = await c.generate(shared, o);
    const stopped = rc.tokens.filter((t, b) => rc.finish[b] === 'stop' && t.length < o.maxNewTokens).length;
    assert.ok(stopped >= 2 && stopped < shared.length, `the case must retire some rows but not all (${stopped} of ${shared.length} stopped early)`);
    const rg = await g.generate(shared, o);
    assert.deepEqual(rg.tokens, rc.tokens, 'tokens');
    assert.deepEqual(rg.finish, rc.finish, 'finish reasons');
    rc.logprobs.forEach((row, b) => assertClose(`row ${b} log-probs`, rg.logprobs[b]!, row));
  });

  // A cancelled row (GenerateRequest.cancel) leaves the device cache at once by the same gather.
  test('decode: cancelled rows leave the device cache; the other rows match the CPU', async () => {
    const [c, g] = await pair('decode-cancel');
    const shared = [0, 0, 1, 1, 2, 2, 3, 3].map((i) => prompts[i]!);
    const o = { maxNewTokens: 12, sampling: { temperature: 0.8, topP: 1, topK: 0 }, seed: 11, stopTokens: [], padToken: 0 };
    const rc = await c.generate(shared, o);
    const flags = new Int32Array(new SharedArrayBuffer(4 * shared.length));
    [1, 4, 5].forEach((b) => (flags[b] = 1));
    const rg = await g.generate(shared, { ...o, cancel: flags });
    assert.deepEqual(rg.cancelled, [1, 4, 5]);
    rg.tokens.forEach((t, b) => {
      if ([1, 4, 5].includes(b)) assert.equal(t.length, 0, `row ${b}`);
      else {
        assert.deepEqual(t, rc.tokens[b], `row ${b}: tokens`);
        assertClose(`row ${b} log-probs`, rg.logprobs[b]!, rc.logprobs[b]!);
      }
    });
    // Flagged from the first step on: every row stops, each with a prefix of its CPU tokens.
    const live = new Int32Array(new SharedArrayBuffer(4 * shared.length));
    const stopped = await g.generate(shared, { ...o, cancel: live, onStep: (step) => step.n === 2 && live.fill(1) });
    assert.deepEqual(stopped.cancelled, shared.map((_, b) => b));
    stopped.tokens.forEach((t, b) => assert.deepEqual(t, rc.tokens[b]!.subarray(0, t.length), `row ${b}: a prefix`));
  });

  // The rollout decoder's fused graph keeps its cache on the GPU too (decode-graph.ts 'device');
  // its kernels differ from the plain graph's (RotaryEmbedding, SkipSimplifiedLayerNormalization,
  // the LoRA adapter merged into baked weights), so log-probs agree to 1e-4, not 3e-6.
  test('decode: the fused rollout decoder with its cache on the GPU matches the CPU', async () => {
    const weights = initParameters(config, 1);
    const a = adapter();
    const c = await Policy.create(cpu, { id: 'plain-ref', config, weights, lora, adapter: a, optimizer, kl: false, entropy: false });
    const shared = [0, 0, 1, 1, 2, 2, 3, 3].map((i) => prompts[i]!);
    const o = { maxNewTokens: 12, sampling: { temperature: 0.8, topP: 1, topK: 0 }, seed: 11, stopTokens: [3, 7, 11, 19, 23, 29, 31], padToken: 0 };
    const rc = await c.generate(shared, o);
    // Drawn on the host (this small vocabulary's default) and in the graph (device-sampling.ts):
    // the same uniforms give the same tokens as the CPU's host sampler.
    for (const sampleOnDevice of [false, true]) {
      const g = await Policy.create(gpu, { id: `fused-device-${sampleOnDevice}`, config, weights, lora, adapter: a, optimizer, kl: false, entropy: false, decode: { weights: 'fp32', fusedDecode: true, blockSize: 32, sampleOnDevice } });
      const rg = await g.generate(shared, o);
      assert.deepEqual(rg.tokens, rc.tokens, `sampleOnDevice ${sampleOnDevice}: tokens`);
      rc.logprobs.forEach((row, b) => {
        const e = relErr(rg.logprobs[b]!, row);
        assert.ok(e <= 1e-4, `sampleOnDevice ${sampleOnDevice} row ${b} log-probs: relative error ${e.toExponential(2)} > 1e-4`);
      });
      // Greedy decoding on a sampling graph takes its logits to the host.
      const greedy = { ...o, sampling: { temperature: 0, topP: 1, topK: 0 } };
      assert.deepEqual((await g.generate(shared, greedy)).tokens, (await c.generate(shared, greedy)).tokens, `sampleOnDevice ${sampleOnDevice}: greedy tokens`);
      await g.dispose();
    }
  });

  test('score: per-token log-probs, with the adapter and of the base (reference)', async () => {
    const [c, g] = await pair('score');
    for (const reference of [false, true]) {
      const lc = await c.score(seqs, 0.7, reference);
      const lg = await g.score(seqs, 0.7, reference);
      lc.forEach((row, b) => assertClose(`${reference ? 'reference' : 'policy'} row ${b}`, lg[b]!, row));
    }
  });

  test('LoRA PPO train step (KL and entropy terms) and AdamW', async () => {
    const [c, g] = await pair('train');
    const old = await c.score(seqs, 1);
    const ref = await c.score(seqs, 1, true);
    const batch = seqs.map((s, b) => ({ ...s, advantages: new Float32Array(s.tokens.length - s.promptLength).fill(b % 2 ? -1 : 1), oldLogp: old[b]!, refLogp: ref[b]! }));
    const hp = { temperature: 1, clipEps: 0.2, klCoef: 0.05, entCoef: 0.01 };
    const before = await c.trainableTensors();
    const sc = await c.update('ppo', batch, hp);
    const sg = await g.update('ppo', batch, hp);
    assert.equal(sg.skipped, null);
    // kl_ref is left out: it is exp(d) − d − 1 for small d, whose float32 cancellation error is
    // larger relative to its tiny value than any difference between providers; it is in the loss.
    for (const k of ['loss', 'approxKl', 'entropy', 'gradNorm'] as const) assertClose(k, [sg[k]], [sc[k]]);
    // Gradients: the resident `{id}:g:{name}` tensors the train step wrote (policy.ts).
    for (const [name] of c.trainableShapes) assertClose(`${name}_grad`, (await gpu.download(`train:g:${name}`)).data as Float32Array, (await cpu.download(`train:g:${name}`)).data as Float32Array);
    // AdamW: the step each tensor took, and the moments it keeps.
    const [wc, wg] = [await c.trainableTensors(), await g.trainableTensors()];
    const [mc, mg] = [await c.optimizerState(), await g.optimizerState()];
    for (const [name, w0] of before) {
      assertStepClose(`${name} AdamW step`, wg.get(name)!, wc.get(name)!, w0);
      assertClose(`${name}.m`, mg.get(`${name}.m`)!, mc.get(`${name}.m`)!);
      assertClose(`${name}.v`, mg.get(`${name}.v`)!, mc.get(`${name}.v`)!);
    }
  });

  // On WebGPU gradients, weights and moments stay on the GPU between runs (engine-worker.ts
  // `outputsOnDevice`); micro-batches accumulate gradients there, and two steps read the state
  // the first one left there.
  test('two CE updates in micro-batches of one sequence (gradients accumulated on the device)', async () => {
    const [c, g] = await pair('train-micro');
    const before = await c.trainableTensors();
    for (let step = 0; step < 2; step++) {
      const sc = await c.update('ce', seqs, null, 1);
      const sg = await g.update('ce', seqs, null, 1);
      for (const k of ['loss', 'gradNorm'] as const) assertClose(`step ${step} ${k}`, [sg[k]], [sc[k]]);
    }
    const [wc, wg] = [await c.trainableTensors(), await g.trainableTensors()];
    for (const [name, w0] of before) assertStepClose(`${name} after two steps`, wg.get(name)!, wc.get(name)!, w0);
    const stats = await gpu.stats();
    assert.ok(stats.residentBytes > 0, 'the device residents are counted');
  });
});

/** Node placements from a WebGPU session's verbose log (see test/gpu/webgpu-placement.ts). */
async function placements(graph: string, lowering: 'fused' | 'primitives'): Promise<Map<string, string[]>> {
  const script = fileURLToPath(new URL('../../test/gpu/webgpu-placement.ts', import.meta.url));
  // The log goes to a file, not a pipe: native code writes it straight to fd 2, and Node makes
  // its stdio pipes non-blocking, so under load a full pipe silently dropped the log's tail.
  const dir = mkdtempSync(join(tmpdir(), 'troupe-placement-'));
  const logPath = join(dir, 'stderr.log');
  const fd = openSync(logPath, 'w');
  let stderr: string;
  try {
    const child = spawn(process.execPath, ['--import', 'tsx', script, graph, lowering], { stdio: ['ignore', 'ignore', fd] });
    const [code, signal] = (await once(child, 'exit')) as [number | null, NodeJS.Signals | null];
    stderr = readFileSync(logPath, 'utf8');
    if (code !== 0) throw new Error(`${graph}: the placement child exited with ${code ?? signal}\n${stderr.slice(-2000)}`);
  } finally {
    closeSync(fd);
    rmSync(dir, { recursive: true, force: true });
  }
  // "Node(s) placed on [CPUExecutionProvider]. Number of nodes: 3" then one "   Op (name)" per node.
  const byProvider = new Map<string, string[]>();
  let current: string[] | null = null;
  for (const full of stderr.split('\n')) {
    // Only the placement report's own lines (timestamp and source location, then the message)
    // count: Dawn's warnings from other threads may land between them.
    const at = full.indexOf('VerifyEachNodeIsAssignedToAnEp]');
    if (at < 0) continue;
    const line = full.slice(at + 'VerifyEachNodeIsAssignedToAnEp]'.length);
    const head = /placed on \[(\w+)\]/.exec(line);
    const node = /^\s+(\w+) \(([^)]*)\)$/.exec(line);
    // "All nodes placed on [P]. Number of nodes: N" lists none: one provider, so no copies.
    const all = /All nodes placed on \[(\w+)\]\. Number of nodes: (\d+)/.exec(line);
    if (all) byProvider.set(all[1]!, (current = Array.from({ length: Number(all[2]) }, () => '(any)')));
    else if (head) byProvider.set(head[1]!, (current = []));
    else if (node && current) current.push(node[1]!);
  }
  if (byProvider.size === 0) throw new Error(`${graph}: no node placements in ONNX Runtime's log`);
  return byProvider;
}

describe('WebGPU graphs stay on the GPU', { skip }, () => {
  // A CPU node that reads a GPU value makes ORT insert MemcpyToHost: a round trip inside every
  // call. What may stay on the CPU are the int64 index ops on the batch's own inputs (WebGPU has
  // no int64 kernels; onnxruntime-node cannot turn them on), which only copy host to GPU.
  // decode-fused and decode-fp16: the rollout decoders (decode-graph.ts), fp16 with its casts at the edges.
  for (const graph of ['decode', 'decode-device', 'decode-fused', 'decode-fp16', 'decode-fused-device', 'decode-fp16-device', 'score', 'train-ppo-lora', 'train-ce-full']) {
    test(`${graph}: nothing is copied back to the host mid-graph`, async () => {
      const p = await placements(graph, 'primitives');
      const onGpu = p.get('WebGpuExecutionProvider')?.length ?? 0;
      const all = [...p.values()].reduce((n, ops) => n + ops.length, 0);
      // A share, not a count: the fused decode graph keeps shrinking (95 nodes after its Softmax).
      assert.ok(onGpu >= 0.9 * all, `${graph}: most nodes should run on WebGPU (${onGpu} of ${all}): ${JSON.stringify([...p])}`);
      assert.deepEqual(p.get('WebGpuExecutionProvider')?.filter((op) => op === 'MemcpyToHost') ?? [], []);
      assert.ok(!(p.get('CPUExecutionProvider') ?? []).includes('LogSoftmax'));
    });
  }

  test('the fused LogSoftmax would run on the CPU (why WebGPU graphs lower it to primitives)', async () => {
    const p = await placements('score', 'fused');
    assert.ok(p.get('CPUExecutionProvider')?.includes('LogSoftmax'), JSON.stringify([...p]));
    assert.ok(p.get('WebGpuExecutionProvider')?.includes('MemcpyToHost'), JSON.stringify([...p]));
  });
});
