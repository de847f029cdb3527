/**
 * The compiled artifacts of a model: decode (forward with KV cache), score (per-token
 * log-probs), train step (forward → loss → backward) and AdamW, each as ONNX bytes plus the
 * names a caller needs to feed and fetch.
 *
 * Shape legend as in transformer-graph.ts. Scalars (temperature, clip ε, coefficients, token
 * weight) are inputs rather than constants, so changing a hyperparameter never recompiles.
 */
import { gradients } from '../compiler/autodiff.ts';
import { Graph, type Node } from '../compiler/ir.ts';
import type { DType } from '../compiler/ops.ts';
import { dimMul } from '../compiler/dims.ts';
import { emitOnnx, type EmitOptions } from '../compiler/onnx-emit.ts';
import type { ExecutionProviderName } from '../runtime/engine.ts';
import { type ModelConfig, modelDims } from './model-config.ts';
import { declareModelInputs, forward, type LoraSpec, type ModelInputs } from './transformer-graph.ts';

export interface Artifact {
  readonly bytes: Uint8Array;
  /** Graph inputs that are model tensors (weights, adapters), by name. */
  readonly tensorInputs: readonly string[];
  /** Trainable tensors whose gradients are outputs `{name}_grad` (train step only). */
  readonly trainable: readonly string[];
  readonly outputs: readonly string[];
}

function docOf(c: ModelConfig, extra: Record<string, unknown>): string {
  return JSON.stringify({ model: c, ...extra });
}

function tensorInputNames(m: ModelInputs): string[] {
  return [...m.weights.keys(), ...(m.lora ? [...m.lora.keys()] : [])];
}

function batchInputs(b: Graph) {
  return {
    ids: b.input('input_ids', 'int64', ['B', 'T']),
    positions: b.input('position_ids', 'int64', ['B', 'T']),
  };
}

/**
 * Decode graph: see the contract in runtime/generate.ts. `cache` 'time-major' (the host keeps the
 * cache and the graph returns the new slice, `present.{i}.*`) or 'device' (the cache stays on the
 * GPU: past [B,Hkv,P,D] in, the whole grown cache `cache.{i}.*` [B,Hkv,P+T,D] out, fed back at
 * the next step; the join attention needs anyway, so it costs no extra work).
 */
export function buildDecode(c: ModelConfig, lora: LoraSpec | null, dtype: DType = 'float32', cache: 'time-major' | 'device' = 'time-major', lowering: Lowering = {}): Artifact {
  const b = new Graph();
  const { Hkv, D, L } = modelDims(c);
  const m = declareModelInputs(b, c, dtype, lora);
  const { ids, positions } = batchInputs(b);
  const bias = b.input('attention_bias', dtype, ['B', 'T', '(P+T)']);
  const device = cache === 'device';
  const past = Array.from({ length: L }, (_, i) => ({
    key: b.input(`past_key_values.${i}.key`, dtype, device ? ['B', Hkv, 'P', D] : ['P', 'B', Hkv, D]),
    value: b.input(`past_key_values.${i}.value`, dtype, device ? ['B', Hkv, 'P', D] : ['P', 'B', Hkv, D]),
  }));
  const r = forward(b, c, m, { ids, positions, bias, past, lastOnly: true, pastLayout: device ? 'batch-major' : 'time-major' });
  const outputs: Array<[string, Node]> = [['logits', r.logits]];
  (device ? r.cache : r.present).forEach((p, i) => {
    const name = device ? 'cache' : 'present';
    outputs.push([`${name}.${i}.key`, p.key], [`${name}.${i}.value`, p.value]);
  });
  return { bytes: emitOnnx(outputs, { name: device ? 'decode-device' : 'decode', doc: docOf(c, { lora }), ...lowering }), tensorInputs: tensorInputNames(m), trainable: [], outputs: outputs.map(([n]) => n) };
}

/**
 * log p(target) per scored row at a temperature, [N], and the row's whole log-distribution [N,V]
 * (for the entropy). The target's log-prob is picked with GatherElements (gradient: a scatter
 * into the [N,V] adjoint) rather than a multiply with a one-hot, which cost two more [N,V]
 * tensors (the comparison and the product) on the largest tensors of the graph.
 */
