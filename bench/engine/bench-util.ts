/** Small helpers shared by the engine benchmarks. */
import type { ModelConfig } from '../../server/models/model-config.ts';
import type { TrainSequence } from '../../server/models/train-batch.ts';
import { median, quantile } from '../stats.ts';

/**
 * The Python that runs the PyTorch side: `TROUPE_BENCH_PYTHON`, else the system interpreter
 * (Debian's torch lives in its dist-packages, not in a pyenv Python).
 */
export function benchPython(): string {
  return process.env['TROUPE_BENCH_PYTHON'] ?? '/usr/bin/python3';
}

/**
 * B random sequences of T + 1 tokens (one prompt token) with random advantages in [-1, 1], from a
 * fixed LCG stream started at `seed`, so both sides of a comparison train on the same batch.
 */
export function randomBatch(c: ModelConfig, B: number, T: number, seed: number): TrainSequence[] {
  let s = seed;
  const next = () => ((s = (Math.imul(s, 1103515245) + 12345) >>> 0), s);
  return Array.from({ length: B }, () => {
    const tokens = Int32Array.from({ length: T + 1 }, () => next() % c.vocabSize);
    const adv = Float32Array.from({ length: T }, () => ((next() % 2001) - 1000) / 1000);
    return { tokens, promptLength: 1, advantages: adv };
  });
}

/**
 * The figures of a bench:engine row from each side's timings (ms) and Troupe's bracketed speedups:
 * tokens per second and GFLOP/s of each side at its median, the median speedup with its quartiles,
 * and the ratio of the medians (the estimator used before 2026-11-28).
 */
export function speedupFigures(troupeMs: readonly number[], pytorchMs: readonly number[], speedups: readonly number[], tokens: number, flops: number) {
  const ms = { troupe: median(troupeMs), pytorch: median(pytorchMs) };
  return {
    troupe: (tokens / ms.troupe) * 1000,
    pytorch: (tokens / ms.pytorch) * 1000,
    speedup: median(speedups),
    speedupSpread: { q25: quantile(speedups, 0.25), q75: quantile(speedups, 0.75), n: speedups.length },
    speedupOfMedians: ms.pytorch / ms.troupe,
    ms,
    gflops: { troupe: flops / ms.troupe / 1e6, pytorch: flops / ms.pytorch / 1e6 },
  };
}

