/**
 * The critic of `algorithm.name: "ppo"`: a value head per policy, V(s) = w·h(s) + b, where h(s) is
 * the policy's final-normed hidden state at the last token of the prompt s (`Policy.features`,
 * the vector its LM head reads). w [C] and b are fp32, start at zero (V = 0 before the first
 * update) and are trained here on the host with Adam on PPO's clipped value loss (`gae.ts`),
 * in a step of their own after the policy's update.
 *
 * Why this shape: the head reads the policy's own representation of the state, so it costs no
 * second model; the trunk is detached (the value loss does not train the policy's weights or
 * adapter), so the compiled train step, AdamW, LoRA export and checkpoints of the policy are
 * unchanged, and the head is a [C] vector whose exact gradient is two lines of code. The price:
 * the critic cannot shape the features it reads (a shared-trunk head would), and the features
 * move as the policy trains. With the trunk detached a `valueCoef` weighting the value loss
 * against the policy loss would have no effect (the losses train disjoint parameters, and Adam
 * is invariant to a gradient's scale), so the critic's step size is `algorithm.valueLr` instead.
 */
import type { Policy } from '../models/policy.ts';
import type { Metric } from '../protocol/trajectory.ts';
import type { AlgorithmConfig } from '../protocol/experiment-config.ts';
import { clippedValueLoss, explainedVariance, normalizeAdvantages, trajectoryGae, type TurnSample } from './gae.ts';
import { miniBatchIndices } from './ppo-update.ts';

const BETA1 = 0.9;
const BETA2 = 0.999;
const ADAM_EPS = 1e-8;

/** A value head's state, as checkpoints keep it (JSON). */
export interface ValueHeadState {
  readonly w: number[];
  readonly b: number;
  readonly m: number[];
  readonly v: number[];
  readonly step: number;
}

export class ValueHead {
  readonly w: Float32Array;
  b = 0;
  private readonly m: Float64Array;
  private readonly v: Float64Array;
  /** Adam steps taken. */
  step = 0;

  constructor(readonly size: number) {
    this.w = new Float32Array(size);
    this.m = new Float64Array(size + 1);
    this.v = new Float64Array(size + 1);
  }

  predict(features: readonly Float32Array[]): Float64Array {
    return Float64Array.from(features, (x, i) => {
      if (x.length !== this.size) throw new Error(`value head: features ${i} have ${x.length} values, the head ${this.size}`);
      let s = this.b;
      for (let c = 0; c < this.size; c++) s += this.w[c]! * x[c]!;
      return s;
    });
  }

  /**
   * One Adam step on the clipped value loss of a mini-batch; returns the loss and clip fraction
   * measured before the step.
   */
  update(features: readonly Float32Array[], returns: ArrayLike<number>, oldValues: ArrayLike<number>, clip: number, lr: number): { loss: number; clipFrac: number } {
    const { loss, grad, clipFrac } = clippedValueLoss(this.predict(features), oldValues, returns, clip);
    if (!Number.isFinite(loss)) return { loss, clipFrac };
    const g = new Float64Array(this.size + 1); // [dw..., db]
    features.forEach((x, i) => {
      const gi = grad[i]!;
      if (gi === 0) return;
      for (let c = 0; c < this.size; c++) g[c]! += gi * x[c]!;
      g[this.size]! += gi;
    });
    this.step++;
    const bc1 = 1 - BETA1 ** this.step;
    const bc2 = 1 - BETA2 ** this.step;
    for (let c = 0; c <= this.size; c++) {
      this.m[c] = BETA1 * this.m[c]! + (1 - BETA1) * g[c]!;
      this.v[c] = BETA2 * this.v[c]! + (1 - BETA2) * g[c]! * g[c]!;
      const d = (lr * (this.m[c]! / bc1)) / (Math.sqrt(this.v[c]! / bc2) + ADAM_EPS);
      if (c < this.size) this.w[c] = this.w[c]! - d;
      else this.b -= d;
    }
    return { loss, clipFrac };
  }

