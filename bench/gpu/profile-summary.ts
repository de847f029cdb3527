/**
 * Reads ONNX Runtime's profile (a Chrome trace, written when a session created with
 * `enableProfiling` ends profiling; `EngineOptions.profileDir`) and says where a `session.run`'s
 * time goes: kernel count, time by op type, time by class (MatMul/Gemm, attention, elementwise,
 * normalization and reductions, data movement, copies between host and device), the memcpy nodes,
 * and the gap between the nodes' time and the run's wall time (host overhead: feeds, fetches,
 * allocation, the executor's own work).
 *
 * What the trace holds (onnxruntime 1.30):
 *   - `cat: 'Session', name: 'model_run'`: one per `session.run`, its wall time (`dur`, µs).
 *   - `cat: 'Node', name: '<node>_kernel_time'`: each node's `Compute` call on the host thread, with
 *     `args.op_name` and `args.provider`. On the CPU provider that is the kernel's work. On WebGPU it
 *     is the host side only: recording the shader dispatch (and compiling it on first use); the GPU
 *     runs it later, asynchronously.
 *   - WebGPU only, where the adapter has timestamp queries: `cat: 'Api'` events, one per shader
 *     dispatch, `dur` the GPU's own time between the dispatch's two timestamps (ORT's WebGPU
 *     profiler, on whenever the session profiles), named `<node>&<op type>&<program>`, with
 *     `args.shapes` and `args.cache_key`. ORT reads them back at the end of each run (the run waits
 *     for the GPU then) and writes them in the order of the runs. Their `ts` is NOT a reliable
 *     place on the host's clock: the WebGPU context, shared by every session, restarts its offset,
 *     so with other sessions running in between, later runs' kernels land inside the first run's
 *     span (seen on lavapipe). They are given to runs by order instead (`gpuByRun`).
 */
import { createReadStream } from 'node:fs';
import { basename } from 'node:path';
import { createInterface } from 'node:readline';
import { z } from 'zod';
import { median } from '../stats.ts';

/** One trace event, as far as the summary reads it (other fields are dropped when read). */
const eventSchema = z.object({
  cat: z.string(),
  name: z.string(),
  ts: z.number(),
  dur: z.number().default(0),
  args: z
    .object({
      op_name: z.string().optional(),
      shapes: z.string().optional(),
      /** A node's inputs and outputs, each `{ <dtype>: dims }`. */
      input_type_shape: z.array(z.record(z.string(), z.array(z.number()))).optional(),
      output_type_shape: z.array(z.record(z.string(), z.array(z.number()))).optional(),
    })
    .optional(),
});
export type ProfileEvent = z.infer<typeof eventSchema>;

/**
 * Reads and checks one profile file, a line at a time: ORT writes `[`, one event per line, `]`,
 * and at Qwen2.5-0.5B a PPO step's or a decode's trace is hundreds of MB (a Node event carries
 * ~0.8 kB of arguments this summary does not read), too much to hold as one string and parse.
 * An unreadable file or line is an error naming the file and the line.
 */
export async function readProfile(file: string): Promise<ProfileEvent[]> {
  const out: ProfileEvent[] = [];
  let n = 0;
  for await (const raw of createInterface({ input: createReadStream(file, { encoding: 'utf8' }), crlfDelay: Infinity })) {
    n++;
    const line = raw.trim().replace(/,$/, '');
    if (line === '' || line === '[' || line === ']') continue;
    let v: unknown;
    try {
      v = JSON.parse(line);
    } catch (e) {
      throw new Error(`profile ${file} line ${n}: not a JSON trace event (${e instanceof Error ? e.message : String(e)})`);
    }
    const r = eventSchema.safeParse(v);
    if (!r.success) throw new Error(`profile ${file} line ${n}: not an ONNX Runtime trace event: ${r.error.issues[0]?.path.join('.') ?? ''} ${r.error.issues[0]?.message ?? ''}`);
    out.push(r.data);
  }
  if (n === 0) throw new Error(`profile ${file}: empty`);
  return out;
}

