/**
 * `adapters/export`: the same export as `troupe export`, for a run of the workspace, into a folder
 * inside the workspace or an allowed folder (path-confinement.ts), never into `.troupe/`. It reads
 * checkpoint files only, so it can run while the run trains (a `latest` export re-reads until it
 * sees one step throughout; see export-run.ts). `$/cancelRequest` stops it between files and
 * removes what it wrote.
 */
import { join } from 'node:path';
import type { CheckpointChoice } from '../runs/checkpoint-weights.ts';
import { exportRun } from '../runs/export-run.ts';
import { ErrorCodes, RpcError } from '../protocol/json-rpc.ts';
import type { RequestHandlers } from './connection.ts';
import type { RunManager } from '../runs/run-manager.ts';
import { ClientPathError, type PathConfinement } from '../runs/path-confinement.ts';

export function exportHandler(manager: RunManager, paths: PathConfinement): RequestHandlers['adapters/export'] {
  return async (p, ctx) => {
    // The destination first: a refused path is refused whatever the run.
    let out: string;
    try {
      out = await paths.resolve(p.outDir, 'outDir', { write: true });
    } catch (e) {
      if (e instanceof ClientPathError) throw new RpcError(ErrorCodes.FileError, e.message);
      throw e;
    }
    const run = manager.store.getRun(p.runId);
    if (!run) throw new RpcError(ErrorCodes.UnknownRun, `unknown run '${p.runId}'`);
    const choice: CheckpointChoice =
      p.checkpoint === 'initial' || p.checkpoint === 0 ? { kind: 'initial' } : p.checkpoint === 'latest' || p.checkpoint === 'best' ? { kind: p.checkpoint } : { kind: 'step', step: p.checkpoint };
    ctx.progress.begin(`Exporting run ${run.id}`, `checkpoint ${String(p.checkpoint)}`);
    try {
      const r = await exportRun(run.runDir, choice, out, ctx.signal);
      ctx.progress.end(`wrote ${r.written.length} folders`);
      return { outDir: out, step: r.step, files: [...r.written.flatMap((w) => w.files.map((f) => join(w.dir, f))), r.manifestPath] };
    } catch (e) {
      ctx.progress.end(ctx.signal.aborted ? 'cancelled' : 'failed');
      if (ctx.signal.aborted) throw new RpcError(ErrorCodes.RequestCancelled, `export of run ${run.id} cancelled; nothing was left in ${out}`);
      throw new RpcError(ErrorCodes.FileError, `cannot export run ${run.id}: ${e instanceof Error ? e.message : String(e)}`);
    }
  };
}
