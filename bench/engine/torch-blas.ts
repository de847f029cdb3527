/**
 * The PyTorch baseline's BLAS kernel, chosen on purpose. Debian's torch does its matmuls in OpenBLAS,
 * which picks a kernel ("core") when it loads: from cpuid, or from OPENBLAS_CORETYPE when that is set.
 * Both can be wrong for the CPU at hand. OpenBLAS 0.3.21 calls an AVX-512 Xeon (family 6 model 207)
 * Prescott, a 2004 SSE3 kernel at a quarter of SkylakeX's speed; on these AMD EPYC (family 26) VMs the
 * environment sets OPENBLAS_CORETYPE=Haswell (AVX2) on a CPU with AVX-512. A ratio against either
 * measures a kernel table, not PyTorch. So every bench that starts PyTorch asks `torchBlas` first and
 * starts it with the `env` it returns:
 *
 * 1. parse /proc/cpuinfo (model, flags);
 * 2. probe OpenBLAS's own pick (OPENBLAS_CORETYPE unset; OPENBLAS_VERBOSE=2 prints "Core: …"), the
 *    inherited OPENBLAS_CORETYPE if one is set, and the best core the CPU's flags allow;
 * 3. each probe (`blas_probe.py`) checks torch.mm against float64 sums done outside BLAS and times a
 *    512² matmul (best of several short tries: the most this kernel reached here);
 * 4. take the widest core that passes the check and is not clearly slower than the fastest, and start
 *    PyTorch with the OPENBLAS_CORETYPE its probe ran under (unset for OpenBLAS's own pick: this
 *    OpenBLAS falls back to cpuid for a name it cannot force, Cooperlake among them), so the
 *    benchmarked process runs exactly the probed kernel.
 *
 * Troupe's side is onnxruntime, whose MatMuls run on its own MLAS kernels (dispatched by cpuid inside
 * onnxruntime; OpenBLAS is not involved): `mlasSgemmKernel` says which one MLAS picks for these flags.
 * `baselineFlags` is the rule that marks a run whose baseline peak is far below what its kernel
 * reached, so such a run is reported as such and not silently.
 */
import { spawn } from 'node:child_process';
import { readFile } from 'node:fs/promises';
import { fileURLToPath } from 'node:url';
import { z } from 'zod';

export interface CpuInfo {
  model: string;
  vendor: string;
  family: number | null;
  modelNumber: number | null;
  /** The first processor's flags, as /proc/cpuinfo spells them (`avx512f`, `pni` for SSE3, …). */
  flags: string[];
}

/** /proc/cpuinfo's fields (x86 names) as the first processor gives them: every core is the same here. */
export function parseCpuinfo(text: string): CpuInfo {
  const field = (name: string): string | undefined => {
    for (const line of text.split('\n')) {
      const i = line.indexOf(':');
      if (i > 0 && line.slice(0, i).trim() === name) return line.slice(i + 1).trim();
    }
    return undefined;
  };
  const num = (s: string | undefined): number | null => (s !== undefined && /^\d+$/.test(s) ? Number(s) : null);
  return {
    model: field('model name') ?? 'unknown',
    vendor: field('vendor_id') ?? 'unknown',
    family: num(field('cpu family')),
    modelNumber: num(field('model')),
    flags: (field('flags') ?? '').split(/\s+/).filter(Boolean),
  };
}

/** The core OpenBLAS says it loaded ("Core: SkylakeX" with OPENBLAS_VERBOSE=2; the last one wins), or null. */
export function parseOpenblasCore(stderr: string): string | null {
  let core: string | null = null;
  for (const m of stderr.matchAll(/^Core: (\S+)\s*$/gm)) core = m[1]!;
  return core;
}

/** The instruction sets OpenBLAS's fp32 GEMM kernels are written for, narrowest first. */
const isaLevels = ['sse2', 'sse3', 'ssse3', 'sse4', 'avx', 'avx2', 'avx512'] as const;
type IsaLevel = (typeof isaLevels)[number];