function rowLogProbs(b: Graph, logits: Node, targets: Node, temperature: Node): { logp: Node; logpAll: Node } {
  const logpAll = b.logSoftmax(b.div(logits, temperature), -1); // [N,V]
  const logp = b.squeeze(b.gatherElements(logpAll, b.unsqueeze(targets, [1]), 1), [1]); // [N]
  return { logp, logpAll };
}

/**
 * Causal LM forward over a full (teacher-forced) batch: the cache-free path of the train step.
 * Batches are right-padded (`train-batch.ts`), so a real token never sees a padding key through
 * the causal mask and one [T,T] bias serves the whole batch; `perSequenceMask` takes a [B,T,T]
 * bias instead, for left-padded batches.
 *
 * Logits exist only for the rows in `loss_rows` ([N] flat indices b·T + t: the response
 * positions), so memory over V is N·V, not B·T·V: per-token inputs ([B,T] at the boundary) are
 * read at those rows (`at`), and per-row results are written back to [B,T] (`toGrid`, zeros
 * elsewhere).
 */
function teacherForced(b: Graph, c: ModelConfig, m: ModelInputs, dtype: DType, perSequenceMask = false) {
  const { ids, positions } = batchInputs(b);
  const bias = b.input('attention_bias', dtype, perSequenceMask ? ['B', 'T', 'T'] : ['T', 'T']);
  const targets = b.input('targets', 'int64', ['B', 'T']);
  const rows = b.input('loss_rows', 'int64', ['N']);
  const BT = dimMul('B', 'T');
  const at = (x: Node) => b.gather(b.reshape(x, [BT]), rows, 0); // [B,T] → [N]
  const toGrid = (x: Node) => b.reshapeLike(b.scatterAdd(b.expandLike(b.like(x, 0), b.reshape(targets, [BT])), rows, x, 0), targets); // [N] → [B,T]
  return { logits: forward(b, c, m, { ids, positions, bias, rows }).logits, targets: at(targets), at, toGrid };
}

/** A graph's outputs before emission (what tests inspect) and the names a caller needs. */
export interface GraphOutputs {
  readonly outputs: ReadonlyArray<readonly [string, Node]>;
  readonly tensorInputs: readonly string[];
  readonly trainable: readonly string[];
}

/** Emission choices that depend on where a graph runs (`loweringFor`): the same math in other nodes. */
export type Lowering = Pick<EmitOptions, 'logSoftmax' | 'scatterAdd' | 'transposedMatMul'>;

/**
 * ONNX Runtime's WebGPU provider has no LogSoftmax kernel and would run it on the CPU between GPU
 * nodes, so on WebGPU it is emitted as primitives; its ScatterElements(add) fails once the
 * log-prob pick's [N,V] adjoint outgrows one storage-buffer binding, so that scatter is a select
 * there (`EmitOptions.scatterAdd`); and it fuses no Transpose into a MatMul, so products by a
 * transposed weight are Gemms with transB there (`EmitOptions.transposedMatMul`). CPU and CUDA
 * keep the fused kernels and fusions.
 */
export function loweringFor(provider: ExecutionProviderName): Lowering {
  return provider === 'webgpu' ? { logSoftmax: 'primitives', scatterAdd: 'select', transposedMatMul: 'gemm' } : {};
}

function emit(g: GraphOutputs, name: string, doc: string, lowering: Lowering = {}): Artifact {
  return { bytes: emitOnnx(g.outputs, { name, doc, ...lowering }), tensorInputs: g.tensorInputs, trainable: g.trainable, outputs: g.outputs.map(([n]) => n) };
}

/** Score graph: per-token log-probs of `targets` at `temperature` (old and reference log-probs), [B,T], 0 off `loss_rows`. */
export function buildScore(c: ModelConfig, lora: LoraSpec | null, dtype: DType = 'float32', lowering: Lowering = {}, perSequenceMask = false): Artifact {
  return emit(scoreGraph(c, lora, dtype, perSequenceMask), 'score', docOf(c, { lora }), lowering);
}

