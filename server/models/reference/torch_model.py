"""Reference implementation of Troupe's policy model and losses in plain PyTorch.

This file is the numerical SPEC the TypeScript graphs (server/compiler, server/models) must match.
It is used to generate the correctness fixtures (make_fixtures.py, server/models/fixtures/) and
by the engine benchmark's PyTorch side (bench/engine/torch_bench.py). Run it with Debian's
/usr/bin/python3 (python3-torch 1.13, python3-numpy); no PyPI packages, no `safetensors` package.
Every function works in float64 and float32: the dtype of the parameter tensors decides.

MODEL (decoder-only transformer, Qwen2/Llama shape)
  Config: a dict with the camelCase fields of server/models/model-config.ts (`normalize_config`
  fills the defaults exactly as the zod schema does): vocabSize V, hiddenSize C, numLayers L,
  numHeads H, numKvHeads Hkv (default H), headDim D (default C/H), intermediateSize F,
  ropeTheta (10000), rmsNormEps (1e-6), tieEmbeddings (true), attentionBias (false), qkNorm (false;
  Qwen3), ropeScaling (absent, or {type: "llama3", factor, lowFreqFactor, highFreqFactor,
  originalMaxPositionEmbeddings}; Llama 3.1+).
  Parameter names/shapes: `parameter_shapes` == parameterShapes() in model-config.ts.
  Linear weights are [out, in]; linear(x) = x @ W.T (+ b).

  inputs: input_ids [B,T] int64, position_ids [B,T] int64, attention_mask [B,T] (1 = real token,
          0 = padding; ragged prompts are padded on the LEFT).
  x = embed.weight[input_ids]
  per layer i (p = "layers.{i}"):
    rmsnorm(x) = x * rsqrt(mean(x^2, last dim) + eps)
    h = rmsnorm(x) * p.attn_norm.weight
    q = linear_q(h) -> [B,T,H,D];  k = linear_k(h), v = linear_v(h) -> [B,T,Hkv,D]
    qkNorm (Qwen3): q = rmsnorm(q) * p.attn.q_norm.weight, k = rmsnorm(k) * p.attn.k_norm.weight, per
      head over D (weights [D]), before RoPE.
    RoPE (Hugging Face rotate_half convention):
      inv_freq[j] = 1 / theta^(2j/D), j = 0..D/2-1, then with ropeScaling llama3 (transformers
      _compute_llama3_parameters): wavelen = 2*pi/inv_freq; wavelen > orig/low -> inv_freq/factor;
      wavelen < orig/high -> inv_freq; between: (1-s)*inv_freq/factor + s*inv_freq,
      s = (orig/wavelen - low)/(high - low)
      freqs = position_ids[..., None] * inv_freq          -> [B,T,D/2]
      emb = cat(freqs, freqs, -1)                          -> [B,T,D];  cos = cos(emb), sin = sin(emb)
      rotate_half(x) = cat(-x[..., D/2:], x[..., :D/2], -1)
      q = q*cos + rotate_half(q)*sin;  k = k*cos + rotate_half(k)*sin   (cos/sin broadcast over heads)
    GQA: query head h uses kv head h // (H/Hkv).
    scores[b,h,i,j] = q[b,i,h].k[b,j,h//G] / sqrt(D) + bias[b,i,j]
      bias[b,i,j] = 0 if (j <= i and attention_mask[b,j] == 1) else -1e9   (additive, not -inf)
      (implemented as (q / sqrt(D)) . k, which is the same number up to rounding)
    attn = softmax_j(scores) @ v -> [B,T,H*D] (head-major: column h*D + d);  x = x + linear_o(attn)
    h2 = rmsnorm(x) * p.mlp_norm.weight
    x = x + linear_down( silu(linear_gate(h2)) * linear_up(h2) ),  silu(z) = z * sigmoid(z)
  logits = (rmsnorm(x) * norm.weight) @ head.T,  head = embed.weight if tieEmbeddings else lm_head.weight

  CAVEAT (padded query rows): a query at a padded position i has every key masked, so its row is
  (s_j - 1e9) for all j. In float32, -1e9 swallows s_j and the softmax is (almost) uniform; in float64
  it equals softmax(s_j). Outputs at padded positions are therefore precision-dependent by design and
  never reach a loss (loss_mask is 0 there, and no real query attends to a padded key). Compare
  logits/logp only where attention_mask == 1.

  LoRA (optional): for targets t in {q,k,v,o,gate,up,down} (projectionName: layers.{i}.attn.q,
  layers.{i}.mlp.down, ...):  y = x W^T (+b) + (alpha/r) * (x A^T) B^T,
  A = "<proj>.lora_A" [r, in], B = "<proj>.lora_B" [out, r].

LOSSES (per token, then one scalar). targets [B,T] int64 are the next-token ids (an input).
  logp_all = log_softmax(logits / temperature);  logp = logp_all[..., targets]
  ent = -sum_v exp(logp_all) * logp_all
  PPO: ratio = exp(logp - old_logp); s1 = ratio*A; s2 = clamp(ratio, 1-eps, 1+eps)*A; pg = -min(s1, s2)
       kl = exp(ref_logp - logp) - (ref_logp - logp) - 1          (k3 estimator)
       per_token = pg + kl_coef*kl - ent_coef*ent
       loss = sum(loss_mask * per_token) * token_weight           (token_weight normally 1/sum(loss_mask))
       clip_frac = sum(loss_mask * [(ratio < 1-eps and A < 0) or (ratio > 1+eps and A > 0)]) * token_weight
       approx_kl = sum(loss_mask * 0.5*(logp - old_logp)^2) * token_weight
       entropy   = sum(loss_mask * ent) * token_weight
       (diagnostics carry no gradient)
  CE:  loss = sum(loss_mask * -logp) * token_weight, temperature 1 (entropy diagnostic as above).

SAFETENSORS (read_safetensors / write_safetensors, by hand): 8-byte little-endian header length N,
  then N bytes of JSON {name: {dtype, shape, data_offsets: [begin, end]}, "__metadata__": {str: str}},
  then the data (offsets relative to the end of the header). We write F32 only, tensors in sorted key
  order, compact JSON with sorted keys, header padded with spaces so N % 8 == 0.
"""
from __future__ import annotations