/** cpuinfo flags each level needs (`pni` is SSE3). */
const levelNeeds: Record<IsaLevel, readonly string[]> = {
  sse2: ['sse2'],
  sse3: ['pni'],
  ssse3: ['ssse3'],
  sse4: ['sse4_2'],
  avx: ['avx'],
  avx2: ['avx2', 'fma'],
  avx512: ['avx512f', 'avx512cd', 'avx512bw', 'avx512dq', 'avx512vl'],
};

/**
 * OpenBLAS's x86-64 DYNAMIC_ARCH cores (names as OPENBLAS_CORETYPE takes them) by the level of their
 * fp32 GEMM kernel. Cooperlake and SapphireRapids add bf16/int8 kernels to SkylakeX's; Zen runs
 * Haswell's; AMD's Bulldozer family stays at AVX.
 */
const coreLevel: Record<string, IsaLevel> = {
  katmai: 'sse2', coppermine: 'sse2', northwood: 'sse2', banias: 'sse2', athlon: 'sse2', opteron: 'sse2',
  prescott: 'sse3', atom: 'sse3', opteron_sse3: 'sse3',
  core2: 'ssse3', penryn: 'ssse3', dunnington: 'ssse3', nano: 'ssse3', bobcat: 'ssse3',
  nehalem: 'sse4', barcelona: 'sse4',
  sandybridge: 'avx', bulldozer: 'avx', piledriver: 'avx', steamroller: 'avx', excavator: 'avx',
  haswell: 'avx2', zen: 'avx2',
  skylakex: 'avx512', cooperlake: 'avx512', sapphirerapids: 'avx512',
};

/** The core named for each level when the flags allow it. */
const levelCore: Record<IsaLevel, string> = { sse2: 'Northwood', sse3: 'Prescott', ssse3: 'Core2', sse4: 'Nehalem', avx: 'Sandybridge', avx2: 'Haswell', avx512: 'SkylakeX' };

/** The rank of a core's GEMM kernel (-1: a name this table does not know). */
export function coreRank(core: string): number {
  const level = coreLevel[core.toLowerCase()];
  return level === undefined ? -1 : isaLevels.indexOf(level);
}

/** The widest OpenBLAS core these cpuinfo flags can run, or null when not even SSE2 is there. */
export function bestCoreFor(flags: readonly string[]): string | null {
  const has = new Set(flags);
  for (const level of [...isaLevels].reverse()) if (levelNeeds[level].every((f) => has.has(f))) return levelCore[level];
  return null;
}

/** The fp32 GEMM kernel onnxruntime's MLAS dispatches to for these flags (its platform.cpp order). */
export function mlasSgemmKernel(flags: readonly string[]): string {
  const has = new Set(flags);
  if (has.has('avx512f')) return 'MLAS Avx512F';
  if (has.has('avx2') && has.has('fma')) return 'MLAS Fma3';
  if (has.has('avx')) return 'MLAS Avx';
  return 'MLAS Sse';
}

/** One probe process (`blas_probe.py`) under one OPENBLAS_CORETYPE. */
export interface BlasProbe {
  /** The OPENBLAS_CORETYPE it ran under (null: unset, OpenBLAS's own pick). */
  coretypeEnv: string | null;
  /** The core it loaded: the "Core:" line, else openblas_get_corename(); null without OpenBLAS. */
  core: string | null;
  blasLibrary: string[];
  /** Best 512² fp32 matmul GFLOP/s over all tries of all rounds. */
  gflops: number;
  gflopsTries: number[];
  checks: Array<{ shape: [number, number, number]; entries: number; maxScaledError: number }>;
}

/**
 * The float32 bound on a dot product of length k (Higham, Accuracy and Stability of Numerical
 * Algorithms, §3.1: |error| ≤ γ_k Σ|a_i b_i|, γ_k ≈ k·2⁻²⁴). The probe scales each error by Σ|a b|.
 */
export function float32DotBound(k: number): number {
  return k * 2 ** -24;
}

