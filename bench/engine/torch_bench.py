"""PyTorch side of the engine benchmark: a persistent JSON-lines server.

Run:  /usr/bin/python3 bench/engine/torch_bench.py [--threads 2] [--variant fused|plain]
  (Debian python3-torch 1.13; install libopenblas0-openmp or torch uses reference BLAS, ~20x slower:
  check `info` -> blasLibrary.)
The TypeScript orchestrator spawns it once and interleaves rounds with our engine. Protocol: one JSON
command per line on stdin, one JSON reply per line on stdout (nothing else is written to stdout; logs
go to stderr). A command may carry "id"; the reply echoes it. A failing command replies
{"error": "..."} (plus "id") and the server keeps running. On EOF or "quit" it exits 0.

Commands
  {"cmd":"info"} -> {torch, python, numpy, threads, interopThreads, blasLibrary (the libblas/openblas
      mapped into the process), blasCore (OpenBLAS's kernel: openblas_get_corename; pin it with
      OPENBLAS_CORETYPE, see torch-blas.ts), coretypeEnv, config (torch.__config__.show()), cpuCount, variant}
  {"cmd":"threads","n":2} -> {threads}           (torch.set_num_threads; also --threads at start)
  {"cmd":"load","modelConfig":{...},"weights":"<file.safetensors>"}   params named `embed.weight` or
      `param.embed.weight` (fixture files) — the same file our engine loads;
  {"cmd":"load","modelConfig":{...},"seed":123}   random init instead (N(0,0.02), norms 1).
      Optional "lora":{"rank":r,"alpha":a,"targets":[...]} makes train steps train only LoRA tensors
      (A ~ N(0,0.02), B = 0 unless the weights file holds them).
      -> {ok, params (count of base numbers), trainable (count), config (defaults filled)}
  {"cmd":"trainStep","batch":B,"seqLen":T,"steps":n,"warmup":w,"loss":"ppo"|"ce","seed":0}
      Times n steps (after w untimed ones) of: zero grads -> forward -> loss -> backward ->
      clip_grad_norm_(1.0) -> torch.optim.AdamW(lr 1e-4, weight_decay 0.01, foreach) step, on a fixed
      random batch (ids/targets uniform, no padding, loss_mask 1, token_weight 1/(B*T); PPO: advantages
      N(0,1), old_logp = ref_logp = the batch's logp at the start, temperature 1, clip 0.2, kl 0.05,
      ent 0.01). Training runs on a copy of the loaded weights (each command starts from them).
      -> {ms: [per step], loss: [first, last], batch, seqLen}
      "profile": k (optional) runs one more step under torch.profiler after the timed ones and adds
      "profile": {...} (see PROFILES below).
  {"cmd":"forward","batch":B,"seqLen":T,"steps":n,"warmup":w,"loss":"ppo"}  forward + loss under
      torch.no_grad -> {ms: [...]}
  {"cmd":"decode","batch":64,"promptLen":P,"newTokens":N,"temperature":1.0,"topP":1.0,"steps":n,
   "warmup":w,"seed":0,"cache":"prealloc"|"cat","sampler":"multinomial"|"exponential",
   "attention":"mulsum"|"matmul"}
      Times n runs of batched sampled decoding under torch.inference_mode: prefill the [B,P] random
      prompt (no padding) -> sample token 1 from the last position; then N-1 single-token steps with
      the KV cache, each sampling one more token. So each run is 1 prefill + (N-1) one-token forwards
      and yields B*N sampled tokens (HF generate semantics). Cache: "prealloc" (default) = per layer
      [B,Hkv,P+N,D] tensors written in place; "cat" = torch.cat per step. Sampling:
      softmax(logits/temperature) (temperature <= 0: greedy argmax), top-p (nucleus over the sorted cumulative probabilities, keeping the
      smallest prefix with mass >= topP; skipped when topP >= 1), then torch.multinomial (default) or
      the exponential-race trick argmax(p / Exp(1)) (same distribution). No per-sequence Python loops.
      Attention in the one-token steps: "mulsum" (default; broadcast multiply + sum, ~2x faster than
      torch 1.13's CPU bmm for these shapes) or "matmul" (batched matmul). Prefill always uses matmul.
      -> {ms: [per run], prefillMs: [per run], tokens: B*N, tokPerSec (median)}
      "profile": k (optional) runs one more generation with torch.profiler on over its N-1
      single-token steps (the prefill is not profiled) and adds "profile": {...} (PROFILES below).
  {"cmd":"matmulPeak","n":512,"reps":r} -> {gflops, n, reps, ms}   (torch.mm of n x n float32)
  {"cmd":"quit"} -> {ok: true}, then exit.
PROFILES ("profile": k, k the number of rows kept): torch.profiler's CPU events, averaged by op:
  {steps (steps profiled), wallMs (the profiled span), selfMs (all ops' self time: wallMs less it is
   Python and the profiler's own cost between ops), ops: [{op, selfMs, count, share of selfMs}] (top k
   by self time), shapes: [{op, inputShapes, selfMs, count, share}] (top k by op and input shapes)}.
  Self time is an op's wall time on the calling thread less its children's, OpenMP workers included,
  so the shares add up to the step; the profiler adds a few microseconds to every op.
Every successful reply also carries wallSec, cpuSec (process user+system time) and pageFaults (minor
faults) for the whole command, and maxRssMB (the process's peak resident set so far): on a shared 2-vCPU VM, cpuSec far below wallSec * threads flags
contention from other processes, and pageFaults should be ~0 in steady state (see MALLOC_TUNING).

Variants (--variant, or "variant" in load): "fused" (default) concatenates q|k|v and gate|up weights
into one matrix each at load time (one GEMM instead of three/two; mathematically the same model; in
training the fused matrices are the leaf tensors AdamW updates), which is how optimized PyTorch
inference code (vLLM, GPT-2's c_attn) lays them out; "plain" runs torch_model.forward unchanged, one
F.linear per named parameter. Both precompute the RoPE table. Pick whichever is faster for a fair
baseline; the orchestrator can ask for either.
"""
from __future__ import annotations

