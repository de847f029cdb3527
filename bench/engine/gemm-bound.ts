/**
 * `npx tsx bench/engine/gemm-bound.ts` — a floor under any decode implementation on this machine.
 *
 * One sampled decode step of the benchmark's batch (64 rows) must at least run the model's weight
 * GEMMs: per layer q|k|v, o, gate|up and down, then the LM head, each [64, in] x [in, out]. This
 * measures exactly that chain — nothing else: no attention, norms, RoPE, sampling or per-call
 * overhead — in ONNX Runtime (one session run holding every GEMM, same threads as the engine
 * benchmark) and in PyTorch (`torch.mm` on the same shapes; python3-torch), and prints the chain's
 * time per decode step. Compare it with the per-step times in bench/results/engine.json: a 2x decode
 * target needs the whole step in half of PyTorch's, which cannot be less than the GEMMs alone.
 * PyTorch runs on the OpenBLAS kernel `torchBlas` chooses (torch-blas.ts), recorded in the JSON.
 * Writes bench/results/gemm-bound.json.
 */
import { spawnSync } from 'node:child_process';
import { writeFile } from 'node:fs/promises';
import { fileURLToPath } from 'node:url';
import { Graph, type Node } from '../../server/compiler/ir.ts';
import { emitOnnx } from '../../server/compiler/onnx-emit.ts';
import { defaultModelConfig, mediumModelConfig, parameterCount } from '../../server/models/default-model.ts';
import type { ModelConfig } from '../../server/models/model-config.ts';
import { Engine } from '../../server/runtime/engine.ts';
import { f32 } from '../../server/runtime/tensor.ts';
import { median } from '../stats.ts';
import { benchPython } from './bench-util.ts';
import { torchBlas } from './torch-blas.ts';

const THREADS = 2;
const BATCH = 64;
const REPS = 200;
const ROUNDS = 5;

/** [in, out] of every weight GEMM of one decode step, in order. */
function gemmShapes(c: ModelConfig): Array<[number, number]> {
  const H = c.numHeads;
  const Hkv = c.numKvHeads ?? H;
  const D = c.headDim ?? c.hiddenSize / H;
  const C = c.hiddenSize;
  const F = c.intermediateSize;
  const layer: Array<[number, number]> = [
    [C, (H + 2 * Hkv) * D],
    [H * D, C],
    [C, 2 * F],
    [F, C],
  ];
  return [...Array.from({ length: c.numLayers }, () => layer).flat(), [C, c.vocabSize]];
}

async function ortChainMs(engine: Engine, name: string, shapes: Array<[number, number]>): Promise<number> {
  // Each GEMM reads its own input so the chain is exactly the listed shapes (no data dependence).
  const g = new Graph();
  const outs: Array<[string, Node]> = [];
  shapes.forEach(([k, n], i) => {
    const x = g.input(`x${i}`, 'float32', [BATCH, k]);
    const w = g.input(`w${i}`, 'float32', [k, n]);
    outs.push([`y${i}`, g.matmul(x, w)]);
  });
  const session = `gemm-bound-${name}`;
  await engine.createSession(session, emitOnnx(outs, { name: session }));
  const feeds: Record<string, { resident: string }> = {};
  const fetch: Record<string, { into: string; dtype: 'float32'; dims: number[] }> = {};
  for (const [i, [k, n]] of shapes.entries()) {
    await engine.upload(`${session}:x${i}`, f32([BATCH, k], Float32Array.from({ length: BATCH * k }, (_, j) => ((j % 13) - 6) / 13)));
    await engine.upload(`${session}:w${i}`, f32([k, n], Float32Array.from({ length: k * n }, (_, j) => ((j % 7) - 3) / 70)));
    feeds[`x${i}`] = { resident: `${session}:x${i}` };
    feeds[`w${i}`] = { resident: `${session}:w${i}` };
    fetch[`y${i}`] = { into: `${session}:y${i}`, dtype: 'float32', dims: [BATCH, n] };
  }
  for (let i = 0; i < 10; i++) await engine.run(session, feeds, fetch);
  const t0 = performance.now();
  for (let i = 0; i < REPS; i++) await engine.run(session, feeds, fetch);
  return (performance.now() - t0) / REPS;
}

function torchChainMs(shapes: Array<[number, number]>, env: Record<string, string | undefined>): number {
  const script = `
import json, sys, time, torch
torch.set_num_threads(${THREADS})
shapes = json.loads(sys.argv[1])
xs = [torch.randn(${BATCH}, k) for k, n in shapes]
ws = [torch.randn(k, n) for k, n in shapes]
with torch.no_grad():
    for _ in range(10):
        for x, w in zip(xs, ws): torch.mm(x, w)
    t0 = time.perf_counter()
    for _ in range(${REPS}):
        for x, w in zip(xs, ws): torch.mm(x, w)
print((time.perf_counter() - t0) * 1000 / ${REPS})
`;
  const r = spawnSync(benchPython(), ['-c', script, JSON.stringify(shapes)], { encoding: 'utf8', env: { ...process.env, ...env } });
  if (r.status !== 0) throw new Error(`python3 torch failed (install python3-torch): ${r.stderr}`);
  return Number(r.stdout.trim());
}

async function main(): Promise<void> {
  const blas = await torchBlas({ python: benchPython(), threads: THREADS, log: (line) => console.log(line) });
  const engine = await Engine.start({ threads: THREADS, log: () => {} });
  const results = [];
  try {
    for (const [name, config] of [
      ['default', defaultModelConfig],
      ['medium', mediumModelConfig],
    ] as const) {
      const shapes = gemmShapes(config);
      const flops = shapes.reduce((a, [k, n]) => a + 2 * BATCH * k * n, 0);
      const ort: number[] = [];
      const torch: number[] = [];
      for (let r = 0; r < ROUNDS; r++) {
        ort.push(await ortChainMs(engine, `${name}-${r}`, shapes));
        torch.push(torchChainMs(shapes, blas.choice.env));
      }
      const row = {
        model: { name, parameters: parameterCount(config) },
        gemms: shapes.length,
        batch: BATCH,
        msPerStep: { troupe: median(ort), pytorch: median(torch) },
        gflops: { troupe: flops / median(ort) / 1e6, pytorch: flops / median(torch) / 1e6 },
      };
      results.push(row);
      console.log(
        `${name.padEnd(8)} ${shapes.length} GEMMs of [${BATCH}, k] x [k, n]: ORT ${row.msPerStep.troupe.toFixed(3)} ms/step (${row.gflops.troupe.toFixed(1)} GFLOP/s), ` +
          `PyTorch ${row.msPerStep.pytorch.toFixed(3)} ms/step (${row.gflops.pytorch.toFixed(1)} GFLOP/s)`,
      );
    }
  } finally {
    await engine.close();
  }
  const out = fileURLToPath(new URL('../results/gemm-bound.json', import.meta.url));
  await writeFile(out, `${JSON.stringify({ date: new Date().toISOString(), threads: THREADS, rounds: ROUNDS, reps: REPS, blas: { cpu: blas.cpu, pytorch: blas.choice, troupe: blas.troupe }, results }, null, 2)}\n`);
  console.log(`wrote ${out}`);
}

await main();
