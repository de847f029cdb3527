/**
 * Per-kernel profiles of one step on both sides, in one shape (`profile-both.ts` writes them):
 * Troupe's from ONNX Runtime's traces (node time by op type, a step's runs picked out of a session's
 * runs), PyTorch's from torch.profiler (self time by aten op, as `torch_bench.py` reports it with
 * `"profile": k`), and the side-by-side table the bench prints.
 *
 * A Troupe step is one or more `session.run`s: a train step runs the train graph once per
 * micro-batch, then AdamW; a decode step is one run of the decode graph. The engine profiles every
 * run of a session from its creation, warm-ups included, so the step's runs are picked by count:
 * the session ran the same work `repeats` times (warm-ups + the profiled one), and the profiled one
 * is the last `runs / repeats` runs (for decode, those of the last generation, less its prefill).
 */
import { basename } from 'node:path';
import { z } from 'zod';
import { opClassOf, readProfile, type ProfileEvent } from '../gpu/profile-summary.ts';

/** One op (type, or type and input shapes) in a step: time and calls per step, share of the step's op time. */
export interface OpRow {
  readonly op: string;
  readonly ms: number;
  readonly count: number;
  readonly share: number;
}

/** Where one step of one side went. */
export interface StepProfile {
  /** Steps the figures are averaged over. */
  readonly steps: number;
  /** The step's wall time as its caller measured it, in the profiled run (the profiler's cost included). */
  readonly stepMs: number;
  /** Time inside the ops: Troupe's node time, PyTorch's self time of every op. */
  readonly opMs: number;
  /** `stepMs − opMs`: outside every op (Troupe: feeds, fetches, the executor, host work in the worker; PyTorch: Python and dispatch between ops). */
  readonly outsideMs: number;
  /** Kernels (Troupe nodes, PyTorch op calls) per step. */
  readonly calls: number;
  /** By op type, costliest first (the top `top`). */
  readonly ops: OpRow[];
  /** By op type and input shapes, costliest first. */
  readonly shapes: OpRow[];
  /** GEMM share of the op time (Troupe: MatMul, Gemm, MatMulNBits…; PyTorch: aten::mm, addmm, bmm…). */
  readonly gemmShare: number;
}

/** torch.profiler's aten ops that run a BLAS GEMM or GEMV (their self time is the BLAS call). */
export const torchGemmOps: readonly string[] = ['aten::mm', 'aten::addmm', 'aten::bmm', 'aten::baddbmm', 'aten::addmv', 'aten::mv', 'aten::dot', 'aten::addbmm'];

/** A session's trace file name less ORT's date suffix (the session name, `:` and the like as `_`). */
export const sessionOfFile = (file: string): string => basename(file).replace(/_\d{4}-\d\d-\d\d_\d\d-\d\d-\d\d(_\d+)?\.json$/, '');

/** The graph a session runs, from its name's tail: `…_train-ppo-shared` → `train-ppo-shared`. */
export function graphOfSession(session: string): string {
  const m = /(?:^|_)((?:train|adamw|decode|score|features|row-logits)[A-Za-z0-9.-]*)$/.exec(session);
  return m ? m[1]! : session;
}

/** A session's runs (`model_run` events) in order, and its node events. */
export interface SessionTrace {
  readonly session: string;
  readonly runs: ProfileEvent[];
  readonly nodes: ProfileEvent[];
}

export function splitTrace(session: string, events: readonly ProfileEvent[]): SessionTrace {
  return {
    session,
    runs: events.filter((e) => e.cat === 'Session' && e.name === 'model_run').sort((a, b) => a.ts - b.ts),
    nodes: events.filter((e) => e.cat === 'Node' && e.name.endsWith('_kernel_time')),
  };
}

export async function readSessionTrace(file: string): Promise<SessionTrace> {
  return splitTrace(sessionOfFile(file), await readProfile(file));
}

/**
 * The runs of the last of `repeats` equal passes over a session (each pass `runs / repeats` runs),
 * less the first `skipFirst` of that pass (a generation's prefill). An error when the runs do not
 * split evenly: then the passes were not the same work and no run count picks the last one.
 */
export function lastPass(t: SessionTrace, repeats: number, skipFirst = 0): ProfileEvent[] {
  if (!(repeats >= 1) || t.runs.length % repeats !== 0) throw new Error(`session ${t.session}: ${t.runs.length} runs do not split into ${repeats} equal passes`);
  const per = t.runs.length / repeats;
  if (skipFirst >= per) throw new Error(`session ${t.session}: a pass of ${per} runs has none left after skipping ${skipFirst}`);
  return t.runs.slice(t.runs.length - per + skipFirst);
}

/** A node's op type and input shapes, e.g. `MatMul [256,896]x[896,151936]`. */
export function nodeKey(e: ProfileEvent): string {
  const shapes = (e.args?.input_type_shape ?? []).map((s) => `[${(Object.values(s)[0] ?? []).join(',')}]`);
  return `${e.args?.op_name ?? '?'} ${shapes.join('x')}`.trim();
}

function rows(t: Map<string, { us: number; count: number }>, totalUs: number, steps: number, top: number): OpRow[] {
  return [...t]
    .sort((a, b) => b[1].us - a[1].us)
    .slice(0, top)
    .map(([op, v]) => ({ op, ms: v.us / 1000 / steps, count: v.count / steps, share: totalUs > 0 ? v.us / totalUs : 0 }));
}

