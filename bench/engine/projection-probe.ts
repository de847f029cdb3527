/**
 * `node --import tsx bench/engine/projection-probe.ts` — one decode projection at the benchmark's
 * shapes, fp32 MatMul (weight baked, so prepacked) against MatMulNBits (int8/int4, block sizes,
 * accuracy levels), and 2D [M,K] against 3D [M,1,K] input. Each graph chains REPS projections of
 * the same weight (y ← x·Wᵀ with N = K) so one run amortises the call; variants are interleaved
 * round by round. Prints microseconds per projection (median) and the ratio to fp32.
 *
 * Options (env): PROBE_SHAPES (M×K×N list, default the medium model's 64×320×320,64×320×896,
 * 64×896×320 and the default's 64×128×128,64×128×512), PROBE_THREADS (1), PROBE_ROUNDS (7),
 * PROBE_VARIANTS (names below, comma-separated; default all; fp32 is always run, the ratios' base),
 * PROBE_OUT (also write the medians and ratios there as JSON, with the load average at both ends).
 */
import { writeFile } from 'node:fs/promises';
import { cpus, loadavg } from 'node:os';
import { Graph, type Node } from '../../server/compiler/ir.ts';
import { emitOnnx } from '../../server/compiler/onnx-emit.ts';
import { quantizeBlockwise, type QuantBits } from '../../server/models/quantize.ts';
import { Engine } from '../../server/runtime/engine.ts';
import { f32 } from '../../server/runtime/tensor.ts';
import { median } from '../stats.ts';

const SHAPES = (process.env['PROBE_SHAPES'] ?? '64x320x320,64x320x896,64x896x320,64x128x128,64x128x512').split(',').map((s) => s.split('x').map(Number) as [number, number, number]);
const THREADS = Number(process.env['PROBE_THREADS'] ?? 1);
const ROUNDS = Number(process.env['PROBE_ROUNDS'] ?? 7);
const REPS = 16;

interface Variant {
  readonly name: string;
  readonly bits?: QuantBits;
  readonly blockSize?: number;
  readonly accuracy?: number;
  readonly rank3?: boolean;
}

const allVariants: Variant[] = [
  { name: 'fp32' },
  { name: 'fp32 3D', rank3: true },
  { name: 'int8 b32 acc4', bits: 8, blockSize: 32, accuracy: 4 },
  { name: 'int8 b32 acc0', bits: 8, blockSize: 32, accuracy: 0 },
  { name: 'int8 b128 acc4', bits: 8, blockSize: 128, accuracy: 4 },
  { name: 'int4 b32 acc4', bits: 4, blockSize: 32, accuracy: 4 },
  { name: 'int4 b32 acc4 3D', bits: 4, blockSize: 32, accuracy: 4, rank3: true },
  { name: 'int4 b64 acc4', bits: 4, blockSize: 64, accuracy: 4 },
  { name: 'int4 b128 acc4', bits: 4, blockSize: 128, accuracy: 4 },
  { name: 'int4 b32 acc1', bits: 4, blockSize: 32, accuracy: 1 },
  { name: 'int4 b32 acc0', bits: 4, blockSize: 32, accuracy: 0 },
];
const wanted = process.env['PROBE_VARIANTS']?.split(',');
const unknownVariants = wanted?.filter((n) => !allVariants.some((v) => v.name === n)) ?? [];
if (unknownVariants.length) throw new Error(`PROBE_VARIANTS: unknown ${unknownVariants.join(', ')} (known: ${allVariants.map((v) => v.name).join(', ')})`);
const variants = allVariants.filter((v) => v.name === 'fp32' || !wanted || wanted.includes(v.name));