import json
import math
import struct
import sys
import re
from typing import Dict, List, Optional, Tuple

sys.dont_write_bytecode = True

import numpy as np
import torch
import torch.nn.functional as F

LORA_TARGETS = ("q", "k", "v", "o", "gate", "up", "down")
MASK_NEG = -1e9

# ----------------------------------------------------------------------------------------------
# config


def normalize_config(cfg: dict) -> dict:
    """Fills defaults like modelConfigSchema (zod) does, and validates the same rules."""
    allowed = {
        "vocabSize", "hiddenSize", "numLayers", "numHeads", "numKvHeads", "headDim", "intermediateSize",
        "ropeTheta", "rmsNormEps", "tieEmbeddings", "attentionBias", "maxSequenceLength",
        "qkNorm", "ropeScaling", "architecture", "positionEmbeddings",
    }
    unknown = set(cfg) - allowed
    if unknown:
        raise ValueError(f"unknown model config field(s): {sorted(unknown)}")
    for k in ("vocabSize", "hiddenSize", "numLayers", "numHeads", "intermediateSize"):
        if k not in cfg:
            raise ValueError(f"model config: missing {k}")
    c = {
        "ropeTheta": 10000.0,
        "rmsNormEps": 1e-6,
        "tieEmbeddings": True,
        "attentionBias": False,
        "maxSequenceLength": 512,
        **cfg,
    }
    if c.get("headDim") is None and c["hiddenSize"] % c["numHeads"] != 0:
        raise ValueError("numHeads must divide hiddenSize, or headDim must be given")
    kv = c.get("numKvHeads") or c["numHeads"]
    if c["numHeads"] % kv != 0:
        raise ValueError("numKvHeads must divide numHeads")
    d = c.get("headDim") or c["hiddenSize"] // c["numHeads"]
    if c.get("architecture") == "gpt2":
        if not c.get("positionEmbeddings") or c["maxSequenceLength"] > c["positionEmbeddings"]:
            raise ValueError("gpt2 needs positionEmbeddings >= maxSequenceLength")
        return c
    if d % 2 != 0:
        raise ValueError("head dimension must be even for RoPE")
    return c