import argparse
import json
import math
import os
import platform
import resource
import sys
import time
import traceback

sys.dont_write_bytecode = True

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.normpath(os.path.join(HERE, "..", "..", "server", "models", "reference")))


def _parse_args():
    ap = argparse.ArgumentParser()
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--variant", choices=["fused", "plain"], default="fused")
    ap.add_argument("--no-malloc-tuning", action="store_true")
    return ap.parse_args()


# glibc returns freed large blocks to the kernel (munmap / heap trim); on a VM with free-page reporting
# every training step then re-faults ~10k pages (measured: 32-41k minor faults per 4 steps of the 10M
# model, 0 with these settings). ORT keeps its memory in an arena, so for a fair baseline torch keeps
# its heap too: the server re-executes itself once with these variables unless they are set already.
# glibc cannot keep blocks over 32 MB (its largest mmap threshold): each is mmap'd on allocation and
# unmapped on free, and PyTorch's CPU allocator caches nothing. At Qwen2.5-0.5B's vocabulary a PPO
# step allocates ~16 fresh [4,128,151936] tensors (311 MB each) and faulted ~1.2M 4 KiB pages per step;
# on these VMs a fault cost ~20 us of CPU (a fresh 311 MB fill_ 1.4-1.8 s against 15 ms into a reused
# tensor; docs/performance.md, "Per-kernel profiles, both sides"), most of the step. glibc.malloc.hugetlb=1
# (glibc >= 2.35; ignored before) madvises those blocks for transparent huge pages, so they fault 2 MiB
# at a time: the same fill_ took 35 ms. The OS's THP mode must be "madvise" or "always".
MALLOC_TUNING = {
    "MALLOC_MMAP_THRESHOLD_": str(32 * 1024 * 1024),
    "MALLOC_TRIM_THRESHOLD_": str(64 * 1024 ** 3),
    "MALLOC_TOP_PAD_": str(256 * 1024 * 1024),
    "GLIBC_TUNABLES": "glibc.malloc.hugetlb=1",
}

ARGS = _parse_args() if __name__ == "__main__" else argparse.Namespace(threads=2, variant="fused", no_malloc_tuning=True)
if __name__ == "__main__" and not ARGS.no_malloc_tuning and any(k not in os.environ for k in MALLOC_TUNING):
    os.execve(sys.executable, [sys.executable, os.path.abspath(__file__)] + sys.argv[1:], {**MALLOC_TUNING, **os.environ})
os.environ.setdefault("OMP_NUM_THREADS", str(ARGS.threads))

import numpy as np  # noqa: E402
import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