/**
 * Troupe's step from the runs picked out of each session (`picked`: session trace and its runs in
 * the step; several sessions for a train step). `steps`: how many steps those runs make (decode: the
 * generation's steps); `stepMs`: the caller's wall time per step.
 */
export function troupeStep(picked: ReadonlyArray<{ trace: SessionTrace; runs: readonly ProfileEvent[] }>, steps: number, stepMs: number, top = 15): StepProfile {
  const byOp = new Map<string, { us: number; count: number }>();
  const byShape = new Map<string, { us: number; count: number }>();
  let totalUs = 0;
  let gemmUs = 0;
  let calls = 0;
  const add = (t: Map<string, { us: number; count: number }>, k: string, us: number) => {
    const e = t.get(k) ?? { us: 0, count: 0 };
    e.us += us;
    e.count++;
    t.set(k, e);
  };
  for (const { trace, runs } of picked) {
    // Runs of one session do not overlap, so a node belongs to the run whose span holds its start.
    const spans = [...runs].sort((a, b) => a.ts - b.ts);
    for (const n of trace.nodes) {
      if (!spans.some((r) => n.ts >= r.ts && n.ts <= r.ts + r.dur)) continue;
      const op = n.args?.op_name ?? '?';
      add(byOp, op, n.dur);
      add(byShape, nodeKey(n), n.dur);
      totalUs += n.dur;
      if (opClassOf(op) === 'matmul') gemmUs += n.dur;
      calls++;
    }
  }
  const opMs = totalUs / 1000 / steps;
  return { steps, stepMs, opMs, outsideMs: stepMs - opMs, calls: calls / steps, ops: rows(byOp, totalUs, steps, top), shapes: rows(byShape, totalUs, steps, top), gemmShare: totalUs > 0 ? gemmUs / totalUs : 0 };
}

/** `torch_bench.py`'s `profile` reply (PROFILES in its docstring). */
export const torchProfileSchema = z.object({
  steps: z.number().int().positive(),
  wallMs: z.number(),
  selfMs: z.number(),
  ops: z.array(z.object({ op: z.string(), selfMs: z.number(), count: z.number(), share: z.number() })),
  shapes: z.array(z.object({ op: z.string(), inputShapes: z.array(z.array(z.number())), selfMs: z.number(), count: z.number(), share: z.number() })),
});
export type TorchProfile = z.infer<typeof torchProfileSchema>;

/**
 * PyTorch's step in the same terms. `calls` counts the top rows' calls only when the reply lists
 * every op (it lists the top k): the sum over the rows given. The GEMM share is of the listed ops,
 * a lower bound where a GEMM op fell outside the top k.
 */
export function torchStep(p: TorchProfile): StepProfile {
  const shapeText = (s: readonly number[][]) => s.filter((d) => d.length > 0).map((d) => `[${d.join(',')}]`).join('x');
  return {
    steps: p.steps,
    stepMs: p.wallMs,
    opMs: p.selfMs,
    outsideMs: p.wallMs - p.selfMs,
    calls: p.ops.reduce((a, r) => a + r.count, 0),
    ops: p.ops.map((r) => ({ op: r.op, ms: r.selfMs, count: r.count, share: r.share })),
    shapes: p.shapes.map((r) => ({ op: `${r.op} ${shapeText(r.inputShapes)}`.trim(), ms: r.selfMs, count: r.count, share: r.share })),
    gemmShare: p.ops.filter((r) => torchGemmOps.includes(r.op)).reduce((a, r) => a + r.share, 0),
  };
}

/** The two sides' steps side by side as Markdown: a summary line, then the top ops rank by rank. */
export function sideBySide(title: string, troupe: StepProfile | null, pytorch: StepProfile | null, top = 15, key: 'ops' | 'shapes' = 'ops'): string {
  const pct = (x: number) => `${(100 * x).toFixed(1)}%`;
  const head = (name: string, s: StepProfile | null) =>
    s === null ? `${name}: not run` : `${name} ${s.stepMs.toFixed(2)} ms/step (ops ${s.opMs.toFixed(2)}, outside ops ${s.outsideMs.toFixed(2)} = ${pct(s.outsideMs / s.stepMs)}; GEMM ${pct(s.gemmShare)} of op time; ${s.calls.toFixed(0)} calls/step${name === 'PyTorch' ? ' in the top rows' : ''})`;
  const cell = (r: OpRow | undefined) => (r ? `${r.op} | ${pct(r.share)} | ${r.ms.toFixed(3)} | ${Number.isInteger(r.count) ? r.count : r.count.toFixed(1)}` : ' | | | ');
  const lines = [`\n### ${title}`, `${head('Troupe', troupe)}`, `${head('PyTorch', pytorch)}`, '', '| # | Troupe op | share | ms/step | calls | PyTorch op (self time) | share | ms/step | calls |', '|---|---|---|---|---|---|---|---|---|'];
  const a = troupe?.[key] ?? [];
  const b = pytorch?.[key] ?? [];
  for (let i = 0; i < Math.min(top, Math.max(a.length, b.length)); i++) lines.push(`| ${i + 1} | ${cell(a[i])} | ${cell(b[i])} |`);
  return lines.join('\n');
}