def dims(cfg: dict) -> Tuple[int, int, int, int, int, int, int]:
    """(V, C, L, H, Hkv, D, F) as modelDims() in model-config.ts."""
    H = cfg["numHeads"]
    return (
        cfg["vocabSize"],
        cfg["hiddenSize"],
        cfg["numLayers"],
        H,
        cfg.get("numKvHeads") or H,
        cfg.get("headDim") or cfg["hiddenSize"] // H,
        cfg["intermediateSize"],
    )


def parameter_shapes(cfg: dict) -> List[Tuple[str, List[int]]]:
    """Same names, shapes and order as parameterShapes() in model-config.ts."""
    V, C, L, H, Hkv, D, Fi = dims(cfg)
    out: List[Tuple[str, List[int]]] = [("embed.weight", [V, C])]
    for i in range(L):
        p = f"layers.{i}"
        out.append((f"{p}.attn_norm.weight", [C]))
        out.append((f"{p}.attn.q.weight", [H * D, C]))
        if cfg["attentionBias"]:
            out.append((f"{p}.attn.q.bias", [H * D]))
        out.append((f"{p}.attn.k.weight", [Hkv * D, C]))
        if cfg["attentionBias"]:
            out.append((f"{p}.attn.k.bias", [Hkv * D]))
        out.append((f"{p}.attn.v.weight", [Hkv * D, C]))
        if cfg["attentionBias"]:
            out.append((f"{p}.attn.v.bias", [Hkv * D]))
        if cfg.get("qkNorm"):
            out.append((f"{p}.attn.q_norm.weight", [D]))
            out.append((f"{p}.attn.k_norm.weight", [D]))
        out.append((f"{p}.attn.o.weight", [C, H * D]))
        out.append((f"{p}.mlp_norm.weight", [C]))
        out.append((f"{p}.mlp.gate.weight", [Fi, C]))
        out.append((f"{p}.mlp.up.weight", [Fi, C]))
        out.append((f"{p}.mlp.down.weight", [C, Fi]))
    out.append(("norm.weight", [C]))
    if not cfg["tieEmbeddings"]:
        out.append(("lm_head.weight", [V, C]))
    return out


def projection_size(cfg: dict, target: str) -> Tuple[int, int]:
    """(in, out) of a projection, as projectionSize() in model-config.ts."""
    V, C, L, H, Hkv, D, Fi = dims(cfg)
    return {
        "q": (C, H * D), "k": (C, Hkv * D), "v": (C, Hkv * D), "o": (H * D, C),
        "gate": (C, Fi), "up": (C, Fi), "down": (Fi, C),
    }[target]


def projection_name(layer: int, target: str) -> str:
    group = "mlp" if target in ("gate", "up", "down") else "attn"
    return f"layers.{layer}.{group}.{target}"


def lora_shapes(cfg: dict, rank: int, targets=LORA_TARGETS) -> List[Tuple[str, List[int]]]:
    out = []
    for i in range(cfg["numLayers"]):
        for t in LORA_TARGETS:
            if t not in targets:
                continue
            n_in, n_out = projection_size(cfg, t)
            p = projection_name(i, t)
            out.append((f"{p}.lora_A", [rank, n_in]))
            out.append((f"{p}.lora_B", [n_out, rank]))
    return out


def init_params(cfg: dict, gen: torch.Generator, std: float = 0.2, norm_std: float = 0.1,
                dtype=torch.float64) -> Dict[str, torch.Tensor]:
    """Weights N(0, std) (biases too), norm weights 1 + N(0, norm_std)."""
    params = {}
    for name, shape in parameter_shapes(cfg):
        if name.endswith("norm.weight"):
            t = 1.0 + norm_std * torch.randn(shape, generator=gen, dtype=torch.float64)
        else:
            t = std * torch.randn(shape, generator=gen, dtype=torch.float64)
        params[name] = t.to(dtype)
    return params


# ----------------------------------------------------------------------------------------------
# model


def rmsnorm(x: torch.Tensor, w: torch.Tensor, eps: float) -> torch.Tensor:
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * w


