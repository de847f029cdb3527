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
import { readFileSync } from 'node:fs';
import { z } from 'zod';

/** One trace event, as far as the summary reads it. */
const eventSchema = z.object({
  cat: z.string(),
  name: z.string(),
  ts: z.number(),
  dur: z.number().default(0),
  args: z
    .object({
      op_name: z.string().optional(),
      provider: z.string().optional(),
      shapes: z.string().optional(),
    })
    .passthrough()
    .optional(),
});
export type ProfileEvent = z.infer<typeof eventSchema>;

/** Reads and checks one profile file; an unreadable one is an error naming the file. */
export function readProfile(file: string): ProfileEvent[] {
  let raw: unknown;
  try {
    raw = JSON.parse(readFileSync(file, 'utf8'));
  } catch (e) {
    throw new Error(`profile ${file}: not a JSON trace (${e instanceof Error ? e.message : String(e)})`);
  }
  const r = z.array(eventSchema).safeParse(raw);
  if (!r.success) throw new Error(`profile ${file}: not an ONNX Runtime trace: ${r.error.issues[0]?.path.join('.') ?? ''} ${r.error.issues[0]?.message ?? ''}`);
  return r.data;
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
  readonly gpu?: { kernels: number; us: number; byOp: Tally; byClass: Tally };
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
    let us = 0;
    for (const e of gpu[k]!) {
      const op = e.name.split('&')[1] ?? '?';
      add(gOp, op, e.dur);
      add(gClass, opClassOf(op), e.dur);
      us += e.dur;
    }
    return { ...s, gpu: { kernels: gpu[k]!.length, us, byOp: gOp, byClass: gClass } };
  });
  return { runs: out, unmatchedGpuEvents: unmatched, gpuTimes };
}

const median = (xs: readonly number[]): number => {
  const s = [...xs].sort((a, b) => a - b);
  const m = s.length >> 1;
  return s.length === 0 ? NaN : s.length % 2 ? s[m]! : (s[m - 1]! + s[m]!) / 2;
};

/** A share of a total, rounded for reading. */
const share = (part: number, whole: number) => (whole > 0 ? Math.round((1000 * part) / whole) / 1000 : 0);

function topOps(t: Tally, total: number, n: number): Array<{ op: string; ms: number; count: number; share: number }> {
  return Object.entries(t)
    .sort((a, b) => b[1].us - a[1].us)
    .slice(0, n)
    .map(([op, v]) => ({ op, ms: v.us / 1000, count: v.count, share: share(v.us, total) }));
}

const classShares = (t: Tally, total: number) => Object.fromEntries(Object.entries(t).sort((a, b) => b[1].us - a[1].us).map(([k, v]) => [k, { ms: v.us / 1000, share: share(v.us, total) }]));

/**
 * One session's runs in a few numbers: every run counted, but per-run figures over the runs after
 * the first (the first run of a session allocates, and on WebGPU compiles its shaders).
 */
export function sessionSummary(s: ProfileSummary, top = 15) {
  const steady = s.runs.length > 1 ? s.runs.slice(1) : s.runs;
  const sum = (f: (r: RunSummary) => number) => steady.reduce((a, r) => a + f(r), 0);
  const byOp: Tally = {};
  const byClass: Tally = {};
  const gOp: Tally = {};
  const gClass: Tally = {};
  const merge = (into: Tally, from: Tally) => {
    for (const [k, v] of Object.entries(from)) {
      const e = (into[k] ??= { us: 0, count: 0 });
      e.us += v.us;
      e.count += v.count;
    }
  };
  for (const r of steady) {
    merge(byOp, r.byOp);
    merge(byClass, r.byClass);
    if (r.gpu) {
      merge(gOp, r.gpu.byOp);
      merge(gClass, r.gpu.byClass);
    }
  }
  const wall = sum((r) => r.wallUs);
  const node = sum((r) => r.nodeUs);
  const gpuUs = sum((r) => r.gpu?.us ?? 0);
  return {
    runs: s.runs.length,
    steadyRuns: steady.length,
    firstRunMs: (s.runs[0]?.wallUs ?? 0) / 1000,
    medianRunMs: median(steady.map((r) => r.wallUs)) / 1000,
    nodesPerRun: median(steady.map((r) => r.nodes)),
    /** Over the steady runs: wall time, node time, and the host's share outside the nodes. */
    wallMs: wall / 1000,
    nodeMs: node / 1000,
    hostGapMs: (wall - node) / 1000,
    hostGapShare: share(wall - node, wall),
    memcpyPerRun: median(steady.map((r) => r.memcpy.count)),
    memcpyMs: sum((r) => r.memcpy.us) / 1000,
    byClass: classShares(byClass, node),
    topOps: topOps(byOp, node, top),
    gpu: s.gpuTimes
      ? {
          kernelsPerRun: median(steady.map((r) => r.gpu?.kernels ?? 0)),
          kernelMs: gpuUs / 1000,
          /** GPU kernel time as a share of the runs' wall time: the rest is waiting, host work, copies. */
          busyShare: share(gpuUs, wall),
          byClass: classShares(gClass, gpuUs),
          topOps: topOps(gOp, gpuUs, top),
          unmatchedEvents: s.unmatchedGpuEvents,
        }
      : 'none: this trace has no GPU kernel times (CPU provider, or an adapter without timestamp queries)',
  };
}
export type SessionProfile = ReturnType<typeof sessionSummary>;

/** Summaries of every profile file, by file name. */
export function summarizeFiles(files: readonly string[], top = 15): Record<string, SessionProfile> {
  return Object.fromEntries(files.map((f) => [f.split('/').at(-1)!.replace(/_\d{4}-\d\d-\d\d_\d\d-\d\d-\d\d(_\d+)?\.json$/, ''), sessionSummary(summarizeRuns(readProfile(f)), top)]));
}
