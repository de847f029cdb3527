/**
 * `troupe demo`: trains the embedded default model from scratch on a procedurally generated task
 * (write a digit string backwards) with supervised cross-entropy, printing the loss as it falls
 * and exact-match accuracy on held-out strings before and after. A smoke test of the whole
 * engine — compiler, ONNX Runtime in a worker, AdamW, KV-cache decoding — in under a minute.
 */
import { defaultModelConfig, parameterCount } from '../models/default-model.ts';
import { initParameters } from '../models/init.ts';
import { optimizerSchema } from '../models/optimizer.ts';
import { Policy } from '../models/policy.ts';
import { createPrng } from '../models/prng.ts';
import { defaultTokenizer as tok } from '../models/tokenizer.ts';
import type { TrainSequence } from '../models/train-batch.ts';
import { Engine } from '../runtime/engine.ts';

export interface DemoOptions {
  readonly steps: number;
  readonly batch: number;
  readonly seed: number;
  readonly log: (line: string) => void;
}

function task(seed: number): { prompt: Int32Array; answer: string } {
  const rng = createPrng(seed);
  const n = 3 + (rng.nextUint32() % 6);
  let s = '';
  for (let i = 0; i < n; i++) s += String(rng.nextUint32() % 10);
  return { prompt: tok.encodePrompt([{ role: 'user', text: `reverse ${s}` }]), answer: [...s].reverse().join('') };
}

async function accuracy(policy: Policy, seeds: readonly number[]): Promise<number> {
  const tasks = seeds.map(task);
  const gen = await policy.generate(
    tasks.map((t) => t.prompt),
    { maxNewTokens: 12, sampling: { temperature: 0, topP: 1, topK: 0 }, seed: 0, stopTokens: [tok.stopTokenId], padToken: tok.specialIds.pad },
  );
  let ok = 0;
  gen.tokens.forEach((t, i) => {
    const text = tok.decode(t, { specials: 'skip' });
    if (text === tasks[i]!.answer && gen.finish[i] === 'stop') ok++;
  });
  return ok / seeds.length;
}

export async function runEngineDemo(o: DemoOptions): Promise<{ firstLoss: number; lastLoss: number; before: number; after: number }> {
  const engine = await Engine.start({ log: o.log });
  try {
    const config = defaultModelConfig;
    o.log(`model: ${parameterCount(config).toLocaleString('en-US')} parameters (C=${config.hiddenSize}, L=${config.numLayers}, H=${config.numHeads}, vocab ${config.vocabSize})`);
    const policy = await Policy.create(engine, {
      id: 'demo',
      config,
      weights: initParameters(config, o.seed),
      lora: null,
      optimizer: optimizerSchema.parse({ lr: 3e-3, weightDecay: 0.01, schedule: { kind: 'cosine', warmupSteps: 10, totalSteps: o.steps, minLrRatio: 0.1 } }),
      kl: false,
      entropy: false,
    });
    const heldOut = Array.from({ length: 64 }, (_, i) => 1_000_000 + i);
    const before = await accuracy(policy, heldOut);
    o.log(`held-out exact match before training: ${(before * 100).toFixed(1)}%`);
    let firstLoss = Number.NaN;
    let lastLoss = Number.NaN;
    const t0 = performance.now();
    let tokens = 0;
    for (let step = 0; step < o.steps; step++) {
      const seqs: TrainSequence[] = Array.from({ length: o.batch }, (_, i) => {
        const t = task(step * o.batch + i);
        const response = tok.encodeResponse(t.answer);
        return { tokens: Int32Array.from([...t.prompt, ...response]), promptLength: t.prompt.length };
      });
      const s = await policy.update('ce', seqs, null);
      tokens += s.tokens;
      if (step === 0) firstLoss = s.loss;
      lastLoss = s.loss;
      if (step % 20 === 0 || step === o.steps - 1) {
        const rate = tokens / ((performance.now() - t0) / 1000);
        o.log(`step ${String(step).padStart(4)}  loss ${s.loss.toFixed(4)}  grad-norm ${s.gradNorm.toFixed(3)}  lr ${s.lr.toExponential(2)}  ${rate.toFixed(0)} trained tok/s`);
      }
    }
    const after = await accuracy(policy, heldOut);
    o.log(`held-out exact match after training: ${(after * 100).toFixed(1)}%  (loss ${firstLoss.toFixed(3)} → ${lastLoss.toFixed(3)})`);
    return { firstLoss, lastLoss, before, after };
  } finally {
    await engine.close();
  }
}
