/**
 * Composite ops: the transformer's building blocks as functions of primitives.
 *
 * Shape legend: B batch, T new tokens, P past tokens, S = P+T keys, C width, H query heads,
 * Hkv key/value heads, G = H/Hkv queries per key head, D head dim, F MLP width, V vocab.
 */
import { dimMul } from './dims.ts';
import type { Graph, Node } from './ir.ts';
import type { DType } from './ops.ts';

/** Low-rank adapter on a projection: y += scale · (x Aᵀ) Bᵀ. */
export interface LoraPair {
  readonly a: Node; // [r, in]
  readonly b: Node; // [out, r]
  readonly scale: number;
}

/** The LoRA update of a projection: scale · (x Aᵀ) Bᵀ. */
export function loraDelta(b: Graph, x: Node, lora: LoraPair): Node {
  const down = b.matmul(x, b.transpose(lora.a, [1, 0])); // [..., r]
  const up = b.matmul(down, b.transpose(lora.b, [1, 0])); // [..., out]
  return b.mul(up, b.like(up, lora.scale));
}

/** y = x Wᵀ (+ bias) (+ LoRA), with W stored [out, in] as in PyTorch. */
export function linear(b: Graph, x: Node, w: Node, bias?: Node | null, lora?: LoraPair | null): Node {
  let y = b.matmul(x, b.transpose(w, [1, 0])); // [..., out]
  if (bias) y = b.add(y, bias);
  if (lora) y = b.add(y, loraDelta(b, x, lora));
  return y;
}

/** RMSNorm over the last axis: x / sqrt(mean(x²) + eps) · w. */
export function rmsNorm(b: Graph, x: Node, w: Node, eps: number): Node {
  return b.rmsNorm(x, w, eps); // fused primitive; rmsNormReference is its definition
}

/** RMSNorm from primitives: the definition the fused `rmsNorm` primitive is tested against. */
export function rmsNormReference(b: Graph, x: Node, w: Node, eps: number): Node {
  const C = x.shape[x.shape.length - 1] as number;
  const ms = b.mul(b.reduceSum(b.mul(x, x), [-1], true), b.like(x, 1 / C)); // [..., 1]
  const inv = b.reciprocal(b.sqrt(b.add(ms, b.like(x, eps))));
  return b.mul(b.mul(x, inv), w);
}

/**
 * LayerNorm over the last axis (Ba et al. 2016): (x − mean) / sqrt(var + eps) · w + bias, with the
 * biased variance, as torch.nn.LayerNorm computes it.
 */
export function layerNorm(b: Graph, x: Node, w: Node, bias: Node, eps: number): Node {
  const C = x.shape[x.shape.length - 1] as number;
  const mean = b.mul(b.reduceSum(x, [-1], true), b.like(x, 1 / C)); // [..., 1]
  const centred = b.sub(x, mean);
  const variance = b.mul(b.reduceSum(b.mul(centred, centred), [-1], true), b.like(x, 1 / C)); // [..., 1]
  const inv = b.reciprocal(b.sqrt(b.add(variance, b.like(x, eps))));
  return b.add(b.mul(b.mul(centred, inv), w), bias);
}

/**
 * GELU, tanh approximation (Hendrycks & Gimpel 2016; GPT-2's "gelu_new", PyTorch's
 * approximate='tanh'): 0.5·z·(1 + tanh(√(2/π)·(z + 0.044715·z³))).
 */
export function geluTanh(b: Graph, z: Node): Node {
  const cube = b.mul(b.mul(z, z), z);
  const inner = b.mul(b.add(z, b.mul(cube, b.like(z, 0.044715))), b.like(z, Math.sqrt(2 / Math.PI)));
  return b.mul(b.mul(z, b.like(z, 0.5)), b.add(b.tanh(inner), b.like(z, 1)));
}

/** SiLU(z) = z · σ(z). */
export function silu(b: Graph, z: Node): Node {
  return b.mul(z, b.sigmoid(z));
}

/** Softmax from exp/reduce primitives (the definition the fused `softmax` primitive is tested against). */
export function softmaxReference(b: Graph, x: Node, axis = -1): Node {
  const shifted = b.sub(x, b.stopGradient(b.reduceMax(x, [axis], true)));
  const e = b.exp(shifted);
  return b.div(e, b.reduceSum(e, [axis], true));
}

