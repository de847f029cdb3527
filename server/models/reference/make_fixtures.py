"""Correctness fixtures for Troupe's compiled model graphs (forward, PPO/CE train step, LoRA).

README
  Regenerate (deterministic; Debian python3-torch 1.13 + python3-numpy, no PyPI):
      /usr/bin/python3 server/models/reference/make_fixtures.py
  It rewrites server/models/fixtures/<case>.safetensors from fixed seeds and prints, per case, the
  loss, clip fraction and how far PyTorch's own float32 run is from the float64 expectations (a
  floor for the TypeScript tests' float32 tolerances). The model and losses are specified in the
  header of torch_model.py; everything here is computed in float64 from the float32-rounded stored
  weights and inputs, then stored as float32. Self-checks (finite differences, padding):
      /usr/bin/python3 server/models/reference/self_check.py

  File format (safetensors, all tensors F32, keys sorted, header space-padded to 8 bytes):
    param.<name>      every base parameter (names as parameterShapes in model-config.ts) and, in LoRA
                      cases, every adapter tensor (`param.layers.0.attn.q.lora_A` [r,in], `..lora_B` [out,r])
    input.input_ids, input.position_ids, input.targets   [B,T]  integer values stored as F32
                      (exact; cast to int64 before use). targets[b,t] = input_ids[b,t+1]; the last
                      column holds a random id and has loss_mask 0.
    input.attention_mask [B,T]  1 real / 0 padding (left padding)
    input.loss_mask   [B,T]  float 0/1 (0 on padding, on some prompt tokens and on the last column)
    input.advantages, input.old_logp, input.ref_logp  [B,T]   (PPO cases only)
    expect.logits [B,T,V] (raw logits, before temperature), expect.logp [B,T] (at temperature)
    expect.loss, expect.entropy, and for PPO expect.clip_frac, expect.approx_kl: shape [] scalars
    grad.<name>       d loss / d param.<name> for every trainable tensor (all base params, or only
                      the LoRA tensors in the LoRA case)
    __metadata__ {"case": JSON string} with fields:
      name, description, checks (list of what this case exercises), modelConfig (all fields, defaults
      filled), loss ("ppo" | "ce"), scalars {temperature, clipEps, klCoef, entCoef, tokenWeight}
      (CE: temperature 1 and tokenWeight only), lora (null | {rank, alpha, scale, targets}),
      trainable (names of the grad.* tensors, in checkpoint order), batch, seqLen,
      integerInputsAsF32 (list of input names stored as F32 holding integers), paddedPositionsNote,
      torchFloat32Deviation (max |torch float32 - float64| for logits at real positions, logp at
      real positions, loss, and max over grads of max|dg| / max|g|), ppoBranches (masked-token count per
      PPO branch; null for CE), generator (torch version, seed).
  Logits and logp at PADDED positions (attention_mask 0) depend on precision by construction (see
  torch_model.py CAVEAT): compare them only where attention_mask == 1. Loss, diagnostics and grads
  are unaffected.

  Cases
    tiny-full-ppo  V=40 C=32 L=2 H=4 Hkv=2 (GQA, G=2) D=8 F=48, untied lm_head, q/k/v biases, B=3
                   T=7, rows 1 and 2 left-padded by 2 and 4; temperature 0.7, clip 0.2, kl 0.05,
                   ent 0.01; old_logp = logp - log_ratio chosen so the masked tokens cover all
                   five PPO branches (inside the clip range; clipped below with A<0 and above with
                   A>0; outside but unclipped below with A>0 and above with A<0), mixed-sign A. Grads for every parameter. Checks: embedding gather grad,
                   RoPE at shifted positions, GQA grouping, padding mask, biases, untied head, the
                   whole PPO loss (clip branches, k3 KL, entropy bonus, temperature), diagnostics.
    tiny-lora-ppo  same shapes, tied head, no biases, LoRA rank 4 alpha 8 (scale 2) on all seven
                   projections with nonzero lora_B; grads only for lora_A/lora_B. Checks: LoRA
                   forward/backward, frozen base, tied head in the forward.
    tiny-full-ce   V=40 C=32 L=2 H=4 Hkv=1 (G=4) F=48, tied head, q/k/v biases, ropeTheta 1e6,
                   rmsNormEps 1e-5, cross-entropy (temperature 1). Grads for every parameter.
                   Checks: CE loss, tied embedding grad (gather + head paths summed), G=4 grouping,
                   non-default rope theta / eps.
"""
from __future__ import annotations

