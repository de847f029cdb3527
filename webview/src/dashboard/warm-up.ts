/**
 * The dashboard's view of a run's warm-up (the supervised warm start before step 0): the words of
 * its status line and its loss curve as a chart series. Pure (no DOM), so unit tested.
 */
import type { WarmUpProgress } from '../../../server/protocol/methods.ts';
import type { ChartSpec } from './chart-groups.ts';
import type { SeriesInput } from './series-store.ts';

/** The warm-up's one chart: the smoothed loss by warm-up step, a line per base model. */
export const warmUpChartSpecs: readonly ChartSpec[] = [{ id: 'warm-up-loss', title: 'Warm-up loss (on solver demonstrations, smoothed)', axis: 'nats per token', match: /^warmup\/loss$/ }];

/** A model's loss points as the chart's series (its scope names the model). */
export function warmUpSeries(p: Pick<WarmUpProgress, 'modelId' | 'points'>): SeriesInput {
  return { name: 'warmup/loss', agentId: `model ${p.modelId}`, points: p.points.map((q) => ({ step: q.step, value: q.loss })) };
}

/** Whether the last model's warm-up has run its last step (step 0's validation comes next). */
export function warmUpDone(p: WarmUpProgress): boolean {
  return p.model === p.models && p.step >= p.steps && p.stage === 'training';
}

/**
 * The status line: what the warm-up is doing, how far it is, its loss, ETA and last checkpoint.
 * `paused` when the run is not training (paused, stopped or failed in the warm-up).
 */
export function describeWarmUp(p: WarmUpProgress, o: { readonly training: boolean; readonly duration: (ms: number) => string }): string {
  const parts: string[] = [];
  if (p.models > 1) parts.push(`model '${p.modelId}' (${p.model} of ${p.models})`);
  if (o.training && p.stage === 'demonstrations') parts.push('collecting solver demonstrations');
  else if (o.training && p.stage === 'dagger') parts.push(`DAgger round at step ${p.step}: the model plays, the solver labels the states it reaches`);
  parts.push(`step ${p.step} / ${p.steps}`);
  if (p.loss !== null) parts.push(`loss ${p.loss.toFixed(4)}`);
  if (o.training && p.etaMs !== null && p.step < p.steps) parts.push(`ETA ${o.duration(p.etaMs)}`);
  if (p.checkpointStep !== null) parts.push(`checkpointed at step ${p.checkpointStep}`);
  return parts.join(' · ');
}