/** Log-softmax from primitives (reference for the fused `logSoftmax` primitive). */
export function logSoftmaxReference(b: Graph, x: Node, axis = -1): Node {
  const shifted = b.sub(x, b.stopGradient(b.reduceMax(x, [axis], true)));
  return b.sub(shifted, b.log(b.reduceSum(b.exp(shifted), [axis], true)));
}

/**
 * RoPE tables for integer positions [B,T]: cos and sin of shape [B,T,1,D] (Hugging Face's
 * rotate-half convention: frequencies repeated over both halves of the head dimension).
 * `invFreq` [D/2] holds θ^(−2j/D), or a rescaled variant (Llama 3): the caller computes it, so
 * scaling schemes live with the model config, not here.
 */
export function ropeTables(b: Graph, positions: Node, invFreq: readonly number[], dtype: DType): { cos: Node; sin: Node } {
  const half = invFreq.length;
  const pos = b.unsqueeze(b.cast(positions, dtype), [2]); // [B,T,1]
  const freqs = b.mul(pos, b.constant(invFreq, [half], dtype)); // [B,T,D/2]
  const emb = b.unsqueeze(b.concat([freqs, freqs], -1), [2]); // [B,T,1,D]
  return { cos: b.cos(emb), sin: b.sin(emb) };
}

/** Applies RoPE to x [B,T,h,D]: x·cos + rotate_half(x)·sin, rotate_half(x) = [-x₂, x₁]. */
export function applyRope(b: Graph, x: Node, cos: Node, sin: Node): Node {
  const D = x.shape[x.shape.length - 1] as number;
  const x1 = b.slice(x, -1, 0, D / 2);
  const x2 = b.slice(x, -1, D / 2, D);
  const rotated = b.concat([b.neg(x2), x1], -1);
  return b.add(b.mul(x, cos), b.mul(rotated, sin));
}

/**
 * Scaled dot-product attention with grouped key/value heads and an additive bias.
 * q [B,T,H,D]; k, v [B,Hkv,S,D]; bias [B,T,S] or [T,S] (0 = visible, large negative = masked).
 * Returns [B,T,H·D].
 *
 * The G query heads that share a key head are stacked along the query axis ([B,Hkv,G·T,D]), so
 * every product is a plain batched GEMM over (B, Hkv): keys are neither copied G times nor
 * broadcast (a broadcast batch would make the key gradient a G-times larger product followed by a
 * reduction). The 1/√D scale is applied to q ([B,T,H,D]) rather than to the scores ([B,H,T,S]),
 * which are S/D times larger.
 */
export function attention(b: Graph, q: Node, k: Node, v: Node, bias: Node): Node {
  const [, , H, D] = q.shape as [unknown, unknown, number, number];
  const Hkv = k.shape[1] as number;
  const G = H / Hkv;
  const B = q.shape[0]!;
  const T = q.shape[1]!;
  const qs = b.mul(q, b.like(q, 1 / Math.sqrt(D)));
  const qg = b.reshape(b.transpose(qs, [0, 2, 1, 3]), [B, Hkv, dimMul(G, T), D]); // [B,Hkv,G·T,D]
  // bias [B,T,S] (per-sequence padding) or [T,S] (one causal mask for the batch).
  let mask = bias.shape.length === 3 ? b.unsqueeze(bias, [1]) : bias; // [B,1,T,S] | [T,S]
  const axis = mask.shape.length - 2;
  if (G > 1) mask = b.concat(Array.from({ length: G }, () => mask), axis); // [B,1,G·T,S] | [G·T,S]
  const scores = b.add(b.matmul(qg, b.transpose(k, [0, 1, 3, 2])), mask); // [B,Hkv,G·T,S]
  const out = b.matmul(b.softmax(scores, -1), v); // [B,Hkv,G·T,D]
  const heads = b.reshape(out, [B, H, T, D]); // [B,H,T,D]
  return b.reshape(b.transpose(heads, [0, 2, 1, 3]), [B, T, H * D]); // [B,T,H·D]
}