/** `perSequenceMask`: a [B,T,T] attention bias (rows shared by prompts, left padding) instead of the causal [T,T]. */
export function scoreGraph(c: ModelConfig, lora: LoraSpec | null, dtype: DType = 'float32', perSequenceMask = false): GraphOutputs {
  const b = new Graph();
  const m = declareModelInputs(b, c, dtype, lora);
  const { logits, targets, toGrid } = teacherForced(b, c, m, dtype, perSequenceMask);
  const temperature = b.input('temperature', dtype, []);
  const { logp } = rowLogProbs(b, logits, targets, temperature);
  return { outputs: [['logp', toGrid(logp)]], tensorInputs: tensorInputNames(m), trainable: [] };
}

/**
 * Features graph: the final-normed hidden state [N,C] at `loss_rows` (flat b·T + t), the input a
 * value head reads (`rl/value-head.ts`). No gradient: the value head is trained on its own, with
 * the trunk detached. Inputs as the score graph's, without targets and temperature.
 */
export function buildFeatures(c: ModelConfig, lora: LoraSpec | null, dtype: DType = 'float32', perSequenceMask = false): Artifact {
  return emit(featuresGraph(c, lora, dtype, perSequenceMask), 'features', docOf(c, { lora }));
}

export function featuresGraph(c: ModelConfig, lora: LoraSpec | null, dtype: DType = 'float32', perSequenceMask = false, output: 'hidden' | 'logits' = 'hidden'): GraphOutputs {
  const b = new Graph();
  const m = declareModelInputs(b, c, dtype, lora);
  const { ids, positions } = batchInputs(b);
  const bias = b.input('attention_bias', dtype, perSequenceMask ? ['B', 'T', 'T'] : ['T', 'T']);
  const rows = b.input('loss_rows', 'int64', ['N']);
  return { outputs: [[output, forward(b, c, m, { ids, positions, bias, rows })[output]]], tensorInputs: tensorInputNames(m), trainable: [] };
}

/**
 * Row-logits graph: the raw logits [N,V] at `loss_rows`, the features graph's inputs. For the
 * k most likely tokens at each prompt position (`Policy.promptAlternatives`: vLLM's
 * `prompt_logprobs`), which the host picks with the decode loop's own top-k.
 */
export function buildRowLogits(c: ModelConfig, lora: LoraSpec | null, dtype: DType = 'float32'): Artifact {
  return emit(featuresGraph(c, lora, dtype, false, 'logits'), 'row-logits', docOf(c, { lora }));
}

export interface TrainStepOptions {
  /** 'ppo': the clipped policy-gradient loss of GRPO; 'ce': token cross-entropy (warm start). */
  readonly loss: 'ppo' | 'ce';
  /** Train every weight, or only the LoRA adapter (which must then be given). */
  readonly trainable: 'full' | 'lora';
  readonly lora: LoraSpec | null;
  /** Include the KL-to-reference term (needs `ref_logp`). */
  readonly kl: boolean;
  /** Include the entropy bonus. */
  readonly entropy: boolean;
  readonly dtype?: DType;
  /** Take a [B,T,T] attention bias (rows shared by prompts, left-padded batches) instead of the shared causal [T,T]. */
  readonly perSequenceMask?: boolean;
}