/** Op classes the summary reports time for; an op type not listed counts as `other`. */
export const opClasses = {
  matmul: ['MatMul', 'Gemm', 'FusedMatMul', 'MatMulNBits', 'MatMulInteger', 'Einsum'],
  attention: ['Attention', 'MultiHeadAttention', 'GroupQueryAttention', 'Softmax', 'LogSoftmax'],
  elementwise: ['Add', 'Sub', 'Mul', 'Div', 'Neg', 'Exp', 'Log', 'Sqrt', 'Pow', 'Reciprocal', 'Where', 'Equal', 'Less', 'Greater', 'LessOrEqual', 'GreaterOrEqual', 'Not', 'And', 'Or', 'Cast', 'Sigmoid', 'Tanh', 'Erf', 'Relu', 'Max', 'Min', 'Abs', 'Clip', 'Gelu', 'FastGelu', 'BiasGelu', 'QuickGelu', 'Sin', 'Cos', 'IsNaN', 'IsInf', 'Sign', 'Floor', 'Ceil', 'Mod', 'Range'],
  normalization: ['ReduceSum', 'ReduceMean', 'ReduceMax', 'ReduceMin', 'ReduceLogSumExp', 'ReduceSumSquare', 'ReduceProd', 'ReduceL2', 'ArgMax', 'ArgMin', 'CumSum', 'LayerNormalization', 'SimplifiedLayerNormalization', 'SkipSimplifiedLayerNormalization', 'SkipLayerNormalization', 'RMSNormalization', 'TopK'],
  dataMovement: ['Reshape', 'Transpose', 'Concat', 'Split', 'Slice', 'Gather', 'GatherElements', 'GatherND', 'ScatterElements', 'ScatterND', 'Expand', 'Squeeze', 'Unsqueeze', 'Shape', 'Identity', 'Tile', 'Pad', 'Flatten', 'RotaryEmbedding', 'Trilu', 'ConstantOfShape'],
  memcpy: ['MemcpyToHost', 'MemcpyFromHost'],
} as const satisfies Record<string, readonly string[]>;
export type OpClass = keyof typeof opClasses | 'other';

const classOf = new Map<string, OpClass>(Object.entries(opClasses).flatMap(([k, ops]) => ops.map((op) => [op, k as OpClass] as const)));
export const opClassOf = (op: string): OpClass => classOf.get(op) ?? 'other';

/** Time (µs) and count per key. */
export type Tally = Record<string, { us: number; count: number }>;

/** One `session.run`. */
export interface RunSummary {
  /** The run's wall time inside ONNX Runtime (µs). */
  readonly wallUs: number;
  /** Node `Compute` calls on the host (kernels, for the CPU provider). */
  readonly nodes: number;
  /** Their summed time (µs). */
  readonly nodeUs: number;
  /** `wallUs − nodeUs`: the run's time outside every node (feeds, fetches, allocation, the executor). */
  readonly hostGapUs: number;
  /** Node time by op type and by class. */
  readonly byOp: Tally;
  readonly byClass: Tally;
  /** MemcpyToHost / MemcpyFromHost nodes: copies between host and device inside the run. */
  readonly memcpy: { count: number; us: number };
  /** WebGPU kernels timed on the GPU (timestamp queries); absent when the trace has none. */
  readonly gpu?: { kernels: number; us: number; byOp: Tally; byClass: Tally; matmul: MatMulTally };
}

function add(t: Tally, key: string, us: number): void {
  const e = (t[key] ??= { us: 0, count: 0 });
  e.us += us;
  e.count++;
}

/** Index of the run whose span holds `ts`, or -1; `runs` sorted by start. */
function runAt(runs: readonly ProfileEvent[], ts: number): number {
  let lo = 0;
  let hi = runs.length - 1;
  while (lo <= hi) {
    const mid = (lo + hi) >> 1;
    if (runs[mid]!.ts <= ts) lo = mid + 1;
    else hi = mid - 1;
  }
  return hi >= 0 && ts <= runs[hi]!.ts + runs[hi]!.dur ? hi : -1;
}

const nodeOfGpuEvent = (e: ProfileEvent) => e.name.split('&')[0]!;

/**
 * Gives the GPU events (in the trace's order, which is the runs' order) to runs: a run's kernels
 * are dispatched by its nodes in the order the host ran them, so run k takes events while their
 * node names follow its node list (a node may dispatch several kernels, or none: a Reshape on the
 * GPU is a view). An event that fits no further node of run k starts run k + 1. `unmatched`: the
 * events left when every run has taken its share (0 when the split is exact).
 */
