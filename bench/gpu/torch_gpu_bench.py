"""PyTorch side of `npm run bench:gpu` (bench/gpu/bench-gpu.ts): what an ML engineer would run
instead of Troupe on the same GPU — eager PyTorch, bf16 weights, SDPA attention, LoRA adapters on
every projection (as PEFT adds them), micro-batched PPO with gradient accumulation and AdamW.

Run: python3 bench/gpu/torch_gpu_bench.py '<json>'   (one model; prints one JSON line per phase
as it finishes, so an orchestrator that kills it on a deadline keeps the phases that ended; logs on
stderr). The JSON:
  {"modelConfig": {...Troupe ModelConfig...}, "device": "cuda"|"cpu", "dtype": "bf16"|"fp32",
   "phases": ["decode", "ppo"],
   "ppo": {"batch": 64, "seqLen": 512, "microTokens": 4096, "rounds": 3, "warmup": 1,
           "lora": {"rank": 16, "alpha": 32}},
   "decode": {"batch": 64, "promptLen": 256, "newTokens": 256, "rounds": 3, "warmup": 1},
   "phaseSeconds": 120}
Each phase replies {"phase", "ms": [timed rounds], "medianMs", "tokens", "tokPerSec", "peakAllocMiB",
"peakReservedMiB", ...} or {"phase", "error"}. Timed rounds stop early once phaseSeconds have passed
(at least one is timed). `{"phase": "info"}` comes first (torch version, device name).

The model is `server/models/reference/torch_model.py`'s (its init shapes, RoPE table and PPO loss,
the same the CPU benchmark and the engine's tests use), with the forward rewritten for the GPU: bf16
weights, F.scaled_dot_product_attention (causal; GQA through enable_gqa), a preallocated KV cache,
the LM head only at the last prompt position during prefill, and fp32 LoRA adapters under autocast.
Weights are random (N(0, 0.02), norms 1): random weights cost the same FLOPs as trained ones.
"""
from __future__ import annotations

import contextlib
import json
import math
import os
import sys
import time
import traceback

sys.dont_write_bytecode = True
HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.normpath(os.path.join(HERE, "..", "..", "server", "models", "reference")))

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

import torch_model as tm  # noqa: E402


def log(msg: str) -> None:
    print(f"[torch {NAME}] {msg}", file=sys.stderr, flush=True)


NAME = ""


def emit(obj) -> None:
    print(json.dumps(obj), flush=True)