def rope_inv_freq(D: int, theta: float, scaling: Optional[dict] = None) -> torch.Tensor:
    """inv_freq [D/2] in float64, rescaled as Llama 3 does when `scaling` (cfg ropeScaling) is given."""
    j = torch.arange(0, D // 2, dtype=torch.float64)
    inv_freq = 1.0 / (theta ** (2.0 * j / D))
    if not scaling:
        return inv_freq
    if scaling["type"] != "llama3":
        raise ValueError(f"unsupported ropeScaling type {scaling['type']}")
    factor, low, high = scaling["factor"], scaling["lowFreqFactor"], scaling["highFreqFactor"]
    orig = scaling["originalMaxPositionEmbeddings"]
    wavelen = 2 * math.pi / inv_freq
    scaled = torch.where(wavelen > orig / low, inv_freq / factor, inv_freq)
    smooth = (orig / wavelen - low) / (high - low)
    smoothed = (1 - smooth) * scaled / factor + smooth * scaled
    medium = ~(wavelen < orig / high) & ~(wavelen > orig / low)
    return torch.where(medium, smoothed, scaled)


def rope_cos_sin(position_ids: torch.Tensor, D: int, theta: float, dtype,
                 scaling: Optional[dict] = None) -> Tuple[torch.Tensor, torch.Tensor]:
    """cos, sin of shape [B,T,1,D] (broadcast over heads)."""
    inv_freq = rope_inv_freq(D, theta, scaling).to(dtype)
    freqs = position_ids.to(dtype)[..., None] * inv_freq  # [B,T,D/2]
    emb = torch.cat((freqs, freqs), dim=-1)[:, :, None, :]
    return emb.cos(), emb.sin()


def rope_table(cfg: dict, max_pos: int, dtype) -> Tuple[torch.Tensor, torch.Tensor]:
    """Precomputed (cos, sin) [max_pos, D] for positions 0..max_pos-1 (same values as rope_cos_sin)."""
    D = dims(cfg)[5]
    cos, sin = rope_cos_sin(torch.arange(max_pos)[None], D, cfg["ropeTheta"], dtype, cfg.get("ropeScaling"))
    return cos[0, :, 0], sin[0, :, 0]


def rotate_half(x: torch.Tensor) -> torch.Tensor:
    h = x.shape[-1] // 2
    return torch.cat((-x[..., h:], x[..., :h]), dim=-1)


def apply_rope(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    return x * cos + rotate_half(x) * sin


def attention_bias(attention_mask: Optional[torch.Tensor], B: int, t: int, past: int, dtype) -> Optional[torch.Tensor]:
    """Additive bias [B,t,past+t]: 0 where (key j <= query position past+i and mask[b,j]==1), else -1e9.
    Returns None when nothing is masked (a single query with no padding)."""
    S = past + t
    qpos = torch.arange(past, S)[:, None]
    kpos = torch.arange(S)[None, :]
    allowed = (kpos <= qpos)[None]  # [1,t,S]
    if attention_mask is not None:
        allowed = allowed & (attention_mask[:, None, :S] == 1)
    elif t == 1:
        return None
    bias = torch.zeros(allowed.shape, dtype=dtype)
    bias.masked_fill_(~allowed, MASK_NEG)
    return bias.expand(B, t, S) if bias.shape[0] == 1 else bias


class KVCache:
    """Preallocated cache, per layer k and v of shape [B, Hkv, capacity, D]; `length` filled so far."""

    def __init__(self, cfg: dict, B: int, capacity: int, dtype=torch.float32):
        V, C, L, H, Hkv, D, Fi = dims(cfg)
        self.k = [torch.zeros(B, Hkv, capacity, D, dtype=dtype) for _ in range(L)]
        self.v = [torch.zeros(B, Hkv, capacity, D, dtype=dtype) for _ in range(L)]
        self.length = 0
        self.capacity = capacity


def forward(params: Dict[str, torch.Tensor], cfg: dict, input_ids: torch.Tensor,
            position_ids: Optional[torch.Tensor] = None, attention_mask: Optional[torch.Tensor] = None,
            lora: Optional[Dict[str, torch.Tensor]] = None, lora_scale: float = 0.0,
            cache: Optional[KVCache] = None,
            rope: Optional[Tuple[torch.Tensor, torch.Tensor]] = None) -> torch.Tensor:
    """Returns logits [B,t,V] for input_ids [B,t].

    Without a cache: a full forward (t = T). With a KVCache: input_ids are the next t tokens after
    cache.length cached ones, attention_mask (if given) covers [B, cache.length + t], and the new
    keys/values are written into the cache (cache.length advances by t).
    lora: {"<proj>.lora_A": [r,in], "<proj>.lora_B": [out,r]}; lora_scale = alpha / r.
    rope: optional precomputed rope_table(cfg, max_pos, dtype) (a speed-up; same numbers).
    """
    V, C, L, H, Hkv, D, Fi = dims(cfg)
    G = H // Hkv
    eps = cfg["rmsNormEps"]
    B, t = input_ids.shape
    past = cache.length if cache is not None else 0
    S = past + t
    dtype = params["embed.weight"].dtype
    if rope is not None and position_ids is None:
        cos, sin = rope[0][None, past:S, None], rope[1][None, past:S, None]
    elif rope is not None:
        cos, sin = rope[0][position_ids][:, :, None], rope[1][position_ids][:, :, None]
    else:
        if position_ids is None:
            position_ids = torch.arange(past, S).expand(B, t)
        cos, sin = rope_cos_sin(position_ids, D, cfg["ropeTheta"], dtype, cfg.get("ropeScaling"))
    bias = attention_bias(attention_mask, B, t, past, dtype)
    if bias is not None:
        bias = bias[:, None, None]  # [B,1,1,t,S] over (kv head, group)
    scale = 1.0 / math.sqrt(D)

    def linear(x, prefix, has_bias=False):
        y = F.linear(x, params[prefix + ".weight"], params[prefix + ".bias"] if has_bias else None)
        if lora is not None and (prefix + ".lora_A") in lora:
            y = y + lora_scale * F.linear(F.linear(x, lora[prefix + ".lora_A"]), lora[prefix + ".lora_B"])
        return y

    x = F.embedding(input_ids, params["embed.weight"])
    ab = cfg["attentionBias"]
    for i in range(L):
        p = f"layers.{i}"
        h = rmsnorm(x, params[f"{p}.attn_norm.weight"], eps)
        q = linear(h, f"{p}.attn.q", ab).view(B, t, H, D)
        k = linear(h, f"{p}.attn.k", ab).view(B, t, Hkv, D)
        if cfg.get("qkNorm"):
            q = rmsnorm(q, params[f"{p}.attn.q_norm.weight"], eps)
            k = rmsnorm(k, params[f"{p}.attn.k_norm.weight"], eps)
        q = apply_rope(q, cos, sin)
        k = apply_rope(k, cos, sin)
        v = linear(h, f"{p}.attn.v", ab).view(B, t, Hkv, D)
        k = k.transpose(1, 2)  # [B,Hkv,t,D]
        v = v.transpose(1, 2)
        if cache is not None:
            cache.k[i][:, :, past:S] = k
            cache.v[i][:, :, past:S] = v
            k = cache.k[i][:, :, :S]
            v = cache.v[i][:, :, :S]
        # q heads grouped by kv head: head h = kvh*G + g  ->  [B,Hkv,G*t,D]
        qg = (q * scale).transpose(1, 2).reshape(B, Hkv, G * t, D)
        scores = torch.matmul(qg, k.transpose(-1, -2))  # [B,Hkv,G*t,S]
        if bias is not None:
            scores = (scores.view(B, Hkv, G, t, S) + bias).view(B, Hkv, G * t, S)
        probs = torch.softmax(scores, dim=-1)
        a = torch.matmul(probs, v)  # [B,Hkv,G*t,D]
        a = a.view(B, H, t, D).transpose(1, 2).reshape(B, t, H * D)
        x = x + linear(a, f"{p}.attn.o")
        h2 = rmsnorm(x, params[f"{p}.mlp_norm.weight"], eps)
        x = x + linear(F.silu(linear(h2, f"{p}.mlp.gate")) * linear(h2, f"{p}.mlp.up"), f"{p}.mlp.down")
    if cache is not None:
        cache.length = S
    x = rmsnorm(x, params["norm.weight"], eps)
    head = params["embed.weight"] if cfg["tieEmbeddings"] else params["lm_head.weight"]
    return F.linear(x, head)


# ----------------------------------------------------------------------------------------------
# GPT-2, in Hugging Face's own layout (transformers models/gpt2/modeling_gpt2.py), so the
# TypeScript loader's split of c_attn and transpose of the Conv1D weights is what is under test.

GPT2_LORA_TARGETS = ("q", "k", "v", "o", "up", "down")


def gpt2_hf_shapes(cfg: dict) -> List[Tuple[str, List[int]]]:
    """GPT2LMHeadModel state-dict names (under "transformer.") and shapes; Conv1D weights are [in, out]."""
    V, C, L, H, Hkv, D, Fi = dims(cfg)
    out = [("transformer.wte.weight", [V, C]), ("transformer.wpe.weight", [cfg["positionEmbeddings"], C])]
    for i in range(L):
        p = f"transformer.h.{i}"
        out += [(f"{p}.ln_1.weight", [C]), (f"{p}.ln_1.bias", [C]),
                (f"{p}.attn.c_attn.weight", [C, 3 * C]), (f"{p}.attn.c_attn.bias", [3 * C]),
                (f"{p}.attn.c_proj.weight", [C, C]), (f"{p}.attn.c_proj.bias", [C]),
                (f"{p}.ln_2.weight", [C]), (f"{p}.ln_2.bias", [C]),
                (f"{p}.mlp.c_fc.weight", [C, Fi]), (f"{p}.mlp.c_fc.bias", [Fi]),
                (f"{p}.mlp.c_proj.weight", [Fi, C]), (f"{p}.mlp.c_proj.bias", [C])]
    out += [("transformer.ln_f.weight", [C]), ("transformer.ln_f.bias", [C])]
    if not cfg["tieEmbeddings"]:
        out.append(("lm_head.weight", [V, C]))
    return out


def gpt2_init_params(cfg: dict, gen: torch.Generator, std: float = 0.2, norm_std: float = 0.1) -> Dict[str, torch.Tensor]:
    """Weights and biases N(0, std), LayerNorm gains 1 + N(0, norm_std) and biases N(0, norm_std)."""
    params = {}
    for name, shape in gpt2_hf_shapes(cfg):
        t = torch.randn(shape, generator=gen, dtype=torch.float64)
        is_ln = re.search(r"\.ln_(1|2|f)\.", name) is not None
        params[name] = (1.0 + norm_std * t) if is_ln and name.endswith("weight") else (norm_std if is_ln else std) * t
    return params


def gelu_new(x: torch.Tensor) -> torch.Tensor:
    """transformers NewGELUActivation (GPT-2's "gelu_new"), the tanh approximation."""
    return 0.5 * x * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * torch.pow(x, 3.0))))