import torch_model as tm  # noqa: E402
from blas_probe import blas_libraries, openblas_corename  # noqa: E402 (this script's folder is on sys.path)

torch.set_num_threads(ARGS.threads)


# ----------------------------------------------------------------------------------------------
# fused-weight model (same math as tm.forward; q|k|v and gate|up concatenated)


def fuse_params(params, cfg):
    V, C, L, H, Hkv, D, Fi = tm.dims(cfg)
    out = {"embed.weight": params["embed.weight"], "norm.weight": params["norm.weight"]}
    if not cfg["tieEmbeddings"]:
        out["lm_head.weight"] = params["lm_head.weight"]
    for i in range(L):
        p = f"layers.{i}"
        out[f"{p}.attn_norm.weight"] = params[f"{p}.attn_norm.weight"]
        out[f"{p}.mlp_norm.weight"] = params[f"{p}.mlp_norm.weight"]
        out[f"{p}.qkv.weight"] = torch.cat([params[f"{p}.attn.{x}.weight"] for x in "qkv"], 0).contiguous()
        if cfg["attentionBias"]:
            out[f"{p}.qkv.bias"] = torch.cat([params[f"{p}.attn.{x}.bias"] for x in "qkv"], 0).contiguous()
        out[f"{p}.o.weight"] = params[f"{p}.attn.o.weight"]
        out[f"{p}.gateup.weight"] = torch.cat([params[f"{p}.mlp.gate.weight"], params[f"{p}.mlp.up.weight"]], 0).contiguous()
        out[f"{p}.down.weight"] = params[f"{p}.mlp.down.weight"]
    return out


def fused_forward(fp, cfg, input_ids, rope, cache=None, cat_cache=None, mulsum=False, last_only=False):
    """Logits for input_ids [B,t] at positions past..past+t-1 (no padding). cache: tm.KVCache (preallocated),
    cat_cache: dict {"k": [..], "v": [..], "length": n} grown with torch.cat. Neither: full causal forward.
    mulsum: for single-token steps, attention as broadcast multiply + sum instead of batched matmul
    (torch 1.13's CPU bmm loops over B*Hkv tiny GEMVs; multiply+sum was ~2x faster for decode)."""
    V, C, L, H, Hkv, D, Fi = tm.dims(cfg)
    G = H // Hkv
    eps = cfg["rmsNormEps"]
    B, t = input_ids.shape
    past = cache.length if cache is not None else (cat_cache["length"] if cat_cache is not None else 0)
    S = past + t
    cos = rope[0][None, past:S, None]
    sin = rope[1][None, past:S, None]
    bias = None
    if t > 1:
        bias = torch.full((t, S), tm.MASK_NEG, dtype=fp["embed.weight"].dtype).triu_(past + 1)
    scale = 1.0 / math.sqrt(D)
    x = F.embedding(input_ids, fp["embed.weight"])
    nq, nk = H * D, Hkv * D
    for i in range(L):
        p = f"layers.{i}"
        h = tm.rmsnorm(x, fp[f"{p}.attn_norm.weight"], eps)
        qkv = F.linear(h, fp[f"{p}.qkv.weight"], fp.get(f"{p}.qkv.bias"))
        q, k, v = qkv.split([nq, nk, nk], dim=-1)
        q = tm.apply_rope(q.view(B, t, H, D), cos, sin)
        k = tm.apply_rope(k.view(B, t, Hkv, D), cos, sin).transpose(1, 2)
        v = v.reshape(B, t, Hkv, D).transpose(1, 2)
        if cache is not None:
            cache.k[i][:, :, past:S] = k
            cache.v[i][:, :, past:S] = v
            k = cache.k[i][:, :, :S]
            v = cache.v[i][:, :, :S]
        elif cat_cache is not None:
            if past:
                k = torch.cat([cat_cache["k"][i], k], 2)
                v = torch.cat([cat_cache["v"][i], v], 2)
            cat_cache["k"][i] = k
            cat_cache["v"][i] = v
        if mulsum and t == 1:
            qg = (q * scale).view(B, Hkv, G, 1, D)
            probs = torch.softmax((qg * k[:, :, None]).sum(-1), -1)  # [B,Hkv,G,S]
            a = (probs[..., None] * v[:, :, None]).sum(-2).view(B, 1, H * D)
        else:
            qg = (q * scale).transpose(1, 2).reshape(B, Hkv, G * t, D)
            scores = torch.matmul(qg, k.transpose(-1, -2))
            if bias is not None:
                scores = (scores.view(B, Hkv, G, t, S) + bias).view(B, Hkv, G * t, S)
            a = torch.matmul(torch.softmax(scores, -1), v)
            a = a.view(B, H, t, D).transpose(1, 2).reshape(B, t, H * D)
        x = x + F.linear(a, fp[f"{p}.o.weight"])
        h2 = tm.rmsnorm(x, fp[f"{p}.mlp_norm.weight"], eps)
        gu = F.linear(h2, fp[f"{p}.gateup.weight"])
        g, u = gu.split([Fi, Fi], dim=-1)
        x = x + F.linear(F.silu(g) * u, fp[f"{p}.down.weight"])
    if cache is not None:
        cache.length = S
    if cat_cache is not None:
        cat_cache["length"] = S
    if last_only:
        # Sampling reads the last position only; at a 151936-token vocabulary the head over every
        # prompt position would cost more than the prompt's whole transformer stack.
        x = x[:, -1:]
    x = tm.rmsnorm(x, fp["norm.weight"], eps)
    return F.linear(x, fp["embed.weight"] if cfg["tieEmbeddings"] else fp["lm_head.weight"])