  state(): ValueHeadState {
    return { w: [...this.w], b: this.b, m: [...this.m], v: [...this.v], step: this.step };
  }

  static fromState(s: ValueHeadState, size: number, what: string): ValueHead {
    if (s.w.length !== size || s.m.length !== size + 1 || s.v.length !== size + 1) throw new Error(`${what}: value head of size ${s.w.length}, the model's hidden size is ${size}`);
    const h = new ValueHead(size);
    h.w.set(s.w);
    h.b = s.b;
    h.m.set(s.m);
    h.v.set(s.v);
    h.step = s.step;
    return h;
  }
}

/** The value-head options of `algorithm`. */
export interface ValueTrainOptions {
  readonly valueClip: number;
  readonly valueLr: number;
  readonly ppoEpochs: number;
  readonly miniBatches: number;
  readonly seed: number;
}

/**
 * Trains a head on one step's states: `ppoEpochs` passes, each shuffled into `miniBatches`
 * mini-batches with one Adam step each (as the policy's update). Returns the mean loss and clip
 * fraction over the mini-batches, each measured before its step.
 */
export function trainValueHead(head: ValueHead, features: readonly Float32Array[], returns: ArrayLike<number>, oldValues: ArrayLike<number>, o: ValueTrainOptions): { loss: number; clipFrac: number } {
  let loss = 0;
  let clipFrac = 0;
  let steps = 0;
  for (let epoch = 0; epoch < o.ppoEpochs; epoch++) {
    for (const idx of miniBatchIndices(features.length, o.miniBatches, (o.seed + epoch * 0x9e3779b9) >>> 0)) {
      const r = head.update(
        idx.map((i) => features[i]!),
        idx.map((i) => returns[i]!),
        idx.map((i) => oldValues[i]!),
        o.valueClip,
        o.valueLr,
      );
      loss += r.loss;
      clipFrac += r.clipFrac;
      steps++;
    }
  }
  return { loss: loss / steps, clipFrac: clipFrac / steps };
}

/** What the critic needs of a sample. */
export interface CriticSample {
  readonly policyId: string;
  readonly promptTokens: Int32Array;
}

/** One step's states as the critic saw them, in sample order. */
export interface CriticStep {
  readonly policyOf: readonly string[];
  readonly features: readonly Float32Array[];
  readonly values: Float64Array;
  readonly returns: Float64Array;
}

/** The value heads of a run's policies, one per policy, created at zero. */
export class Critic {
  readonly heads = new Map<string, ValueHead>();

  constructor(policies: ReadonlyMap<string, Policy>) {
    for (const [id, p] of policies) this.heads.set(id, new ValueHead(p.config.hiddenSize));
  }

  /** Each sample's state features (from its own policy) and value V(s), in sample order. */
  async evaluate(policies: ReadonlyMap<string, Policy>, samples: readonly CriticSample[]): Promise<{ features: Float32Array[]; values: Float64Array }> {
    const features = new Array<Float32Array>(samples.length);
    const values = new Float64Array(samples.length);
    for (const [id, policy] of policies) {
      const idx = samples.flatMap((s, i) => (s.policyId === id ? [i] : []));
      if (idx.length === 0) continue;
      const f = await policy.features(idx.map((i) => samples[i]!.promptTokens));
      const v = this.heads.get(id)!.predict(f);
      idx.forEach((i, k) => {
        features[i] = f[k]!;
        values[i] = v[k]!;
      });
    }
    return { features, values };
  }