class Model:
    def __init__(self, cfg: dict, device: str, dtype: torch.dtype, lora: dict | None, seed: int = 1):
        self.cfg = cfg
        self.device = device
        self.dtype = dtype
        V, C, L, H, Hkv, D, Fi = tm.dims(cfg)
        self.dims = (V, C, L, H, Hkv, D, Fi)
        g = torch.Generator(device=device).manual_seed(seed)
        self.p = {}
        for name, shape in tm.parameter_shapes(cfg):
            if name.endswith("norm.weight"):
                t = torch.ones(shape, device=device, dtype=dtype)
            elif name.endswith(".bias"):
                t = torch.zeros(shape, device=device, dtype=dtype)
            else:
                t = torch.empty(shape, device=device, dtype=dtype).normal_(0.0, 0.02, generator=g)
            self.p[name] = t
        self.lora = None
        self.lora_scale = 0.0
        if lora:
            r = int(lora["rank"])
            self.lora = {}
            for name, shape in tm.lora_shapes(cfg, r, tuple(lora.get("targets", tm.LORA_TARGETS))):
                t = torch.zeros(shape, device=device, dtype=torch.float32)
                if name.endswith("lora_A"):
                    t.normal_(0.0, 0.02, generator=g)
                self.lora[name] = t.requires_grad_(True)
            self.lora_scale = float(lora.get("alpha", 2 * r)) / r
        cos, sin = tm.rope_table(cfg, cfg["maxSequenceLength"], torch.float32)
        self.cos, self.sin = cos.to(device, dtype), sin.to(device, dtype)

    def _linear(self, x, prefix, has_bias=False):
        y = F.linear(x, self.p[prefix + ".weight"], self.p[prefix + ".bias"] if has_bias else None)
        if self.lora is not None and (prefix + ".lora_A") in self.lora:
            a, b = self.lora[prefix + ".lora_A"], self.lora[prefix + ".lora_B"]
            y = y + self.lora_scale * F.linear(F.linear(x, a.to(x.dtype)), b.to(x.dtype))
        return y

    def forward(self, ids, cache=None, last_only=False):
        """Logits [B,t,V] (or [B,1,V] with last_only) for ids [B,t] after cache.length cached tokens."""
        V, C, L, H, Hkv, D, Fi = self.dims
        cfg = self.cfg
        eps = cfg["rmsNormEps"]
        B, t = ids.shape
        past = cache.length if cache is not None else 0
        S = past + t
        cos, sin = self.cos[None, past:S, None], self.sin[None, past:S, None]
        ab = cfg["attentionBias"]
        x = F.embedding(ids, self.p["embed.weight"])
        for i in range(L):
            pre = f"layers.{i}"
            h = tm.rmsnorm(x, self.p[f"{pre}.attn_norm.weight"], eps)
            q = self._linear(h, f"{pre}.attn.q", ab).view(B, t, H, D)
            k = self._linear(h, f"{pre}.attn.k", ab).view(B, t, Hkv, D)
            v = self._linear(h, f"{pre}.attn.v", ab).view(B, t, Hkv, D)
            if cfg.get("qkNorm"):
                q = tm.rmsnorm(q, self.p[f"{pre}.attn.q_norm.weight"], eps)
                k = tm.rmsnorm(k, self.p[f"{pre}.attn.k_norm.weight"], eps)
            q = tm.apply_rope(q, cos, sin).transpose(1, 2)  # [B,H,t,D]
            k = tm.apply_rope(k, cos, sin).transpose(1, 2)  # [B,Hkv,t,D]
            v = v.transpose(1, 2)
            if cache is not None:
                cache.k[i][:, :, past:S] = k
                cache.v[i][:, :, past:S] = v
                k, v = cache.k[i][:, :, :S], cache.v[i][:, :, :S]
            # One new token sees every cached key: no mask. A prompt from position 0: causal.
            a = attend(q, k, v, causal=(t > 1 and past == 0))
            a = a.transpose(1, 2).reshape(B, t, H * D)
            x = x + self._linear(a, f"{pre}.attn.o")
            h2 = tm.rmsnorm(x, self.p[f"{pre}.mlp_norm.weight"], eps)
            x = x + self._linear(F.silu(self._linear(h2, f"{pre}.mlp.gate")) * self._linear(h2, f"{pre}.mlp.up"), f"{pre}.mlp.down")
        if cache is not None:
            cache.length = S
        if last_only:
            x = x[:, -1:]
        x = tm.rmsnorm(x, self.p["norm.weight"], eps)
        head = self.p["embed.weight"] if cfg["tieEmbeddings"] else self.p["lm_head.weight"]
        return F.linear(x, head)