# ----------------------------------------------------------------------------------------------
# server state


class State:
    def __init__(self):
        self.cfg = None
        self.params = None  # float32 base params (plain names)
        self.lora = None  # {name: tensor} or None
        self.lora_scale = 0.0
        self.variant = ARGS.variant
        self.rope = None


S = State()


def _median(xs):
    return float(np.median(np.asarray(xs))) if xs else None


def cmd_info(c):
    blas = blas_libraries()
    return {
        "torch": torch.__version__, "python": platform.python_version(), "numpy": np.__version__,
        "threads": torch.get_num_threads(), "interopThreads": torch.get_num_interop_threads(),
        "blasLibrary": blas, "blasCore": openblas_corename(blas), "coretypeEnv": os.environ.get("OPENBLAS_CORETYPE"),
        "config": torch.__config__.show(), "cpuCount": os.cpu_count(),
        "variant": S.variant, "ompNumThreads": os.environ.get("OMP_NUM_THREADS"),
        "mallocTuning": {k: os.environ.get(k) for k in MALLOC_TUNING},
    }


def cmd_threads(c):
    n = int(c["n"])
    if n < 1:
        raise ValueError("threads: n must be >= 1")
    torch.set_num_threads(n)
    return {"threads": torch.get_num_threads()}


def cmd_load(c):
    if "modelConfig" not in c:
        raise ValueError("load: modelConfig is required")
    cfg = tm.normalize_config(c["modelConfig"])
    tensors = {}
    if c.get("weights"):
        params = tm.load_params(c["weights"], cfg, torch.float32)
        tensors, _ = tm.read_safetensors(c["weights"])
    elif "seed" in c:
        g = torch.Generator().manual_seed(int(c["seed"]))
        params = tm.init_params(cfg, g, std=0.02, norm_std=0.0, dtype=torch.float32)
    else:
        raise ValueError('load: give "weights" (a safetensors path) or "seed"')
    lora = None
    lora_scale = 0.0
    if c.get("lora"):
        lc = c["lora"]
        r = int(lc["rank"])
        targets = lc.get("targets", list(tm.LORA_TARGETS))
        bad = [t for t in targets if t not in tm.LORA_TARGETS]
        if bad:
            raise ValueError(f"load: unknown lora targets {bad}")
        g = torch.Generator().manual_seed(int(c.get("seed", 0)) + 1)
        lora = {}
        for name, shape in tm.lora_shapes(cfg, r, targets):
            for key in (name, "param." + name):
                if key in tensors:
                    if list(tensors[key].shape) != list(shape):
                        raise ValueError(f"load: {key} has shape {list(tensors[key].shape)}, lora needs {shape}")
                    lora[name] = tensors[key].to(torch.float32).clone()
                    break
            else:
                lora[name] = (0.02 * torch.randn(shape, generator=g)) if name.endswith("lora_A") else torch.zeros(shape)
        lora_scale = float(lc.get("alpha", 2 * r)) / r
    S.cfg, S.params, S.lora, S.lora_scale = cfg, params, lora, lora_scale
    if c.get("variant"):
        if c["variant"] not in ("fused", "plain"):
            raise ValueError("load: variant must be fused or plain")
        S.variant = c["variant"]
    S.rope = tm.rope_table(cfg, max(cfg["maxSequenceLength"], 4096), torch.float32)
    n_base = sum(p.numel() for p in params.values())
    n_train = sum(p.numel() for p in lora.values()) if lora else n_base
    return {"ok": True, "params": n_base, "trainable": n_train, "config": cfg, "variant": S.variant}


