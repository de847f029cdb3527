/**
 * Optimizer settings (AdamW with global-norm clipping) and the learning-rate schedule.
 * The update itself is an ONNX graph (`buildAdamW` in artifacts.ts); this file holds the
 * validated configuration and the host-side arithmetic fed to it each step.
 */
import type { OptimizerConfig } from '../protocol/model-schemas.ts';

// Declared once in protocol (the experiment config's `optimizer`).
export { optimizerSchema } from '../protocol/model-schemas.ts';
export type { OptimizerConfig };

/** Learning rate for optimizer step `step` (0-based). */
export function learningRate(o: OptimizerConfig, step: number): number {
  const s = o.schedule;
  if (s.kind === 'constant') return o.lr;
  if (step < s.warmupSteps) return (o.lr * (step + 1)) / (s.warmupSteps + 1);
  const span = Math.max(1, s.totalSteps - s.warmupSteps);
  const progress = Math.min(1, (step - s.warmupSteps) / span);
  const floor = o.lr * s.minLrRatio;
  return floor + (o.lr - floor) * 0.5 * (1 + Math.cos(Math.PI * progress));
}