def attend(q, k, v, causal):
    """SDPA over q [B,H,t,D] and k, v [B,Hkv,S,D] (GQA). PyTorch < 2.5 (Debian's 1.13 on the CPU
    form) lacks enable_gqa or SDPA itself: the keys are repeated per group and, without SDPA,
    attention is a masked softmax of the products."""
    H, Hkv = q.shape[1], k.shape[1]
    if SDPA_GQA:
        return F.scaled_dot_product_attention(q, k, v, is_causal=causal, enable_gqa=(H != Hkv))
    if H != Hkv:
        k, v = k.repeat_interleave(H // Hkv, 1), v.repeat_interleave(H // Hkv, 1)
    if hasattr(F, "scaled_dot_product_attention"):
        return F.scaled_dot_product_attention(q, k, v, is_causal=causal)
    s = torch.matmul(q, k.transpose(-1, -2)) / math.sqrt(q.shape[-1])
    if causal:
        t, S = q.shape[2], k.shape[2]
        s = s + torch.full((t, S), tm.MASK_NEG, dtype=s.dtype, device=s.device).triu_(S - t + 1)
    return torch.matmul(torch.softmax(s, -1), v)


SDPA_GQA = tuple(int(x) for x in torch.__version__.split("+")[0].split(".")[:2]) >= (2, 5)


class Cache:
    def __init__(self, cfg, B, S, device, dtype):
        V, C, L, H, Hkv, D, Fi = tm.dims(cfg)
        self.k = [torch.empty(B, Hkv, S, D, device=device, dtype=dtype) for _ in range(L)]
        self.v = [torch.empty(B, Hkv, S, D, device=device, dtype=dtype) for _ in range(L)]
        self.length = 0


def sync(device):
    if device == "cuda":
        torch.cuda.synchronize()


def reset_peak(device):
    if device == "cuda":
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats()


def peaks(device):
    if device != "cuda":
        return {"peakAllocMiB": None, "peakReservedMiB": None}
    return {"peakAllocMiB": torch.cuda.max_memory_allocated() / 2**20, "peakReservedMiB": torch.cuda.max_memory_reserved() / 2**20}


def median(xs):
    s = sorted(xs)
    m = len(s) // 2
    return s[m] if len(s) % 2 else (s[m - 1] + s[m]) / 2


def autocast(device, dtype):
    # bf16 base weights, fp32 LoRA masters: autocast casts the adapters' matmuls as PEFT+AMP would.
    if dtype == torch.float32:
        return contextlib.nullcontext()
    return torch.autocast(device_type=device, dtype=dtype)


def timed_rounds(fn, rounds, warmup, deadline, device):
    ms = []
    for i in range(warmup + rounds):
        sync(device)
        t0 = time.perf_counter()
        fn(i)
        sync(device)
        dt = (time.perf_counter() - t0) * 1e3
        log(f"round {i + 1}/{warmup + rounds}: {dt:.1f} ms{' (warm-up)' if i < warmup else ''}")
        if i >= warmup:
            ms.append(round(dt, 3))
            if time.perf_counter() > deadline:
                break
    return ms


def phase_decode(cfg, spec, device, dtype, phase_s):
    B, P, N = int(spec["batch"]), int(spec["promptLen"]), int(spec["newTokens"])
    reset_peak(device)
    m = Model(cfg, device, dtype, None)
    g = torch.Generator(device=device).manual_seed(0)
    prompt = torch.randint(0, cfg["vocabSize"], (B, P), device=device, generator=g)
    cache = Cache(cfg, B, P + N, device, dtype)
    prefill = []

    def run(_):
        with torch.inference_mode():
            cache.length = 0
            t0 = time.perf_counter()
            logits = m.forward(prompt, cache, last_only=True)[:, -1].float()
            tok = torch.multinomial(torch.softmax(logits, -1), 1, generator=g)
            sync(device)
            prefill.append((time.perf_counter() - t0) * 1e3)
            for _ in range(N - 1):
                logits = m.forward(tok, cache)[:, -1].float()
                tok = torch.multinomial(torch.softmax(logits, -1), 1, generator=g)

    deadline = time.perf_counter() + phase_s
    ms = timed_rounds(run, int(spec.get("rounds", 3)), int(spec.get("warmup", 1)), deadline, device)
    med = median(ms)
    return {"ms": ms, "medianMs": med, "prefillMs": median(prefill[-len(ms):]), "tokens": B * N,
            "tokPerSec": B * N / (med / 1e3), "shape": {"batch": B, "promptLen": P, "newTokens": N},
            "sampling": "softmax + multinomial, temperature 1", **peaks(device)}


def phase_ppo(cfg, spec, device, dtype, phase_s):
    B, T = int(spec["batch"]), int(spec["seqLen"])
    micro_tokens = int(spec.get("microTokens", 4096))
    per = max(1, micro_tokens // T)  # sequences per micro-batch (a sequence is never split)
    reset_peak(device)
    m = Model(cfg, device, dtype, spec.get("lora") or {"rank": 16, "alpha": 32})
    g = torch.Generator(device=device).manual_seed(0)
    V = cfg["vocabSize"]
    ids = torch.randint(0, V, (B, T), device=device, generator=g)
    targets = torch.randint(0, V, (B, T), device=device, generator=g)
    adv = torch.randn(B, T, device=device, generator=g)
    mask = torch.ones(B, T, device=device)
    chunks = [slice(s, min(B, s + per)) for s in range(0, B, per)]
    with torch.no_grad(), autocast(device, dtype):
        old = torch.cat([tm.token_logp(m.forward(ids[c]).float(), targets[c])[0] for c in chunks])
    ref = old.clone()
    leaves = list(m.lora.values())
    opt = torch.optim.AdamW(leaves, lr=1e-4, weight_decay=0.01, **({"fused": True} if device == "cuda" else {}))
    tw = 1.0 / (B * T)
    losses = []

    def step(_):
        opt.zero_grad(set_to_none=True)
        total = 0.0
        for c in chunks:
            with autocast(device, dtype):
                logits = m.forward(ids[c])
            out = tm.ppo_loss(logits.float(), targets[c], mask[c], adv[c], old[c], ref[c], temperature=1.0,
                              clip_eps=0.2, kl_coef=0.05, ent_coef=0.01, token_weight=tw)
            out["loss"].backward()
            total += out["loss"].detach()
        torch.nn.utils.clip_grad_norm_(leaves, 1.0)
        opt.step()
        losses.append(float(total))

    deadline = time.perf_counter() + phase_s
    ms = timed_rounds(step, int(spec.get("rounds", 3)), int(spec.get("warmup", 1)), deadline, device)
    med = median(ms)
    trainable = sum(t.numel() for t in leaves)
    return {"ms": ms, "medianMs": med, "tokens": B * T, "tokPerSec": B * T / (med / 1e3), "loss": [losses[0], losses[-1]],
            "microBatches": len(chunks), "sequencesPerMicroBatch": per, "trainable": trainable,
            "shape": {"batch": B, "seqLen": T, "microTokens": micro_tokens}, **peaks(device)}


def main():
    global NAME
    spec = json.loads(sys.argv[1])
    NAME = spec.get("name", "")
    device = spec.get("device", "cuda")
    dtype = {"bf16": torch.bfloat16, "fp32": torch.float32}[spec.get("dtype", "bf16")]
    if device == "cpu" and spec.get("threads"):
        torch.set_num_threads(int(spec["threads"]))
    cfg = tm.normalize_config(spec["modelConfig"])
    torch.backends.cuda.matmul.allow_tf32 = True
    emit({"phase": "info", "torch": torch.__version__, "device": torch.cuda.get_device_name(0) if device == "cuda" else "cpu",
          "dtype": spec.get("dtype", "bf16"), "sdpaGqa": SDPA_GQA})
    phase_s = float(spec.get("phaseSeconds", 120))
    for ph in spec.get("phases", ["decode", "ppo"]):
        t0 = time.perf_counter()
        try:
            if ph == "decode":
                r = phase_decode(cfg, spec["decode"], device, dtype, phase_s)
            elif ph == "ppo":
                r = phase_ppo(cfg, spec["ppo"], device, dtype, phase_s)
            else:
                raise ValueError(f"unknown phase {ph!r}")
            emit({"phase": ph, **r, "wallSec": round(time.perf_counter() - t0, 2)})
        except Exception as e:  # noqa: BLE001 - an OOM in one phase is a result, not a crash
            traceback.print_exc(file=sys.stderr)
            emit({"phase": ph, "error": f"{type(e).__name__}: {str(e)[:500]}", "wallSec": round(time.perf_counter() - t0, 2), **peaks(device)})
        if device == "cuda":
            torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
