/**
 * Optimizer settings (AdamW with global-norm clipping) and the learning-rate schedule.
 * The update itself is an ONNX graph (`buildAdamW` in artifacts.ts); this file holds the
 * validated configuration and the host-side arithmetic fed to it each step.
 */
import { z } from 'zod';
import { sizeLimits } from '../protocol/experiment-config.ts';

export const scheduleSchema = z.discriminatedUnion('kind', [
  z.object({ kind: z.literal('constant') }).strict(),
  z
    .object({
      kind: z.literal('cosine'),
      /** Steps of linear warm-up from 0 to the peak learning rate. */
      warmupSteps: z.number().int().min(0).max(sizeLimits.optimizerSteps),
      /** Total optimizer steps of the schedule; after it the rate stays at its floor. */
      totalSteps: z.number().int().positive().max(sizeLimits.optimizerSteps),
      /** Floor of the cosine decay as a fraction of the peak rate. */
      minLrRatio: z.number().min(0).max(1).default(0),
    })
    .strict(),
]);

export const optimizerSchema = z
  .object({
    /** Peak learning rate. */
    lr: z.number().positive(),
    /** AdamW β₁. */
    beta1: z.number().min(0).lt(1).default(0.9),
    /** AdamW β₂. */
    beta2: z.number().min(0).lt(1).default(0.999),
    /** AdamW ε. */
    eps: z.number().positive().default(1e-8),
    /** Decoupled weight decay (applied to matrices, not to norm gains or biases). */
    weightDecay: z.number().min(0).default(0.01),
    /** Global gradient-norm clip; 0 disables clipping. */
    maxGradNorm: z.number().min(0).default(1.0),
    schedule: scheduleSchema.default({ kind: 'constant' }),
  })
  .strict();

export type OptimizerConfig = z.output<typeof optimizerSchema>;
export type Schedule = z.output<typeof scheduleSchema>;

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