/** x [M,K] (or [M,1,K]) through REPS projections: K→N, then N→K, alternating, with baked weights. */
function graph(M: number, K: number, N: number, v: Variant): Uint8Array {
  const g = new Graph();
  const inits = new Map<string, Uint8Array>();
  let x: Node = g.input('x', 'float32', v.rank3 ? [M, 1, K] : [M, K]);
  const weight = (rows: number, cols: number, seed: number) => Float32Array.from({ length: rows * cols }, (_, i) => Math.sin(i * 0.37 + seed) * 0.05);
  for (let r = 0; r < REPS; r++) {
    const [rows, cols] = r % 2 ? [K, N] : [N, K];
    const w = weight(rows, cols, r);
    if (v.bits) {
      const q = quantizeBlockwise(w, rows, cols, v.bits, v.blockSize!);
      const blocks = Math.ceil(cols / q.blockSize);
      const packed = g.input(`w${r}.packed`, 'uint8', [rows, blocks, (q.blockSize * v.bits) / 8]);
      const scales = g.input(`w${r}.scales`, 'float32', [rows * blocks]);
      inits.set(`w${r}.packed`, q.packed).set(`w${r}.scales`, new Uint8Array(q.scales.buffer));
      x = g.matMulNBits(x, packed, scales, v.bits, v.blockSize!, v.accuracy!);
    } else {
      const wn = g.input(`w${r}`, 'float32', [rows, cols]);
      inits.set(`w${r}`, new Uint8Array(w.buffer));
      x = g.matmul(x, g.transpose(wn, [1, 0]));
    }
  }
  return emitOnnx([['y', x]], { name: 'projection-probe', initializers: inits });
}

async function main(): Promise<void> {
  const engine = await Engine.start({ threads: THREADS, log: () => {} });
  const load0 = loadavg()[0] ?? 0;
  const rows: Array<{ shape: [number, number, number]; variant: string; usPerProjection: number; ratioToFp32: number; gflops: number; roundsUs: number[] }> = [];
  try {
    for (const [M, K, N] of SHAPES) {
      const ms = new Map<string, number[]>(variants.map((v) => [v.name, []]));
      for (const v of variants) {
        const s = `${M}x${K}x${N} ${v.name}`;
        await engine.createSession(s, graph(M, K, N, v));
        await engine.upload(`${s}:x`, f32(v.rank3 ? [M, 1, K] : [M, K], Float32Array.from({ length: M * K }, (_, i) => Math.cos(i))));
      }
      const call = (v: Variant) => engine.run(`${M}x${K}x${N} ${v.name}`, { x: { resident: `${M}x${K}x${N} ${v.name}:x` } }, { y: { into: `${M}x${K}x${N} ${v.name}:y`, dtype: 'float32', dims: v.rank3 ? [M, 1, K] : [M, K] } });
      for (const v of variants) for (let i = 0; i < 3; i++) await call(v);
      for (let r = 0; r < ROUNDS; r++) {
        for (const v of r % 2 ? [...variants].reverse() : variants) {
          const t0 = performance.now();
          for (let i = 0; i < 5; i++) await call(v);
          ms.get(v.name)!.push(((performance.now() - t0) / 5 / REPS) * 1000);
        }
      }
      const base = median(ms.get('fp32')!);
      console.log(`\n## M=${M} K=${K} N=${N} (K↔N alternating), ${THREADS} thread(s): µs per projection`);
      for (const v of variants) {
        const t = median(ms.get(v.name)!);
        console.log(`${v.name.padEnd(18)} ${t.toFixed(1).padStart(8)} µs  ${(base / t).toFixed(2)}x fp32  (${((2 * M * K * N) / t / 1e3).toFixed(1)} GFLOP/s)`);
        rows.push({ shape: [M, K, N], variant: v.name, usPerProjection: t, ratioToFp32: base / t, gflops: (2 * M * K * N) / t / 1e3, roundsUs: ms.get(v.name)! });
      }
      for (const v of variants) await engine.releaseSession(`${M}x${K}x${N} ${v.name}`);
    }
  } finally {
    await engine.close();
  }
  const out = process.env['PROBE_OUT'];
  if (out) {
    await writeFile(out, `${JSON.stringify({ date: new Date().toISOString(), threads: THREADS, rounds: ROUNDS, chain: REPS, cpu: cpus()[0]?.model ?? 'unknown', loadAverage: { start: load0, end: loadavg()[0] ?? 0 }, note: 'µs per projection: median over rounds of 5 calls of a chain of REPS projections (K→N, N→K alternating); ratioToFp32 > 1 is faster than fp32', rows }, null, 2)}\n`);
    console.log(`wrote ${out}`);
  }
}

main().catch((e: unknown) => {
  console.error(e instanceof Error ? e.stack : e);
  process.exit(1);
});
