/**
 * `node --import tsx bench/engine/qwen-int4-decode.ts` — int4 rollout decode (fused graph,
 * MatMulNBits) of a random model at Qwen2.5-0.5B's shapes against PyTorch eager fp32 decode of the
 * same shapes, interleaved: Troupe warm-up (quantizes and builds the graph), PyTorch warm-up, then
 * QWEN_ROUNDS timed rounds of each. Prints ms per generation and the ratio; writes nothing.
 *
 * Smaller than `bench:engine`'s real-vocabulary case (which decodes fp32 and also trains, ~10
 * minutes): 16 prompts of 32 tokens, QWEN_NEW_TOKENS (16) new tokens.
 *
 * Options (env): QWEN_ROUNDS (1), QWEN_NEW_TOKENS (16), QWEN_BLOCK (128), QWEN_WEIGHTS (int4), BENCH_THREADS (2).
 */
import { initParameters } from '../../server/models/init.ts';
import { optimizerSchema } from '../../server/models/optimizer.ts';
import { Policy } from '../../server/models/policy.ts';
import { Engine } from '../../server/runtime/engine.ts';
import { median } from '../stats.ts';
import { qwen25HalfB } from './bench-real-vocab.ts';
import { TorchServer } from './torch-server.ts';

const ROUNDS = Number(process.env['QWEN_ROUNDS'] ?? 1);
const THREADS = Number(process.env['BENCH_THREADS'] ?? 2);
const WEIGHTS = (process.env['QWEN_WEIGHTS'] ?? 'int4') as 'int4' | 'int8' | 'fp32';
const DECODE = { batch: 16, promptLen: 32, newTokens: Number(process.env['QWEN_NEW_TOKENS'] ?? 16) };

async function main(): Promise<void> {
  const c = qwen25HalfB;
  const { server: torch } = await TorchServer.startWithBestBlas(THREADS, (line) => console.log(line));
  const engine = await Engine.start({ threads: THREADS, log: () => {} });
  try {
    const policy = await Policy.create(engine, {
      id: 'qwen',
      config: c,
      weights: initParameters(c, 1),
      lora: null,
      optimizer: optimizerSchema.parse({ lr: 1e-4 }),
      kl: false,
      entropy: false,
      decode: { weights: WEIGHTS, fusedDecode: true, blockSize: Number(process.env['QWEN_BLOCK'] ?? 128) },
    });
    await torch.call({ cmd: 'load', modelConfig: c, seed: 1 });
    const prompts = Array.from({ length: DECODE.batch }, (_, b) => Int32Array.from({ length: DECODE.promptLen }, (_, i) => (b * 7919 + i * 104729) % c.vocabSize));
    const troupe = async (seed: number): Promise<number> => {
      const t0 = performance.now();
      const g = await policy.generate(prompts, { maxNewTokens: DECODE.newTokens, sampling: { temperature: 1, topP: 1, topK: 0 }, seed, stopTokens: [], padToken: 0, rollout: true });
      if (g.tokens.some((t) => t.length !== DECODE.newTokens)) throw new Error('decode produced fewer tokens than asked');
      return performance.now() - t0;
    };
    const pytorch = async (): Promise<number> => (await torch.call<{ ms: number[] }>({ cmd: 'decode', ...DECODE, temperature: 1, topP: 1, steps: 1, warmup: 0 })).ms[0]!;
    const warm = { troupe: await troupe(0), pytorch: await pytorch() };
    process.stderr.write(`warm-up: Troupe ${WEIGHTS} ${(warm.troupe / 1000).toFixed(1)} s (includes quantizing and building the graph), PyTorch ${(warm.pytorch / 1000).toFixed(1)} s\n`);
    const ms = { troupe: [] as number[], pytorch: [] as number[] };
    for (let r = 0; r < ROUNDS; r++) {
      ms.troupe.push(await troupe(r + 1));
      ms.pytorch.push(await pytorch());
      process.stderr.write(`round ${r + 1}: Troupe ${(ms.troupe.at(-1)! / 1000).toFixed(1)} s, PyTorch ${(ms.pytorch.at(-1)! / 1000).toFixed(1)} s\n`);
    }
    const t = median(ms.troupe);
    const p = median(ms.pytorch);
    console.log(`${DECODE.batch} × ${DECODE.newTokens} tokens: Troupe ${WEIGHTS} ${(t / 1000).toFixed(2)} s, PyTorch fp32 ${(p / 1000).toFixed(2)} s, Troupe ÷ PyTorch ${(p / t).toFixed(2)}x`);
    await policy.dispose();
  } finally {
    await torch.close();
    await engine.close();
  }
}

main().catch((e: unknown) => {
  console.error(e instanceof Error ? e.stack : e);
  process.exit(1);
});