/** The probe's checks that broke the float32 bound, as sentences (empty: its results are right). */
export function checkFailures(p: BlasProbe): string[] {
  if (p.checks.length === 0) return ['no results were checked'];
  return p.checks
    .filter((c) => !(c.maxScaledError <= float32DotBound(c.shape[1])))
    .map((c) => `${c.shape.join('×')}: error ${c.maxScaledError.toExponential(2)} × Σ|ab| over the float32 bound ${float32DotBound(c.shape[1]).toExponential(2)}`);
}

/** A core is kept over a wider one only when the wider is slower than this fraction of it. */
export const CLEARLY_SLOWER = 0.8;

export interface CoreChoice {
  /** OpenBLAS's own pick from cpuid (OPENBLAS_CORETYPE unset), null without OpenBLAS. */
  cpuidPick: string | null;
  /** OPENBLAS_CORETYPE as this process inherited it. */
  inherited: string | null;
  /** The widest core the CPU's flags allow. */
  best: string | null;
  /** The core the PyTorch side runs (pinned in `env`), null without OpenBLAS. */
  used: string | null;
  /** The GFLOP/s the used core reached in its probe (null without OpenBLAS). */
  usedPeak: number | null;
  /** What to lay over the PyTorch process's environment (undefined: unset the variable). */
  env: Record<string, string | undefined>;
  reason: string;
  /** Set when the baseline runs below what the flags allow or gave wrong results. */
  problem: string | null;
}

/**
 * Picks the PyTorch side's core from the probes (one per candidate core): among those whose results
 * pass the float64 check, the widest, unless it is clearly slower than the fastest; `forced` (a core
 * name) takes that core if it passes.
 */
export function chooseCore(o: { flags: readonly string[]; cpuidPick: string | null; inherited: string | null; probes: readonly BlasProbe[]; forced?: string }): CoreChoice {
  const best = bestCoreFor(o.flags);
  const base = { cpuidPick: o.cpuidPick, inherited: o.inherited, best };
  if (o.probes.every((p) => p.core === null)) {
    const libs = [...new Set(o.probes.flatMap((p) => p.blasLibrary))].join(', ') || 'none found';
    return { ...base, used: null, usedPeak: null, env: {}, reason: `PyTorch does not use OpenBLAS here (BLAS mapped: ${libs}); OPENBLAS_CORETYPE does not apply`, problem: null };
  }
  const passing = o.probes.filter((p) => p.core !== null && checkFailures(p).length === 0);
  const failed = o.probes.filter((p) => p.core !== null && checkFailures(p).length > 0).map((p) => `${p.core} (${checkFailures(p)[0]})`);
  const failedNote = failed.length ? `; failed the float64 check: ${failed.join(', ')}` : '';
  if (passing.length === 0) {
    const p = o.probes.find((x) => x.core !== null)!;
    return { ...base, used: p.core, usedPeak: p.gflops, env: probeEnv(p), reason: `no core passed the float64 check${failedNote}`, problem: `every OpenBLAS core probed gave wrong results${failedNote}` };
  }
  let pick: BlasProbe;
  let why: string;
  const forced = o.forced === undefined ? undefined : passing.find((p) => p.core!.toLowerCase() === o.forced!.toLowerCase());
  if (forced) {
    pick = forced;
    why = `forced by BENCH_TORCH_CORETYPE=${o.forced}`;
  } else {
    const fastest = passing.reduce((a, b) => (b.gflops > a.gflops ? b : a));
    const widest = [...passing].sort((a, b) => coreRank(b.core!) - coreRank(a.core!) || b.gflops - a.gflops)[0]!;
    pick = widest.gflops >= CLEARLY_SLOWER * fastest.gflops ? widest : fastest;
    why = pick === widest ? 'the widest core that passed the float64 check' : `the fastest core: the widest, ${widest.core}, reached only ${widest.gflops.toFixed(0)} GFLOP/s`;
  }
  const peaks = o.probes.map((p) => `${p.core ?? '?'} ${p.gflops.toFixed(0)}`).join(', ');
  const used = pick.core!;
  const below = best !== null && coreRank(used) < coreRank(best) ? `${used} is narrower than ${best}, which this CPU's flags allow` : null;
  return {
    ...base,
    used,
    usedPeak: pick.gflops,
    env: probeEnv(pick),
    reason: `${used}: ${why} (probe peaks, GFLOP/s: ${peaks}; OpenBLAS's own pick ${o.cpuidPick ?? 'none'}; inherited OPENBLAS_CORETYPE ${o.inherited ?? 'unset'})${failedNote}`,
    problem: o.forced !== undefined && !forced ? `BENCH_TORCH_CORETYPE=${o.forced} was not probed or failed the float64 check` : below,
  };
}

