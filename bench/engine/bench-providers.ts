/**
 * Decode and train-step speed of one model on every execution provider that starts here (cpu,
 * and cuda / webgpu where `troupe doctor` says they work; a software WebGPU adapter included,
 * marked as such), measured in one run so the ratios compare like with like. On GPU providers it
 * also decodes with the rollout decoders: the fused fp32 graph and `rollout.weights: "fp16"`,
 * interleaved with the plain decoder round by round (A B C A B C) in one engine. Prints a table
 * and writes bench/results/providers.json.
 *
 * On a software WebGPU adapter (Mesa's lavapipe) the numbers say how the CPU runs Vulkan compute
 * shaders, not how any GPU decodes: lavapipe emulates float16 arithmetic on the CPU.
 *
 * Usage: node --import tsx bench/engine/bench-providers.ts [--model default|medium] [--rounds N] [--rows N] [--out FILE]
 */
import { writeFileSync } from 'node:fs';
import { availableParallelism, cpus } from 'node:os';
import { parseArgs } from 'node:util';
import { defaultModelConfig, mediumModelConfig } from '../../server/models/default-model.ts';
import { initParameters } from '../../server/models/init.ts';
import { optimizerSchema } from '../../server/models/optimizer.ts';
import { Policy } from '../../server/models/policy.ts';
import { Engine, type ExecutionProviderName } from '../../server/runtime/engine.ts';
import { median } from '../stats.ts';

const { values } = parseArgs({
  options: { model: { type: 'string', default: 'default' }, rounds: { type: 'string', default: '3' }, rows: { type: 'string', default: '32' }, out: { type: 'string' } },
});
const models = { default: defaultModelConfig, medium: mediumModelConfig } as const;
if (values.model !== 'default' && values.model !== 'medium') throw new Error(`--model must be default or medium, got '${values.model}'`);
const config = models[values.model];
const rounds = Number(values.rounds);
if (!Number.isSafeInteger(rounds) || rounds < 1) throw new Error(`--rounds must be an integer >= 1, got '${values.rounds}'`);

const ROWS = Number(values.rows);
if (!Number.isSafeInteger(ROWS) || ROWS < 1) throw new Error(`--rows must be an integer >= 1, got '${values.rows}'`);
const PROMPT = 16;
const NEW = 32;
const prompts = Array.from({ length: ROWS }, (_, b) => Int32Array.from({ length: PROMPT }, (_, i) => 1 + ((b * 7 + i * 3) % (config.vocabSize - 1))));
const decode = { maxNewTokens: NEW, sampling: { temperature: 1, topP: 1, topK: 0 }, seed: 1, stopTokens: [], padToken: 0 };
const seqs = prompts.map((p) => ({ tokens: Int32Array.from([...p, ...p, ...p]), promptLength: PROMPT }));

interface Row {
  readonly provider: ExecutionProviderName;
  readonly adapter: string;
  readonly decodeTokensPerSecond: number;
  readonly trainStepMs: number;
  /** GPU providers: the fused fp32 rollout decoder and fp16 rollout weights (same rows and tokens). */
  readonly fusedFp32TokensPerSecond?: number;
  readonly fp16TokensPerSecond?: number;
  /** Each round's fp16 ÷ fused fp32 tokens/s (the two ran back to back). */
  readonly fp16VsFusedRounds?: number[];
}