def _need_model():
    if S.cfg is None:
        raise ValueError("no model loaded: send load first")


def _rope_for(n):
    if S.rope[0].shape[0] < n:
        S.rope = tm.rope_table(S.cfg, n, torch.float32)
    return S.rope


def _make_forward(params, lora):
    """Returns f(input_ids [B,T]) -> logits for a full causal forward without padding, and the leaf
    tensors that training updates."""
    cfg = S.cfg
    if lora is not None:
        # LoRA: the plain forward (adapters are per named projection); base weights frozen
        def f(ids):
            return tm.forward(params, cfg, ids, None, None, lora, S.lora_scale, None, _rope_for(ids.shape[1]))
        return f, list(lora.values())
    if S.variant == "fused":
        fp = fuse_params(params, cfg)

        def f(ids):
            return fused_forward(fp, cfg, ids, _rope_for(ids.shape[1]))
        return f, list(fp.values())

    def f(ids):
        return tm.forward(params, cfg, ids, None, None, None, 0.0, None, _rope_for(ids.shape[1]))
    return f, list(params.values())


def _batch(c):
    B, T = int(c["batch"]), int(c["seqLen"])
    if B < 1 or T < 1:
        raise ValueError("batch and seqLen must be >= 1")
    g = torch.Generator().manual_seed(int(c.get("seed", 0)))
    V = S.cfg["vocabSize"]
    ids = torch.randint(0, V, (B, T), generator=g)
    targets = torch.randint(0, V, (B, T), generator=g)
    adv = torch.randn(B, T, generator=g)
    return B, T, ids, targets, adv


def _loss(kind, logits, targets, mask, adv, old, ref, tw):
    if kind == "ppo":
        return tm.ppo_loss(logits, targets, mask, adv, old, ref, temperature=1.0, clip_eps=0.2, kl_coef=0.05,
                           ent_coef=0.01, token_weight=tw)["loss"]
    if kind == "ce":
        return tm.ce_loss(logits, targets, mask, token_weight=tw)["loss"]
    raise ValueError(f"unknown loss {kind!r} (ppo or ce)")


def _profiled(fn, steps, top):
    """Runs fn() (`steps` steps of work) under torch.profiler (CPU events, input shapes); returns the
    PROFILES summary per step, `top` rows each."""
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CPU], record_shapes=True) as prof:
        # Timed inside the profiler: leaving it parses every event, seconds that are no op's.
        t0 = time.perf_counter()
        fn()
        wall = (time.perf_counter() - t0) * 1e3
    by_op = prof.key_averages()
    total = sum(e.self_cpu_time_total for e in by_op) / 1e3

    def rows(events, shapes):
        out = []
        for e in sorted(events, key=lambda e: e.self_cpu_time_total, reverse=True)[:top]:
            r = {"op": e.key, "selfMs": e.self_cpu_time_total / 1e3 / steps, "count": e.count / steps,
                 "share": (e.self_cpu_time_total / 1e3 / total) if total > 0 else 0.0}
            if shapes:
                r["inputShapes"] = [list(x) for x in e.input_shapes]
            out.append(r)
        return out

    return {"steps": steps, "wallMs": wall / steps, "selfMs": total / steps,
                   "ops": rows(by_op, False), "shapes": rows(prof.key_averages(group_by_input_shape=True), True)}