function gpuByRun(gpu: readonly ProfileEvent[], runNodes: ReadonlyArray<readonly string[]>): { perRun: ProfileEvent[][]; unmatched: number } {
  const perRun: ProfileEvent[][] = runNodes.map(() => []);
  let j = 0;
  for (let k = 0; k < runNodes.length; k++) {
    const nodes = runNodes[k]!;
    let n = 0;
    while (j < gpu.length) {
      const name = nodeOfGpuEvent(gpu[j]!);
      while (n < nodes.length && nodes[n] !== name) n++;
      if (n === nodes.length) break;
      perRun[k]!.push(gpu[j++]!);
    }
  }
  return { perRun, unmatched: gpu.length - j };
}

/** MatMul kernels by input shapes: GPU time and floating-point operations (2·M·N·K). */
export type MatMulTally = Record<string, { us: number; count: number; flops: number }>;

/**
 * A MatMul node's input shapes and work, from its host event's `input_type_shape` and
 * `output_type_shape`: 2 × the output's elements × K, K the first input's last dimension. (The GPU
 * events' own `shapes` are the shader's vectorized views, [64, 16] for a [64, 64] input read as
 * vec4, so they cannot give the work.) Null when the event has no shapes.
 */
export function matmulWork(node: ProfileEvent): { key: string; flops: number } | null {
  const dims = (l: ReadonlyArray<Record<string, number[]>> | undefined, i: number) => Object.values(l?.[i] ?? {})[0];
  const a = dims(node.args?.input_type_shape, 0);
  const b = dims(node.args?.input_type_shape, 1);
  const y = dims(node.args?.output_type_shape, 0);
  if (!a?.length || !b || !y) return null;
  return { key: `[${a.join(',')}]x[${b.join(',')}]`, flops: 2 * y.reduce((p, d) => p * d, 1) * a.at(-1)! };
}

export interface ProfileSummary {
  readonly runs: RunSummary[];
  /** GPU events no run's node list accounts for (0 where the split by order is exact). */
  readonly unmatchedGpuEvents: number;
  /** Whether the trace has GPU kernel times (WebGPU with timestamp queries). */
  readonly gpuTimes: boolean;
}

/** Per `session.run`: its nodes (by host time) and, on WebGPU, its kernels' GPU times. */
export function summarizeRuns(events: readonly ProfileEvent[]): ProfileSummary {
  const runs = events.filter((e) => e.cat === 'Session' && e.name === 'model_run').sort((a, b) => a.ts - b.ts);
  const nodes: ProfileEvent[][] = runs.map(() => []);
  for (const e of events) {
    if (e.cat !== 'Node' || !e.name.endsWith('_kernel_time')) continue;
    const k = runAt(runs, e.ts);
    if (k >= 0) nodes[k]!.push(e);
  }
  for (const ns of nodes) ns.sort((a, b) => a.ts - b.ts);
  // Stable filter: the trace's order of GPU events is the order they were read back.
  const gpuEvents = events.filter((e) => e.cat === 'Api' && e.args?.shapes !== undefined);
  const gpuTimes = gpuEvents.length > 0;
  const { perRun: gpu, unmatched } = gpuByRun(gpuEvents, nodes.map((ns) => ns.map((n) => n.name.slice(0, -'_kernel_time'.length))));
  const out = runs.map((run, k): RunSummary => {
    const byOp: Tally = {};
    const byClass: Tally = {};
    const memcpy = { count: 0, us: 0 };
    let nodeUs = 0;
    for (const n of nodes[k]!) {
      const op = n.args?.op_name ?? '?';
      add(byOp, op, n.dur);
      add(byClass, opClassOf(op), n.dur);
      nodeUs += n.dur;
      if (opClassOf(op) === 'memcpy') {
        memcpy.count++;
        memcpy.us += n.dur;
      }
    }
    const s: RunSummary = { wallUs: run.dur, nodes: nodes[k]!.length, nodeUs, hostGapUs: run.dur - nodeUs, byOp, byClass, memcpy };
    if (!gpuTimes) return s;
    const gOp: Tally = {};
    const gClass: Tally = {};
    const matmul: MatMulTally = {};
    // Node name → the MatMul node's work, each node's counted once (a node may dispatch several kernels).
    const work = new Map(nodes[k]!.filter((n) => n.args?.op_name === 'MatMul').map((n) => [n.name.slice(0, -'_kernel_time'.length), matmulWork(n)] as const));
    const counted = new Set<string>();
    let us = 0;
    for (const e of gpu[k]!) {
      const op = e.name.split('&')[1] ?? '?';
      add(gOp, op, e.dur);
      add(gClass, opClassOf(op), e.dur);
      us += e.dur;
      const node = nodeOfGpuEvent(e);
      const w = op === 'MatMul' ? work.get(node) : null;
      if (w) {
        const t = (matmul[w.key] ??= { us: 0, count: 0, flops: 0 });
        t.us += e.dur;
        if (!counted.has(node)) {
          counted.add(node);
          t.count++;
          t.flops += w.flops;
        }
      }
    }
    return { ...s, gpu: { kernels: gpu[k]!.length, us, byOp: gOp, byClass: gClass, matmul } };
  });
  return { runs: out, unmatchedGpuEvents: unmatched, gpuTimes };
}