  /**
   * Trains each policy's head on its samples (`which`: indices into the step's samples) and
   * returns its metrics: `value/loss`, `value/clip_frac`, `value/explained_variance` (of the
   * values the advantages used), `value/mean`, `value/return_mean`.
   */
  train(policyId: string, which: readonly number[], features: readonly Float32Array[], values: Float64Array, returns: Float64Array, o: ValueTrainOptions): Metric[] {
    if (which.length === 0) return [];
    const head = this.heads.get(policyId);
    if (!head) throw new Error(`critic: no value head for policy '${policyId}'`);
    const f = which.map((i) => features[i]!);
    const r = which.map((i) => returns[i]!);
    const v = which.map((i) => values[i]!);
    const ev = explainedVariance(v, r);
    const t = trainValueHead(head, f, r, v, o);
    const mean = (xs: number[]) => xs.reduce((a, b) => a + b, 0) / xs.length;
    const metrics: Metric[] = [
      { name: 'value/loss', value: t.loss, policyId },
      { name: 'value/clip_frac', value: t.clipFrac, policyId },
      { name: 'value/mean', value: mean(v), policyId },
      { name: 'value/return_mean', value: mean(r), policyId },
    ];
    if (Number.isFinite(ev)) metrics.push({ name: 'value/explained_variance', value: ev, policyId });
    return metrics.filter((m) => Number.isFinite(m.value));
  }

  /**
   * A step's PPO advantages: every sample's value under its policy's head, GAE over each agent's
   * turns (`gae.ts`), normalised per policy under `advantageNorm` std. Everything in the order of
   * `trajectories.flatMap((t) => t.samples)`; `features`, `values` and `returns` are what `trainAll` needs.
   */
  async advantages(
    policies: ReadonlyMap<string, Policy>,
    trajectories: ReadonlyArray<{ readonly samples: ReadonlyArray<TurnSample & CriticSample> }>,
    a: Pick<AlgorithmConfig, 'gamma' | 'gaeLambda' | 'teamRewardWeight' | 'advantageNorm'>,
  ): Promise<{ advantages: Float64Array; step: CriticStep }> {
    const samples = trajectories.flatMap((t) => t.samples);
    const { features, values } = await this.evaluate(policies, samples);
    const g = trajectoryGae(trajectories, values, a);
    const advantages = a.advantageNorm === 'std' ? normalizeAdvantages(g.advantages, (i) => samples[i]!.policyId) : g.advantages;
    return { advantages, step: { policyOf: samples.map((s) => s.policyId), features, values, returns: g.returns } };
  }

  /** Trains every policy's head on its samples of the step that `trained` keeps (indices into the step's samples); its metrics. */
  trainAll(step: CriticStep, trained: (i: number) => boolean, o: Omit<ValueTrainOptions, 'seed'>, seed: (policyId: string) => number): Metric[] {
    const metrics: Metric[] = [];
    for (const id of this.heads.keys()) {
      const which = step.policyOf.flatMap((p, i) => (p === id && trained(i) ? [i] : []));
      metrics.push(...this.train(id, which, step.features, step.values, step.returns, { ...o, seed: seed(id) }));
    }
    return metrics;
  }

  /** The checkpoint file that holds the heads. */
  static readonly file = 'value-heads.json';

  /** The heads as the text of `Critic.file`. */
  serialize(): string {
    return `${JSON.stringify(Object.fromEntries([...this.heads].map(([id, h]) => [id, h.state()])))}\n`;
  }

  /** Restores the heads from `Critic.file`'s text (`what` names it in errors). */
  restore(text: string, what: string): void {
    let parsed: unknown;
    try {
      parsed = JSON.parse(text);
    } catch (e) {
      throw new Error(`${what}: not JSON (${(e as Error).message})`);
    }
    for (const [id, head] of this.heads) {
      const s = (parsed as Record<string, ValueHeadState | undefined>)[id];
      if (!s || !Array.isArray(s.w) || !Array.isArray(s.m) || !Array.isArray(s.v) || typeof s.b !== 'number' || typeof s.step !== 'number') throw new Error(`${what}: no value head for policy '${id}'`);
      this.heads.set(id, ValueHead.fromState(s, head.size, what));
    }
  }
}