import json
import os
import sys

sys.dont_write_bytecode = True

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import torch_model as tm  # noqa: E402

OUT_DIR = os.path.normpath(os.path.join(HERE, "..", "fixtures"))

BASE = {
    "vocabSize": 40, "hiddenSize": 32, "numLayers": 2, "numHeads": 4, "numKvHeads": 2,
    "intermediateSize": 48, "ropeTheta": 10000.0, "rmsNormEps": 1e-6,
}

CASES = [
    {
        "name": "tiny-full-ppo", "seed": 1001, "loss": "ppo",
        "config": {**BASE, "tieEmbeddings": False, "attentionBias": True},
        "lora": None, "pads": [0, 2, 4], "prompt": [1, 1, 0],
        "description": "Full fine-tuning PPO step: untied head, q/k/v biases, GQA (G=2), left padding "
                       "in two rows, temperature 0.7, tokens clipped on both sides; grads for all params.",
        "checks": ["embedding gather grad", "rope at shifted positions", "gqa G=2", "left padding mask",
                   "qkv biases", "untied lm_head", "ppo clip branches", "k3 kl", "entropy bonus",
                   "temperature", "diagnostics clip_frac/approx_kl/entropy"],
    },
    {
        "name": "tiny-lora-ppo", "seed": 2002, "loss": "ppo",
        "config": {**BASE, "tieEmbeddings": True, "attentionBias": False},
        "lora": {"rank": 4, "alpha": 8.0, "targets": list(tm.LORA_TARGETS)}, "pads": [3, 0, 1], "prompt": [0, 2, 1],
        "description": "LoRA PPO step: tied head, no biases, rank 4 alpha 8 on q,k,v,o,gate,up,down with "
                       "nonzero lora_B; base frozen, grads only for lora_A/lora_B.",
        "checks": ["lora forward/backward on all seven projections", "frozen base", "tied head forward",
                   "left padding mask", "ppo loss"],
    },
    {
        "name": "tiny-full-ce", "seed": 3003, "loss": "ce",
        "config": {**BASE, "numKvHeads": 1, "tieEmbeddings": True, "attentionBias": True,
                   "ropeTheta": 1e6, "rmsNormEps": 1e-5},
        "lora": None, "pads": [0, 1, 3], "prompt": [2, 1, 0],
        "description": "Supervised cross-entropy step (temperature 1): tied head so embed.weight gets "
                       "gather + head gradients, GQA with one kv head (G=4), ropeTheta 1e6, eps 1e-5; "
                       "grads for all params.",
        "checks": ["ce loss", "tied embedding grad (gather + head)", "gqa G=4", "non-default ropeTheta/eps",
                   "left padding mask", "qkv biases"],
    },
]

B, T = 3, 7
PPO = {"temperature": 0.7, "clipEps": 0.2, "klCoef": 0.05, "entCoef": 0.01}


def f32(t: torch.Tensor) -> torch.Tensor:
    """Round to float32 and back, so the float64 computation uses exactly the stored values."""
    return t.to(torch.float32).to(torch.float64)


def make_inputs(case, cfg, gen):
    V = cfg["vocabSize"]
    ids = torch.randint(0, V, (B, T), generator=gen)  # padded positions get random ids too (must not matter)
    attn = torch.ones(B, T, dtype=torch.float64)
    loss_mask = torch.ones(B, T, dtype=torch.float64)
    for b, (pad, prompt) in enumerate(zip(case["pads"], case["prompt"])):
        attn[b, :pad] = 0
        loss_mask[b, :pad + prompt] = 0  # padding and the first prompt tokens carry no loss
    loss_mask[:, T - 1] = 0
    pos = (attn.cumsum(1) - 1).clamp(min=0).to(torch.int64)
    targets = torch.cat([ids[:, 1:], torch.randint(0, V, (B, 1), generator=gen)], dim=1)
    return ids, pos, attn, targets, loss_mask