/** The environment a probe ran under, to start PyTorch the same way. */
function probeEnv(p: BlasProbe): Record<string, string | undefined> {
  return { OPENBLAS_CORETYPE: p.coretypeEnv ?? undefined };
}

/** A baseline peak under this fraction of its reference is "far below" it. */
export const FAR_BELOW = 0.5;

export interface BaselineFlag {
  code: 'peak-below-kernel' | 'peak-below-mlas' | 'kernel-problem' | 'machine-busy';
  message: string;
}

/**
 * What makes this run's PyTorch figures suspect, as flags to print and store: its MatMul peak far
 * below what its kernel reached in the probe or below ORT's MLAS in the same rounds, a kernel
 * problem from `chooseCore`, or more runnable processes than cores at the start or end.
 */
export function baselineFlags(o: { pytorchPeak: number; troupePeak: number; choice: Pick<CoreChoice, 'used' | 'usedPeak' | 'problem'>; loadAverage: { start: number; end: number }; cores: number }): BaselineFlag[] {
  const flags: BaselineFlag[] = [];
  const pct = (x: number) => `${(100 * x).toFixed(0)}%`;
  const { used, usedPeak, problem } = o.choice;
  if (usedPeak !== null && o.pytorchPeak < FAR_BELOW * usedPeak) {
    flags.push({ code: 'peak-below-kernel', message: `PyTorch's MatMul peak in the run, ${o.pytorchPeak.toFixed(1)} GFLOP/s, is ${pct(o.pytorchPeak / usedPeak)} of the ${usedPeak.toFixed(1)} its kernel (${used ?? '?'}) reached in the probe: the machine was busy or the kernel changed, and the ratios favour Troupe` });
  }
  if (o.pytorchPeak < FAR_BELOW * o.troupePeak) {
    flags.push({ code: 'peak-below-mlas', message: `PyTorch's MatMul peak, ${o.pytorchPeak.toFixed(1)} GFLOP/s, is ${pct(o.pytorchPeak / o.troupePeak)} of ORT MLAS's ${o.troupePeak.toFixed(1)} in the same rounds: the baseline's BLAS is weak on this CPU, or its threads lost more than ORT's to other processes` });
  }
  if (problem !== null) flags.push({ code: 'kernel-problem', message: problem });
  const load = Math.max(o.loadAverage.start, o.loadAverage.end);
  if (load > o.cores) {
    flags.push({ code: 'machine-busy', message: `load average ${o.loadAverage.start.toFixed(1)} at the start, ${o.loadAverage.end.toFixed(1)} at the end, on ${o.cores} cores: other processes took CPU time from both sides, and absolute figures (and ratios, less) are noisy` });
  }
  return flags;
}

export interface TorchBlas {
  cpu: CpuInfo;
  choice: CoreChoice;
  probes: BlasProbe[];
  /** Troupe's side: onnxruntime's own kernels. */
  troupe: { library: string; sgemmKernel: string };
}

/**
 * Probes the candidate cores (two alternating rounds each, so drift on a shared machine hits all)
 * and chooses one. `BENCH_TORCH_CORETYPE`: unset or `auto` chooses; `inherited` keeps the
 * environment's OPENBLAS_CORETYPE (or OpenBLAS's own pick); a core name forces it (still checked).
 */
