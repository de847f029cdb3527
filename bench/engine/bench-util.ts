/** Small helpers shared by the engine benchmarks. */

/** The median (the mean of the two middle values for an even count). */
export function median(xs: readonly number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  const m = s.length >> 1;
  return s.length % 2 ? s[m]! : (s[m - 1]! + s[m]!) / 2;
}

/**
 * The Python that runs the PyTorch side: `TROUPE_BENCH_PYTHON`, else the system interpreter
 * (Debian's torch lives in its dist-packages, not in a pyenv Python).
 */
export function benchPython(): string {
  return process.env['TROUPE_BENCH_PYTHON'] ?? '/usr/bin/python3';
}