/**
 * Train-step graph. Inputs: input_ids, position_ids, attention_bias [B,T,T], targets, loss_rows
 * (the [N] positions with a loss, see `teacherForced`), loss_mask, token_weight (scalar; 1/Σmask over the whole mini-batch so micro-batches add up to a token
 * mean) and, for PPO, advantages, old_logp, temperature, clip_eps, optionally ref_logp + kl_coef
 * and ent_coef. Outputs: loss, logp ([B,T], 0 off loss_rows), diagnostics and `{param}_grad` for
 * each trainable tensor. Per-token inputs are [B,T]; only their loss_rows entries are read.
 *
 * Memory over the vocabulary: N rows of logits, their log-softmax, and for PPO the entropy's
 * exp(logp) and product, plus about as many [N,V] adjoints in the backward pass — each N·V·4
 * bytes (0.6 MB per row at V = 151936). Micro-batches bound N (`train-batch.ts`).
 *
 * PPO per token (Schulman et al. 2017; GRPO's token-mean form):
 *   ratio = exp(logp − old); pg = −min(ratio·A, clip(ratio, 1−ε, 1+ε)·A)
 *   kl = min(exp(ref − logp) − (ref − logp) − 1, KL_CLAMP) (the k3 estimator, non-negative, clamped)
 *   loss = Σ mask · (pg + β·kl − η·entropy) · token_weight
 */
/** Ceiling of the per-token KL term (verl's clamp of its low-variance KL estimator). */
export const KL_CLAMP = 10;

export function buildTrainStep(c: ModelConfig, o: TrainStepOptions, lowering: Lowering = {}): Artifact {
  return emit(trainStepGraph(c, o), `train-${o.loss}-${o.trainable}`, docOf(c, { lora: o.lora, loss: o.loss }), lowering);
}

export function trainStepGraph(c: ModelConfig, o: TrainStepOptions): GraphOutputs {
  const dtype = o.dtype ?? 'float32';
  if (o.trainable === 'lora' && !o.lora) throw new Error('buildTrainStep: trainable "lora" needs a LoRA spec');
  const b = new Graph();
  const m = declareModelInputs(b, c, dtype, o.lora);
  const { logits, targets, at, toGrid } = teacherForced(b, c, m, dtype, o.perSequenceMask ?? false);
  const mask = at(b.input('loss_mask', dtype, ['B', 'T'])); // [N]
  const tokenWeight = b.input('token_weight', dtype, []);
  const weighted = (perToken: Node) => b.mul(b.reduceSum(b.mul(mask, perToken), [0]), tokenWeight);
  const outputs: Array<[string, Node]> = [];
  let loss: Node;
  if (o.loss === 'ce') {
    const { logp } = rowLogProbs(b, logits, targets, b.like(logits, 1));
    loss = weighted(b.neg(logp));
    outputs.push(['loss', loss], ['logp', toGrid(b.stopGradient(logp))]);
  } else {
    const temperature = b.input('temperature', dtype, []);
    const { logp, logpAll } = rowLogProbs(b, logits, targets, temperature);
    const adv = at(b.input('advantages', dtype, ['B', 'T']));
    const old = at(b.input('old_logp', dtype, ['B', 'T']));
    const eps = b.input('clip_eps', dtype, []);
    const one = b.like(logp, 1);
    const delta = b.sub(logp, old);
    const ratio = b.exp(delta);
    const s1 = b.mul(ratio, adv);
    const clipped = b.min(b.max(ratio, b.sub(one, eps)), b.add(one, eps));
    const s2 = b.mul(clipped, adv);
    let perToken = b.neg(b.min(s1, s2));
    const zero = b.like(logp, 0);
    // A token is "clipped" when the clipped branch is the active one: outside the trust region
    // in the direction the advantage pushes.
    const clippedTok = b.cast(b.greater(b.sub(s1, s2), zero), dtype);
    outputs.push(['clip_frac', weighted(b.stopGradient(clippedTok))]);
    outputs.push(['approx_kl', weighted(b.stopGradient(b.mul(b.like(delta, 0.5), b.mul(delta, delta))))]);
    if (o.kl) {
      const ref = at(b.input('ref_logp', dtype, ['B', 'T']));
      const coef = b.input('kl_coef', dtype, []);
      const d = b.sub(ref, logp);
      // Clamped at KL_CLAMP, as verl clamps its low-variance KL: a sampled token the policy has
      // come to find far less likely than the reference does makes exp(ref − logp) explode (math
      // runs reached a step loss of 8e3 and collapsed); past the clamp such a token only stops
      // pulling, as a clipped PPO ratio does.
      const kl = b.min(b.sub(b.sub(b.exp(d), d), one), b.like(logp, KL_CLAMP));
      perToken = b.add(perToken, b.mul(coef, kl));
      outputs.push(['kl_ref', weighted(b.stopGradient(kl))]);
    }
    const ent = b.neg(b.reduceSum(b.mul(b.exp(logpAll), logpAll), [1])); // [N]
    if (o.entropy) {
      const coef = b.input('ent_coef', dtype, []);
      perToken = b.sub(perToken, b.mul(coef, ent));
    }
    outputs.push(['entropy', weighted(b.stopGradient(ent))]);
    loss = weighted(perToken);
    outputs.unshift(['loss', loss], ['logp', toGrid(b.stopGradient(logp))]);
  }
  const trainable = o.trainable === 'lora' ? [...m.lora!.keys()] : [...m.weights.keys()];
  const nodes = trainable.map((n) => (o.trainable === 'lora' ? m.lora!.get(n)! : m.weights.get(n)!));
  const grads = gradients(b, loss, nodes);
  trainable.forEach((n, i) => outputs.push([`${n}_grad`, grads[i]!]));
  return { outputs, tensorInputs: tensorInputNames(m), trainable };
}