def cmd_train_step(c):
    _need_model()
    B, T, ids, targets, adv = _batch(c)
    kind = c.get("loss", "ppo")
    steps, warmup = int(c.get("steps", 10)), int(c.get("warmup", 3))
    # With LoRA the base is frozen (never written), so it is not copied: a copy would double the
    # resident weights of a 0.5B model and inflate the peak RSS the benchmark reports.
    params = S.params if S.lora else {k: v.clone() for k, v in S.params.items()}
    lora = {k: v.clone() for k, v in S.lora.items()} if S.lora else None
    f, leaves = _make_forward(params, lora)
    for p in leaves:
        p.requires_grad_(True)
    mask = torch.ones(B, T)
    tw = 1.0 / (B * T)
    with torch.no_grad():
        old, _ = tm.token_logp(f(ids), targets, 1.0)
    ref = old.clone()
    opt = torch.optim.AdamW(leaves, lr=1e-4, weight_decay=0.01, foreach=True)

    def step():
        opt.zero_grad(set_to_none=True)
        loss = _loss(kind, f(ids), targets, mask, adv, old, ref, tw)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(leaves, 1.0)
        opt.step()
        return loss

    ms, losses = [], []
    for s in range(warmup + steps):
        t0 = time.perf_counter()
        loss = step()
        dt = (time.perf_counter() - t0) * 1e3
        losses.append(float(loss))
        if s >= warmup:
            ms.append(round(dt, 3))
    out = {"ms": ms, "medianMs": _median(ms), "loss": [losses[0], losses[-1]], "batch": B, "seqLen": T,
           "variant": "lora" if lora else S.variant}
    if c.get("profile"):
        out["profile"] = _profiled(step, 1, int(c["profile"]))
    return out


def cmd_forward(c):
    _need_model()
    B, T, ids, targets, adv = _batch(c)
    kind = c.get("loss", "ppo")
    steps, warmup = int(c.get("steps", 10)), int(c.get("warmup", 3))
    f, _ = _make_forward(S.params, S.lora)
    mask = torch.ones(B, T)
    ms = []
    with torch.no_grad():
        old, _ = tm.token_logp(f(ids), targets, 1.0)
        for s in range(warmup + steps):
            t0 = time.perf_counter()
            _loss(kind, f(ids), targets, mask, adv, old, old, 1.0 / (B * T))
            dt = (time.perf_counter() - t0) * 1e3
            if s >= warmup:
                ms.append(round(dt, 3))
    return {"ms": ms, "medianMs": _median(ms)}


def sample(logits, temperature, top_p, sampler, gen):
    """logits [B,V] -> token ids [B] (int64)."""
    if temperature <= 0:
        return logits.argmax(-1)
    probs = torch.softmax(logits / temperature if temperature != 1.0 else logits, -1)
    if top_p < 1.0:
        sp, si = probs.sort(-1, descending=True)
        cum = sp.cumsum(-1)
        sp.masked_fill_(cum - sp >= top_p, 0.0)  # keep the smallest prefix whose mass reaches top_p
        probs = torch.zeros_like(probs).scatter_(-1, si, sp)
    if sampler == "exponential":
        q = torch.empty_like(probs).exponential_(generator=gen)
        return (probs / q).argmax(-1)
    return torch.multinomial(probs, 1, generator=gen).squeeze(-1)