CATEGORIES = ("inside", "low&A<0 (clipped)", "high&A>0 (clipped)", "low&A>0", "high&A<0")


def ppo_branches(loss_mask, gen):
    """Advantages and log-ratios (logp - old_logp) that put the masked tokens, in row-major order, through
    the five PPO branches in turn: ratio inside [1-eps, 1+eps] (|log r| <= 0.1), below with A<0 (clipped),
    above with A>0 (clipped), below with A>0 and above with A<0 (unclipped). Outside ratios have
    |log r| in [0.3, 0.6], far from log(0.8) and log(1.2), so float32 rounding cannot flip a branch."""
    mag = torch.randn(B, T, generator=gen, dtype=torch.float64).abs() + 0.1
    u = torch.rand(B, T, generator=gen, dtype=torch.float64)
    sign = torch.where(torch.rand(B, T, generator=gen, dtype=torch.float64) < 0.5, -1.0, 1.0)
    adv = sign * mag
    log_ratio = 0.1 * (2 * u - 1)
    k = 0
    for b in range(B):
        for t in range(T):
            if loss_mask[b, t] == 0:
                continue
            c = k % len(CATEGORIES)
            k += 1
            if c == 0:
                continue
            low = c in (1, 3)
            log_ratio[b, t] = (-1.0 if low else 1.0) * (0.3 + 0.3 * u[b, t])
            adv[b, t] = (-1.0 if c in (1, 4) else 1.0) * mag[b, t]
    return adv, log_ratio