/**
 * AdamW over a set of tensors with global-norm gradient clipping, in one graph (PyTorch's
 * semantics: decoupled weight decay p ← p·(1 − lr·wd), bias-corrected moments).
 * Inputs per tensor p: `p`, `p_grad`, `p.m`, `p.v`; scalars lr, beta1, beta2, eps,
 * weight_decay, bias_correction1 (1 − β₁ᵗ), bias_correction2 (1 − β₂ᵗ), max_grad_norm.
 * Outputs per tensor: `p.next`, `p.m.next`, `p.v.next`; and `grad_norm` (before clipping).
 * Weight decay applies to matrices only, not to norm gains or biases (the usual practice).
 */
export function buildAdamW(tensors: ReadonlyArray<readonly [string, readonly number[]]>, dtype: DType = 'float32'): Artifact {
  const b = new Graph();
  const s = (name: string) => b.input(name, dtype, []);
  const [lr, beta1, beta2, eps, wd, bc1, bc2, maxNorm] = ['lr', 'beta1', 'beta2', 'eps', 'weight_decay', 'bias_correction1', 'bias_correction2', 'max_grad_norm'].map(s) as [Node, Node, Node, Node, Node, Node, Node, Node];
  const items = tensors.map(([name, shape]) => ({
    name,
    shape,
    p: b.input(name, dtype, shape),
    g: b.input(`${name}_grad`, dtype, shape),
    m: b.input(`${name}.m`, dtype, shape),
    v: b.input(`${name}.v`, dtype, shape),
  }));
  const sq = items.map((it) => b.reduceSum(b.mul(it.g, it.g), it.shape.map((_, i) => i)));
  const norm = b.sqrt(sq.reduce((acc, x) => b.add(acc, x)));
  const one = b.like(norm, 1);
  const clip = b.min(one, b.div(maxNorm, b.add(norm, b.like(norm, 1e-6))));
  const outputs: Array<[string, Node]> = [['grad_norm', norm]];
  for (const it of items) {
    const g = b.mul(it.g, clip);
    const m = b.add(b.mul(beta1, it.m), b.mul(b.sub(one, beta1), g));
    const v = b.add(b.mul(beta2, it.v), b.mul(b.sub(one, beta2), b.mul(g, g)));
    const denom = b.add(b.sqrt(b.div(v, bc2)), eps);
    const decayed = it.shape.length >= 2 ? b.mul(it.p, b.sub(one, b.mul(lr, wd))) : it.p;
    const p = b.sub(decayed, b.mul(b.div(lr, bc1), b.div(m, denom)));
    outputs.push([`${it.name}.next`, p], [`${it.name}.m.next`, m], [`${it.name}.v.next`, v]);
  }
  return { bytes: emitOnnx(outputs, { name: 'adamw' }), tensorInputs: items.map((i) => i.name), trainable: [], outputs: outputs.map(([n]) => n) };
}