def cmd_decode(c):
    _need_model()
    if S.lora:
        raise ValueError("decode: benchmark decoding with the base weights (load without lora)")
    cfg = S.cfg
    B = int(c.get("batch", 64))
    P = int(c.get("promptLen", 16))
    N = int(c.get("newTokens", 64))
    if B < 1 or P < 1 or N < 1:
        raise ValueError("decode: batch, promptLen and newTokens must be >= 1")
    temperature = float(c.get("temperature", 1.0))
    top_p = float(c.get("topP", 1.0))
    steps, warmup = int(c.get("steps", 5)), int(c.get("warmup", 2))
    cache_kind = c.get("cache", "prealloc")
    sampler = c.get("sampler", "multinomial")
    attention = c.get("attention", "mulsum")
    if cache_kind not in ("prealloc", "cat") or sampler not in ("multinomial", "exponential") \
            or attention not in ("mulsum", "matmul"):
        raise ValueError("decode: cache is prealloc|cat, sampler is multinomial|exponential, attention is mulsum|matmul")
    mulsum = attention == "mulsum"
    g = torch.Generator().manual_seed(int(c.get("seed", 0)))
    prompt = torch.randint(0, cfg["vocabSize"], (B, P), generator=g)
    rope = _rope_for(P + N)
    fused = S.variant == "fused"
    fp = fuse_params(S.params, cfg) if fused else None
    cache = tm.KVCache(cfg, B, P + N, torch.float32) if cache_kind == "prealloc" else None

    def prefill():
        """Resets the cache and samples each row's first token from the prompt."""
        cc = None
        if cache is not None:
            cache.length = 0
        else:
            cc = {"k": [None] * cfg["numLayers"], "v": [None] * cfg["numLayers"], "length": 0}
        if fused:
            logits = fused_forward(fp, cfg, prompt, rope, cache, cc, last_only=True)
        else:
            if cc is not None:
                raise ValueError('decode: cache "cat" needs the fused variant')
            logits = tm.forward(S.params, cfg, prompt, None, None, None, 0.0, cache, rope)
        return sample(logits[:, -1], temperature, top_p, sampler, g), cc

    def steps_after(tok, cc):
        """The N-1 single-token steps, each sampling one more token per row."""
        for _ in range(N - 1):
            ids = tok[:, None]
            if fused:
                logits = fused_forward(fp, cfg, ids, rope, cache, cc, mulsum)
            else:
                logits = tm.forward(S.params, cfg, ids, None, None, None, 0.0, cache, rope)
            tok = sample(logits[:, -1], temperature, top_p, sampler, g)

    ms, pre = [], []
    out = {}
    with torch.inference_mode():
        for s in range(warmup + steps):
            t0 = time.perf_counter()
            tok, cc = prefill()
            t1 = time.perf_counter()
            steps_after(tok, cc)
            t2 = time.perf_counter()
            if s >= warmup:
                ms.append(round((t2 - t0) * 1e3, 3))
                pre.append(round((t1 - t0) * 1e3, 3))
        if c.get("profile") and N > 1:
            tok, cc = prefill()
            out["profile"] = _profiled(lambda: steps_after(tok, cc), N - 1, int(c["profile"]))
    med = _median(ms)
    return {"ms": ms, "prefillMs": pre, "tokens": B * N, "tokPerSec": B * N / (med / 1e3), "cache": cache_kind,
            "sampler": sampler, "attention": attention if fused else "matmul", "variant": S.variant, **out}


def cmd_matmul_peak(c):
    n = int(c.get("n", 512))
    reps = int(c.get("reps", 50))
    a = torch.randn(n, n)
    b = torch.randn(n, n)
    out = torch.empty(n, n)
    for _ in range(3):
        torch.mm(a, b, out=out)
    t0 = time.perf_counter()
    for _ in range(reps):
        torch.mm(a, b, out=out)
    dt = time.perf_counter() - t0
    return {"gflops": 2.0 * n ** 3 * reps / dt / 1e9, "n": n, "reps": reps, "ms": dt * 1e3}


COMMANDS = {
    "info": cmd_info, "threads": cmd_threads, "load": cmd_load, "trainStep": cmd_train_step,
    "forward": cmd_forward, "decode": cmd_decode, "matmulPeak": cmd_matmul_peak,
}


def main():
    out = sys.stdout
    for line in sys.stdin:
        line = line.strip()
        if not line:
            continue
        reply = {}
        try:
            c = json.loads(line)
            if not isinstance(c, dict):
                raise ValueError("command must be a JSON object")
            if "id" in c:
                reply["id"] = c["id"]
            name = c.get("cmd")
            if name == "quit":
                reply["ok"] = True
                out.write(json.dumps(reply) + "\n")
                out.flush()
                return
            if name not in COMMANDS:
                raise ValueError(f"unknown cmd {name!r}; known: {sorted(COMMANDS) + ['quit']}")
            ru0, w0 = resource.getrusage(resource.RUSAGE_SELF), time.perf_counter()
            reply.update(COMMANDS[name](c))
            ru1, w1 = resource.getrusage(resource.RUSAGE_SELF), time.perf_counter()
            # contention diagnostics: cpuSec well below wallSec * threads means other processes ran
            reply["wallSec"] = round(w1 - w0, 4)
            reply["cpuSec"] = round(ru1.ru_utime + ru1.ru_stime - ru0.ru_utime - ru0.ru_stime, 4)
            reply["pageFaults"] = ru1.ru_minflt - ru0.ru_minflt
            reply["maxRssMB"] = round(ru1.ru_maxrss / 1024, 1)  # the process's peak so far (Linux: KiB)
        except Exception as e:  # noqa: BLE001 - every error goes back to the caller
            reply["error"] = f"{type(e).__name__}: {e}"
            traceback.print_exc(file=sys.stderr)
        out.write(json.dumps(reply) + "\n")
        out.flush()


if __name__ == "__main__":
    main()
