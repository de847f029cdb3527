/**
 * Two `bench:engine` results files side by side: each figure's speedup in both runs, their ratio,
 * and how many agree within a tolerance (issue 37: the same command on two machines of one kind
 * must give the same ratios within 10%). Where both runs hold the older estimator too
 * (`speedupOfMedians`, the ratio of the two sides' medians), it is compared the same way, so one
 * pair of runs shows what the bracketed median changes. Also prints both runs' load, MatMul peaks
 * and baseline flags.
 *
 *   node --import tsx bench/engine/compare-runs.ts <first.json> <second.json> [--tolerance 0.10] [--json]
 */
import { readFileSync } from 'node:fs';
import { parseArgs } from 'node:util';
import { z } from 'zod';

const rowSchema = z.object({
  model: z.object({ name: z.string() }),
  figure: z.string(),
  speedup: z.number(),
  speedupOfMedians: z.number().optional(),
  speedupSpread: z.object({ q25: z.number(), q75: z.number(), n: z.number() }).optional(),
});
const runSchema = z.object({
  date: z.string(),
  loadAverage: z.object({ start: z.number(), end: z.number() }),
  matmulPeakGflops: z.object({ troupe: z.number(), pytorch: z.number() }),
  baselineFlags: z.array(z.object({ code: z.string() })),
  results: z.array(rowSchema.passthrough()),
});
type Run = z.infer<typeof runSchema>;

function load(file: string): Run {
  const parsed = runSchema.safeParse(JSON.parse(readFileSync(file, 'utf8')));
  if (!parsed.success) throw new Error(`${file}: not a bench:engine results file (${parsed.error.issues[0]?.path.join('.')}: ${parsed.error.issues[0]?.message})`);
  return parsed.data;
}

export interface FigureComparison {
  model: string;
  figure: string;
  first: number;
  second: number;
  ratio: number;
  within: boolean;
  oldFirst: number | null;
  oldSecond: number | null;
  oldWithin: boolean | null;
}

/** The figures both runs measured, compared; `tolerance` 0.1 means within 10% of the first run. */
export function compareRuns(a: Run, b: Run, tolerance: number): FigureComparison[] {
  const key = (r: z.infer<typeof rowSchema>): string => `${r.model.name}\u0000${r.figure}`;
  const second = new Map(b.results.map((r) => [key(r), r]));
  const close = (x: number, y: number): boolean => Math.abs(y / x - 1) <= tolerance + 1e-12;
  return a.results.flatMap((r) => {
    const s = second.get(key(r));
    if (!s) return [];
    const old = r.speedupOfMedians !== undefined && s.speedupOfMedians !== undefined;
    return [{
      model: r.model.name,
      figure: r.figure,
      first: r.speedup,
      second: s.speedup,
      ratio: s.speedup / r.speedup,
      within: close(r.speedup, s.speedup),
      oldFirst: old ? r.speedupOfMedians! : null,
      oldSecond: old ? s.speedupOfMedians! : null,
      oldWithin: old ? close(r.speedupOfMedians!, s.speedupOfMedians!) : null,
    }];
  });
}

function main(argv: string[]): void {
  const usage = 'usage: compare-runs.ts <first.json> <second.json> [--tolerance 0.10] [--json]';
  const { values, positionals: files } = parseArgs({ args: argv, options: { tolerance: { type: 'string', default: '0.1' }, json: { type: 'boolean', default: false } }, allowPositionals: true });
  const tolerance = Number(values.tolerance);
  if (files.length !== 2 || !(tolerance > 0)) throw new Error(usage);
  const [a, b] = files.map(load) as [Run, Run];
  const rows = compareRuns(a, b, tolerance);
  if (values.json) {
    console.log(JSON.stringify({ tolerance, first: files[0], second: files[1], rows }, null, 2));
    return;
  }
  const pct = `${Math.round(tolerance * 100)}%`;
  console.log(`| model | figure | first | second | second / first | old estimator: first, second |`);
  console.log('|---|---|---|---|---|---|');
  for (const r of rows) {
    const old = r.oldFirst === null ? 'n/a' : `${r.oldFirst.toFixed(2)}x, ${r.oldSecond!.toFixed(2)}x${r.oldWithin ? '' : ` (>${pct})`}`;
    console.log(`| ${r.model} | ${r.figure} | ${r.first.toFixed(2)}x | ${r.second.toFixed(2)}x | ${r.ratio.toFixed(2)}${r.within ? '' : ` (>${pct})`} | ${old} |`);
  }
  const olds = rows.filter((r) => r.oldWithin !== null);
  console.log(`\n${rows.filter((r) => r.within).length} of ${rows.length} figures within ${pct}` + (olds.length ? `; with the ratio of medians ${olds.filter((r) => r.oldWithin).length} of ${olds.length}` : ''));
  for (const [name, run] of [['first', a], ['second', b]] as const) {
    console.log(`${name}: ${run.date}, load ${run.loadAverage.start.toFixed(2)} -> ${run.loadAverage.end.toFixed(2)}, MatMul peaks Troupe ${run.matmulPeakGflops.troupe.toFixed(0)} / PyTorch ${run.matmulPeakGflops.pytorch.toFixed(0)} GFLOP/s, flags: ${run.baselineFlags.map((f) => f.code).join(', ') || 'none'}`);
  }
}

if (import.meta.url === `file://${process.argv[1]}`) main(process.argv.slice(2));