async function measure(provider: ExecutionProviderName): Promise<Row | null> {
  const engine = await Engine.start({ executionProvider: provider, log: () => {} });
  try {
    if (engine.provider !== provider) {
      process.stderr.write(`${provider}: skipped (${engine.providerReason})\n`);
      return null;
    }
    const p = await Policy.create(engine, { id: 'bench', config, weights: initParameters(config, 1), lora: null, optimizer: optimizerSchema.parse({ lr: 1e-4 }), kl: false, entropy: false });
    // GPU providers: one more policy (same weights) whose validation decoder is the fused fp32
    // graph and whose rollouts use fp16 weights; the CPU refuses fp16.
    const gpu = provider === 'cpu' ? null : await Policy.create(engine, { id: 'bench-fp16', config, weights: initParameters(config, 1), lora: null, optimizer: optimizerSchema.parse({ lr: 1e-4 }), kl: false, entropy: false, decode: { weights: 'fp16', fusedDecode: true, blockSize: 32 } });
    const tokensPerSecond = async (q: Policy, rollout: boolean) => {
      const t0 = performance.now();
      await q.generate(prompts, { ...decode, rollout });
      return (ROWS * NEW * 1000) / (performance.now() - t0);
    };
    await p.generate(prompts, decode); // warm-up: session creation, first-run allocations
    await p.update('ce', seqs, null);
    if (gpu) for (const rollout of [false, true]) await tokensPerSecond(gpu, rollout);
    const dec: number[] = [];
    const fused: number[] = [];
    const half: number[] = [];
    const train: number[] = [];
    for (let r = 0; r < rounds; r++) {
      dec.push(await tokensPerSecond(p, false));
      if (gpu) {
        fused.push(await tokensPerSecond(gpu, false));
        half.push(await tokensPerSecond(gpu, true));
      }
      train.push((await p.update('ce', seqs, null)).ms);
    }
    const adapter = provider === 'webgpu' ? (engine.providerReport?.webgpu?.adapter ?? 'unknown') : provider === 'cuda' ? 'CUDA device 0' : 'host';
    return { provider, adapter, decodeTokensPerSecond: median(dec), trainStepMs: median(train), ...(gpu ? { fusedFp32TokensPerSecond: median(fused), fp16TokensPerSecond: median(half), fp16VsFusedRounds: half.map((h, i) => h / fused[i]!) } : {}) };
  } finally {
    await engine.close();
  }
}

const rows: Row[] = [];
for (const provider of ['cpu', 'cuda', 'webgpu'] as const) {
  const row = await measure(provider);
  if (row) rows.push(row);
}
const cpu = rows.find((r) => r.provider === 'cpu')!;
console.log(`model ${values.model}: decode ${ROWS} rows x ${NEW} new tokens (prompt ${PROMPT}); cross-entropy step on ${ROWS} x ${3 * PROMPT} tokens; median of ${rounds}`);
console.log('provider  adapter    decode tok/s  vs cpu   train step ms  vs cpu   fused fp32 tok/s  fp16 tok/s  fp16 vs fused fp32');
for (const r of rows) {
  const rollout =
    r.fusedFp32TokensPerSecond !== undefined && r.fp16TokensPerSecond !== undefined
      ? `${r.fusedFp32TokensPerSecond.toFixed(0).padStart(17)} ${r.fp16TokensPerSecond.toFixed(0).padStart(11)} ${(r.fp16TokensPerSecond / r.fusedFp32TokensPerSecond).toFixed(2).padStart(18)}x`
      : '';
  console.log(
    `${r.provider.padEnd(9)} ${r.adapter.padEnd(10)} ${r.decodeTokensPerSecond.toFixed(0).padStart(12)}  ${(r.decodeTokensPerSecond / cpu.decodeTokensPerSecond).toFixed(2).padStart(5)}x ${r.trainStepMs.toFixed(0).padStart(14)}  ${(cpu.trainStepMs / r.trainStepMs).toFixed(2).padStart(5)}x ${rollout}`,
  );
}
const out = values.out ?? new URL('../results/providers.json', import.meta.url).pathname;
writeFileSync(out, `${JSON.stringify({ model: values.model, rows: ROWS, promptTokens: PROMPT, newTokens: NEW, rounds, cpuCores: availableParallelism(), cpu: cpus()[0]?.model ?? 'unknown', results: rows }, null, 2)}\n`);
console.log(`wrote ${out}`);