/** A share of a total, rounded for reading. */
const share = (part: number, whole: number) => (whole > 0 ? Math.round((1000 * part) / whole) / 1000 : 0);

function topOps(t: Tally, total: number, n: number): Array<{ op: string; ms: number; count: number; share: number }> {
  return Object.entries(t)
    .sort((a, b) => b[1].us - a[1].us)
    .slice(0, n)
    .map(([op, v]) => ({ op, ms: v.us / 1000, count: v.count, share: share(v.us, total) }));
}

const classShares = (t: Tally, total: number) => Object.fromEntries(Object.entries(t).sort((a, b) => b[1].us - a[1].us).map(([k, v]) => [k, { ms: v.us / 1000, share: share(v.us, total) }]));

/** Runs taken together: wall, node and GPU time, by class and op type, MatMul throughput. */
function describe(runs: readonly RunSummary[], gpuTimes: boolean, top: number) {
  const sum = (f: (r: RunSummary) => number) => runs.reduce((a, r) => a + f(r), 0);
  const byOp: Tally = {};
  const byClass: Tally = {};
  const gOp: Tally = {};
  const gClass: Tally = {};
  const mm: MatMulTally = {};
  const merge = <T extends { us: number; count: number; flops?: number }>(into: Record<string, T>, from: Record<string, T>) => {
    for (const [k, v] of Object.entries(from)) {
      const e = (into[k] ??= { ...v, us: 0, count: 0, ...(v.flops === undefined ? {} : { flops: 0 }) });
      e.us += v.us;
      e.count += v.count;
      if (e.flops !== undefined) e.flops += v.flops ?? 0;
    }
  };
  for (const r of runs) {
    merge(byOp, r.byOp);
    merge(byClass, r.byClass);
    if (r.gpu) {
      merge(gOp, r.gpu.byOp);
      merge(gClass, r.gpu.byClass);
      merge(mm, r.gpu.matmul);
    }
  }
  const wall = sum((r) => r.wallUs);
  const node = sum((r) => r.nodeUs);
  const gpuUs = sum((r) => r.gpu?.us ?? 0);
  const mmUs = Object.values(mm).reduce((a, v) => a + v.us, 0);
  const mmFlops = Object.values(mm).reduce((a, v) => a + v.flops, 0);
  /** TFLOP/s from FLOPs and µs. */
  const tflops = (flops: number, us: number) => (us > 0 ? flops / us / 1e6 : 0);
  return {
    runs: runs.length,
    wallMs: wall / 1000,
    /** Node time: the host's `Compute` calls (the kernels on the CPU provider; dispatch only on WebGPU). */
    nodeMs: node / 1000,
    /** Wall time outside every node, and its share of the wall time. */
    hostGapMs: (wall - node) / 1000,
    hostGapShare: share(wall - node, wall),
    nodesPerRun: median(runs.map((r) => r.nodes)),
    memcpyPerRun: median(runs.map((r) => r.memcpy.count)),
    memcpyMs: sum((r) => r.memcpy.us) / 1000,
    byClass: classShares(byClass, node),
    topOps: topOps(byOp, node, top),
    gpu: gpuTimes
      ? {
          kernelsPerRun: median(runs.map((r) => r.gpu?.kernels ?? 0)),
          kernelMs: gpuUs / 1000,
          /** GPU kernel time as a share of the runs' wall time: the rest is waiting, host work, copies. */
          busyShare: share(gpuUs, wall),
          byClass: classShares(gClass, gpuUs),
          topOps: topOps(gOp, gpuUs, top),
          /** MatMul kernels' throughput on the GPU, all of them and by input shapes (the 10 costliest). */
          matmul: {
            ms: mmUs / 1000,
            tflops: tflops(mmFlops, mmUs),
            shapes: Object.entries(mm)
              .sort((a, b) => b[1].us - a[1].us)
              .slice(0, 10)
              .map(([shape, v]) => ({ shape, count: v.count, ms: v.us / 1000, tflops: tflops(v.flops, v.us) })),
          },
        }
      : ('none: this trace has no GPU kernel times (CPU provider, or an adapter without timestamp queries)' as const),
  };
}