export async function torchBlas(o: { python: string; threads: number; log?: (line: string) => void }): Promise<TorchBlas> {
  const cpu = parseCpuinfo(await readFile('/proc/cpuinfo', 'utf8').catch(() => ''));
  const inherited = process.env['OPENBLAS_CORETYPE'] || null;
  const mode = process.env['BENCH_TORCH_CORETYPE'] || 'auto';
  const probes = [await runProbe(o.python, o.threads, null)];
  const cpuidPick = probes[0]!.core;
  if (cpuidPick !== null) {
    const best = bestCoreFor(cpu.flags);
    // A candidate as wide as one already probed adds nothing (Cooperlake runs SkylakeX's fp32 GEMM).
    const wanted = mode === 'auto' ? [inherited, best] : mode === 'inherited' ? [inherited] : [mode];
    const seen = (c: string) => probes.some((p) => p.core !== null && (p.core.toLowerCase() === c.toLowerCase() || (mode === 'auto' && c === best && coreRank(p.core) === coreRank(c))));
    for (const c of wanted) if (c !== null && !seen(c)) probes.push(await runProbe(o.python, o.threads, c));
    for (const p of probes) merge(p, await runProbe(o.python, o.threads, p.coretypeEnv));
  }
  const usable = mode === 'inherited' ? probes.filter((p) => p.coretypeEnv === inherited) : probes;
  const choice = chooseCore({ flags: cpu.flags, cpuidPick, inherited, probes: usable, ...(mode !== 'auto' && mode !== 'inherited' ? { forced: mode } : {}) });
  o.log?.(`PyTorch BLAS: ${choice.reason}${choice.problem ? ` — ${choice.problem}` : ''}`);
  return { cpu, choice, probes, troupe: { library: 'onnxruntime MLAS (its own kernels, chosen by cpuid; OpenBLAS is not used)', sgemmKernel: mlasSgemmKernel(cpu.flags) } };
}

function merge(into: BlasProbe, more: BlasProbe): void {
  into.gflops = Math.max(into.gflops, more.gflops);
  into.gflopsTries.push(...more.gflopsTries);
  into.checks.push(...more.checks);
}

/** `blas_probe.py`'s one line of output. */
const probeLine = z.object({
  corename: z.string().nullable(),
  blasLibrary: z.array(z.string()),
  gflops: z.number(),
  gflopsTries: z.array(z.number()),
  checks: z.array(z.object({ shape: z.tuple([z.number(), z.number(), z.number()]), entries: z.number(), maxScaledError: z.number() })),
});

async function runProbe(python: string, threads: number, coretype: string | null): Promise<BlasProbe> {
  const script = fileURLToPath(new URL('./blas_probe.py', import.meta.url));
  const env: NodeJS.ProcessEnv = { ...process.env, OPENBLAS_VERBOSE: '2' };
  if (coretype === null) delete env['OPENBLAS_CORETYPE'];
  else env['OPENBLAS_CORETYPE'] = coretype;
  const { code, stdout, stderr } = await new Promise<{ code: number | null; stdout: string; stderr: string }>((resolve, reject) => {
    const p = spawn(python, [script, '--threads', String(threads), '--reps', '3', '--tries', '12'], { env, stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    let err = '';
    p.stdout.on('data', (d: Buffer) => (out += d.toString()));
    p.stderr.on('data', (d: Buffer) => (err += d.toString()));
    p.on('error', reject);
    p.on('close', (c) => resolve({ code: c, stdout: out, stderr: err }));
  });
  const line = stdout.trim().split('\n').at(-1) ?? '';
  if (code !== 0 || !line.startsWith('{')) throw new Error(`blas_probe.py (OPENBLAS_CORETYPE=${coretype ?? 'unset'}) exited ${code}: ${stderr.slice(-600)}`);
  const r = probeLine.parse(JSON.parse(line));
  return { coretypeEnv: coretype, core: parseOpenblasCore(stderr) ?? r.corename, blasLibrary: r.blasLibrary, gflops: r.gflops, gflopsTries: r.gflopsTries, checks: r.checks };
}