def conv1d(x: torch.Tensor, w: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """transformers Conv1D: x @ W + b with W stored [in, out] (torch.addmm(bias, x, weight))."""
    return torch.addmm(b, x.reshape(-1, x.size(-1)), w).view(*x.shape[:-1], w.size(-1))


def gpt2_forward(params: Dict[str, torch.Tensor], cfg: dict, input_ids: torch.Tensor,
                 position_ids: torch.Tensor, attention_mask: Optional[torch.Tensor] = None,
                 lora: Optional[Dict[str, torch.Tensor]] = None, lora_scale: float = 0.0) -> torch.Tensor:
    """GPT2LMHeadModel logits [B,T,V] from HF-layout params. LoRA (our names, layers.{i}.attn.q.lora_A …)
    adds scale·B·A·x to q, k, v (the thirds of c_attn's output), c_proj (o), c_fc (up) and mlp.c_proj (down)."""
    V, C, L, H, Hkv, D, Fi = dims(cfg)
    eps = cfg["rmsNormEps"]
    B, t = input_ids.shape
    P = params

    def delta(x, name):
        if lora is None or (name + ".lora_A") not in lora:
            return 0.0
        return lora_scale * F.linear(F.linear(x, lora[name + ".lora_A"]), lora[name + ".lora_B"])

    x = F.embedding(input_ids, P["transformer.wte.weight"]) + F.embedding(position_ids, P["transformer.wpe.weight"])
    bias = attention_bias(attention_mask, B, t, 0, x.dtype)  # [B,t,t], 0 or -1e9 (causal and padding)
    for i in range(L):
        p, o = f"transformer.h.{i}", f"layers.{i}"
        h = F.layer_norm(x, (C,), P[f"{p}.ln_1.weight"], P[f"{p}.ln_1.bias"], eps)
        q, k, v = conv1d(h, P[f"{p}.attn.c_attn.weight"], P[f"{p}.attn.c_attn.bias"]).split(C, dim=2)
        q, k, v = q + delta(h, f"{o}.attn.q"), k + delta(h, f"{o}.attn.k"), v + delta(h, f"{o}.attn.v")
        q, k, v = (z.view(B, t, H, D).permute(0, 2, 1, 3) for z in (q, k, v))  # _split_heads: [B,H,t,D]
        w = torch.matmul(q, k.transpose(-1, -2)) / math.sqrt(D)  # scale_attn_weights
        if bias is not None:
            w = w + bias[:, None]
        a = torch.matmul(torch.softmax(w, dim=-1), v).permute(0, 2, 1, 3).reshape(B, t, C)  # _merge_heads
        x = x + conv1d(a, P[f"{p}.attn.c_proj.weight"], P[f"{p}.attn.c_proj.bias"]) + delta(a, f"{o}.attn.o")
        h2 = F.layer_norm(x, (C,), P[f"{p}.ln_2.weight"], P[f"{p}.ln_2.bias"], eps)
        up = conv1d(h2, P[f"{p}.mlp.c_fc.weight"], P[f"{p}.mlp.c_fc.bias"]) + delta(h2, f"{o}.mlp.up")
        act = gelu_new(up)
        x = x + conv1d(act, P[f"{p}.mlp.c_proj.weight"], P[f"{p}.mlp.c_proj.bias"]) + delta(act, f"{o}.mlp.down")
    x = F.layer_norm(x, (C,), P["transformer.ln_f.weight"], P["transformer.ln_f.bias"], eps)
    head = P["transformer.wte.weight"] if cfg["tieEmbeddings"] else P["lm_head.weight"]
    return F.linear(x, head)


# ----------------------------------------------------------------------------------------------
# losses


def token_logp(logits: torch.Tensor, targets: torch.Tensor, temperature: float = 1.0):
    """(logp [B,T], logp_all [B,T,V]) with logp_all = log_softmax(logits / temperature)."""
    logp_all = torch.log_softmax(logits / temperature, dim=-1)
    return logp_all.gather(-1, targets[..., None]).squeeze(-1), logp_all


def entropy_from_logp(logp_all: torch.Tensor) -> torch.Tensor:
    return -(logp_all.exp() * logp_all).sum(-1)


def ppo_loss(logits, targets, loss_mask, advantages, old_logp, ref_logp, *, temperature: float,
             clip_eps: float, kl_coef: float, ent_coef: float, token_weight: float) -> Dict[str, torch.Tensor]:
    logp, logp_all = token_logp(logits, targets, temperature)
    ent = entropy_from_logp(logp_all)
    ratio = torch.exp(logp - old_logp)
    s1 = ratio * advantages
    s2 = torch.clamp(ratio, 1.0 - clip_eps, 1.0 + clip_eps) * advantages
    pg = -torch.minimum(s1, s2)
    d = ref_logp - logp
    kl = torch.exp(d) - d - 1.0
    per_token = pg + kl_coef * kl - ent_coef * ent
    loss = (loss_mask * per_token).sum() * token_weight
    with torch.no_grad():
        clipped = ((ratio < 1.0 - clip_eps) & (advantages < 0)) | ((ratio > 1.0 + clip_eps) & (advantages > 0))
        clip_frac = (loss_mask * clipped.to(logits.dtype)).sum() * token_weight
        approx_kl = (loss_mask * 0.5 * (logp - old_logp) ** 2).sum() * token_weight
        entropy = (loss_mask * ent).sum() * token_weight
    return {"loss": loss, "logp": logp, "clip_frac": clip_frac, "approx_kl": approx_kl, "entropy": entropy}


def ce_loss(logits, targets, loss_mask, *, token_weight: float) -> Dict[str, torch.Tensor]:
    logp, logp_all = token_logp(logits, targets, 1.0)
    loss = (loss_mask * -logp).sum() * token_weight
    with torch.no_grad():
        entropy = (loss_mask * entropy_from_logp(logp_all)).sum() * token_weight
    return {"loss": loss, "logp": logp, "entropy": entropy}


# ----------------------------------------------------------------------------------------------
# safetensors (by hand)

_DTYPES = {
    "F64": (np.float64, 8), "F32": (np.float32, 4), "F16": (np.float16, 2), "BF16": (None, 2),
    "I64": (np.int64, 8), "I32": (np.int32, 4), "I16": (np.int16, 2), "I8": (np.int8, 1),
    "U8": (np.uint8, 1), "BOOL": (np.bool_, 1),
}


def read_safetensors(path: str) -> Tuple[Dict[str, torch.Tensor], Dict[str, str]]:
    """Returns ({name: tensor}, metadata). F32/F64/F16/BF16/int tensors; BF16 and F16 become float32."""
    with open(path, "rb") as f:
        raw = f.read()
    if len(raw) < 8:
        raise ValueError(f"{path}: not a safetensors file (too short)")
    (n,) = struct.unpack("<Q", raw[:8])
    if n > len(raw) - 8:
        raise ValueError(f"{path}: header length {n} exceeds file size")
    header = json.loads(raw[8:8 + n].decode("utf-8"))
    meta = header.pop("__metadata__", None) or {}
    base = 8 + n
    out = {}
    for name, info in header.items():
        dt = info["dtype"]
        if dt not in _DTYPES:
            raise ValueError(f"{path}: tensor {name}: unsupported dtype {dt}")
        b, e = info["data_offsets"]
        shape = list(info["shape"])
        buf = raw[base + b: base + e]
        np_dt, size = _DTYPES[dt]
        count = int(np.prod(shape)) if shape else 1
        if len(buf) != count * size:
            raise ValueError(f"{path}: tensor {name}: {len(buf)} bytes for shape {shape} {dt}")
        if dt == "BF16":
            u = np.frombuffer(buf, dtype="<u2").astype(np.uint32) << 16
            arr = u.view(np.float32)
        else:
            arr = np.frombuffer(buf, dtype=np.dtype(np_dt).newbyteorder("<"))
            if dt == "F16":
                arr = arr.astype(np.float32)
        out[name] = torch.from_numpy(arr.astype(arr.dtype.newbyteorder("="), copy=True).reshape(shape))
    return out, meta


def write_safetensors(path: str, tensors: Dict[str, torch.Tensor], metadata: Optional[Dict[str, str]] = None) -> None:
    """Writes every tensor as F32, in sorted key order, header JSON compact with sorted keys,
    padded with spaces to a multiple of 8 bytes."""
    header = {}
    chunks = []
    off = 0
    for name in sorted(tensors):
        arr = tensors[name].detach().to(torch.float32).contiguous().numpy().astype("<f4")
        data = arr.tobytes()
        header[name] = {"dtype": "F32", "shape": list(arr.shape), "data_offsets": [off, off + len(data)]}
        chunks.append(data)
        off += len(data)
    if metadata:
        header["__metadata__"] = {str(k): str(v) for k, v in metadata.items()}
    hj = json.dumps(header, separators=(",", ":"), sort_keys=True).encode("utf-8")
    hj += b" " * ((8 - len(hj) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(hj)))
        f.write(hj)
        for c in chunks:
            f.write(c)


def load_params(path: str, cfg: dict, dtype=torch.float32, prefix: Optional[str] = None) -> Dict[str, torch.Tensor]:
    """Loads the model's parameters from a safetensors file holding either plain names
    (`embed.weight`) or `param.`-prefixed ones (fixture files). Checks names and shapes."""
    tensors, _ = read_safetensors(path)
    if prefix is None:
        prefix = "param." if any(k.startswith("param.") for k in tensors) else ""
    params = {}
    for name, shape in parameter_shapes(cfg):
        key = prefix + name
        if key not in tensors:
            raise ValueError(f"{path}: missing parameter {key}")
        t = tensors[key]
        if list(t.shape) != list(shape):
            raise ValueError(f"{path}: {key} has shape {list(t.shape)}, config needs {shape}")
        params[name] = t.to(dtype).contiguous()
    return params