/**
 * One session's runs in a few numbers. `steady`: every run after the first (the first allocates,
 * and on WebGPU compiles its shaders); `medianRun`: the steady run of median wall time alone, a
 * typical call (a decode step, not the prefill; one micro-batch of a PPO step).
 */
export function sessionSummary(s: ProfileSummary, top = 15) {
  const steady = s.runs.length > 1 ? s.runs.slice(1) : s.runs;
  const byWall = [...steady].sort((a, b) => a.wallUs - b.wallUs);
  const mid = byWall[(byWall.length - 1) >> 1];
  return {
    runs: s.runs.length,
    firstRunMs: (s.runs[0]?.wallUs ?? 0) / 1000,
    medianRunMs: median(steady.map((r) => r.wallUs)) / 1000,
    /** GPU events no run accounts for (0 when the split by run is exact). */
    unmatchedGpuEvents: s.unmatchedGpuEvents,
    steady: describe(steady, s.gpuTimes, top),
    medianRun: describe(mid ? [mid] : [], s.gpuTimes, top),
  };
}
export type SessionProfile = ReturnType<typeof sessionSummary>;

/** Summaries of every profile file, by file name less ORT's date suffix; one file at a time. */
export async function summarizeFiles(files: readonly string[], top = 15): Promise<Record<string, SessionProfile>> {
  const out: Record<string, SessionProfile> = {};
  for (const f of files) out[basename(f).replace(/_\d{4}-\d\d-\d\d_\d\d-\d\d-\d\d(_\d+)?\.json$/, '')] = sessionSummary(summarizeRuns(await readProfile(f)), top);
  return out;
}

/** A session's name without a policy's shared scope (`shared_base_<model>_lora_…_<graph>` → `<graph>`). */
const shortName = (session: string) => session.replace(/^shared_.*_entropy_(true|false)_/, '');

/** The summaries as a Markdown table, a row per session: its median run, where the time goes. */
export function profileTable(model: string, sessions: Record<string, SessionProfile>): string {
  const pct = (x: number) => `${(100 * x).toFixed(0)}%`;
  const lines = [
    `\nProfile of ${model} (median run of each session; shares of its wall time, node time or GPU kernel time)`,
    '| session | runs | median run ms | nodes | node ms | host gap | memcpy | top classes (node time) | GPU kernels | GPU busy | top classes (GPU time) | MatMul TFLOP/s |',
    '|---|---|---|---|---|---|---|---|---|---|---|---|',
  ];
  const classes = (c: Record<string, { share: number }>) => Object.entries(c).slice(0, 3).map(([k, v]) => `${k} ${pct(v.share)}`).join(', ');
  for (const [name, s] of Object.entries(sessions)) {
    const m = s.medianRun;
    const g = typeof m.gpu === 'string' ? null : m.gpu;
    lines.push(`| ${shortName(name)} | ${s.runs} | ${s.medianRunMs.toFixed(1)} | ${m.nodesPerRun} | ${m.nodeMs.toFixed(1)} | ${pct(m.hostGapShare)} | ${m.memcpyPerRun} | ${classes(m.byClass)} | ${g ? g.kernelsPerRun : '—'} | ${g ? pct(g.busyShare) : '—'} | ${g ? classes(g.byClass) : '—'} | ${g && g.matmul.ms > 0 ? g.matmul.tflops.toFixed(4) : '—'} |`);
  }
  return lines.join('\n');
}