def run_case(case):
    gen = torch.Generator().manual_seed(case["seed"])
    cfg = tm.normalize_config(case["config"])
    params = {k: f32(v) for k, v in tm.init_params(cfg, gen).items()}
    lora = None
    lora_meta = None
    if case["lora"]:
        r, alpha = case["lora"]["rank"], case["lora"]["alpha"]
        lora = {}
        for name, shape in tm.lora_shapes(cfg, r, case["lora"]["targets"]):
            std = 0.2 if name.endswith("lora_A") else 0.1
            lora[name] = f32(std * torch.randn(shape, generator=gen, dtype=torch.float64))
        lora_meta = {"rank": r, "alpha": alpha, "scale": alpha / r, "targets": case["lora"]["targets"]}
    ids, pos, attn, targets, loss_mask = make_inputs(case, cfg, gen)
    token_weight = 1.0 / float(loss_mask.sum())
    lora_scale = lora_meta["scale"] if lora_meta else 0.0

    inputs = {"input_ids": ids, "position_ids": pos, "targets": targets, "attention_mask": attn, "loss_mask": loss_mask}
    if case["loss"] == "ppo":
        scalars = {**PPO, "tokenWeight": token_weight}
        with torch.no_grad():
            logits0 = tm.forward(params, cfg, ids, pos, attn, lora, lora_scale)
            logp0, _ = tm.token_logp(logits0, targets, PPO["temperature"])
        adv, log_ratio = ppo_branches(loss_mask, gen)
        inputs["advantages"] = f32(adv)
        inputs["old_logp"] = f32(logp0 - log_ratio)
        inputs["ref_logp"] = f32(logp0 + 0.2 * torch.randn(B, T, generator=gen, dtype=torch.float64))
    else:
        scalars = {"temperature": 1.0, "tokenWeight": token_weight}

    trainable = [n for n, _ in tm.lora_shapes(cfg, lora_meta["rank"], lora_meta["targets"])] if lora \
        else [n for n, _ in tm.parameter_shapes(cfg)]

    def compute(dtype):
        P = {k: v.to(dtype).clone() for k, v in params.items()}
        Lr = {k: v.to(dtype).clone() for k, v in lora.items()} if lora else None
        src = Lr if lora else P
        for n in trainable:
            src[n].requires_grad_(True)
        I = {k: (v.to(dtype) if v.is_floating_point() else v) for k, v in inputs.items()}
        logits = tm.forward(P, cfg, I["input_ids"], I["position_ids"], I["attention_mask"], Lr, lora_scale)
        if case["loss"] == "ppo":
            res = tm.ppo_loss(logits, I["targets"], I["loss_mask"], I["advantages"], I["old_logp"], I["ref_logp"],
                              temperature=PPO["temperature"], clip_eps=PPO["clipEps"], kl_coef=PPO["klCoef"],
                              ent_coef=PPO["entCoef"], token_weight=token_weight)
        else:
            res = tm.ce_loss(logits, I["targets"], I["loss_mask"], token_weight=token_weight)
        grads = torch.autograd.grad(res["loss"], [src[n] for n in trainable])
        out = {"logits": logits.detach(), **{k: v.detach() for k, v in res.items()}}
        return out, dict(zip(trainable, grads))

    exp64, g64 = compute(torch.float64)
    exp32, g32 = compute(torch.float32)
    real = attn.bool()
    dev = {
        "logitsRealPositions": float((exp32["logits"].double() - exp64["logits"])[real].abs().max()),
        "logpRealPositions": float((exp32["logp"].double() - exp64["logp"])[real].abs().max()),
        "loss": abs(float(exp32["loss"]) - float(exp64["loss"])),
        "gradMaxRel": max(float((g32[n].double() - g64[n]).abs().max() / g64[n].abs().max().clamp(min=1e-30))
                          for n in trainable),
    }

    tensors = {f"param.{k}": v for k, v in params.items()}
    if lora:
        tensors.update({f"param.{k}": v for k, v in lora.items()})
    tensors.update({f"input.{k}": v.to(torch.float64) for k, v in inputs.items()})
    for k, v in exp64.items():
        tensors[f"expect.{k}"] = v
    tensors.update({f"grad.{k}": v for k, v in g64.items()})

    summary = {k: float(v) for k, v in exp64.items() if v.dim() == 0}
    if case["loss"] == "ppo":
        clipped_tokens = round(summary["clip_frac"] / token_weight)
        summary["clippedTokens"] = clipped_tokens
        summary["maskedTokens"] = int(loss_mask.sum())
        r = torch.exp(exp64["logp"] - inputs["old_logp"])
        A, e, m = inputs["advantages"], PPO["clipEps"], loss_mask.bool()
        masks = [(r >= 1 - e) & (r <= 1 + e), (r < 1 - e) & (A < 0), (r > 1 + e) & (A > 0), (r < 1 - e) & (A > 0), (r > 1 + e) & (A < 0)]
        summary["branches"] = {c: int((mm & m).sum()) for c, mm in zip(CATEGORIES, masks)}
        assert all(v > 0 for v in summary["branches"].values()), summary["branches"]
    meta = {
        "name": case["name"],
        "description": case["description"],
        "checks": case["checks"],
        "modelConfig": cfg,
        "loss": case["loss"],
        "scalars": scalars,
        "lora": lora_meta,
        "trainable": trainable,
        "batch": B,
        "seqLen": T,
        "integerInputsAsF32": ["input_ids", "position_ids", "targets"],
        "paddedPositionsNote": "logits/logp where attention_mask==0 are precision-dependent; compare only where attention_mask==1",
        "torchFloat32Deviation": dev,
        "ppoBranches": summary.get("branches"),
        "generator": f"torch {torch.__version__}, make_fixtures.py seed {case['seed']}",
    }
    path = os.path.join(OUT_DIR, case["name"] + ".safetensors")
    tm.write_safetensors(path, tensors, {"case": json.dumps(meta, sort_keys=True)})
    print(f"{case['name']}: {os.path.getsize(path)} bytes, {json.dumps(summary)}")
    print(f"  torch float32 vs float64: {json.dumps(dev)}")
    return path


def main():
    os.makedirs(OUT_DIR, exist_ok=True)
    torch.set_num_threads(1)  # reductions in a fixed order
    for case in CASES:
        run_case(case)


if __name__ == "__main__":
    main()
