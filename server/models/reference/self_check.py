"""Self-checks of the PyTorch reference (torch_model.py) and of the fixture files.

Run: /usr/bin/python3 server/models/reference/self_check.py   (after make_fixtures.py and make_hf_fixtures.py)
The hf-* cases read their base weights from the Hugging Face folder the fixture names (F32 variant).
  1. Fixture round trip: reading each fixture and recomputing in float64 reproduces expect.* and grad.*
     (differences are float32 storage rounding only).
  2. Autograd vs central finite differences in float64 (h = 1e-6) for 8 entries of each fixture's
     trainable tensors (spread over tensors).
  3. Left padding: each padded row, run alone without its padding (positions 0..n-1, no mask), gives
     the same logits at its real positions as the padded batch (float64 and float32).
  4. KV cache: prefill + one token at a time through the preallocated KVCache (with the left-padding
     mask, the precomputed rope table) equals the full forward at real positions.
  5. An independent, deliberately naive forward (loops over batch, heads and query positions, written
     straight from the spec in torch_model.py's header) equals tm.forward at all positions (float64).
Exits non-zero if a check exceeds its bound.
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

FIX = os.path.normpath(os.path.join(HERE, "..", "fixtures"))
CASES = ["tiny-full-ppo", "tiny-lora-ppo", "tiny-full-ce", "hf-qwen2", "hf-qwen3", "hf-llama"]


def load_case(name, dtype=torch.float64):
    t, meta = tm.read_safetensors(os.path.join(FIX, name + ".safetensors"))
    m = json.loads(meta["case"])
    cfg = m["modelConfig"]
    if "folders" in m:
        import make_hf_fixtures as mh  # noqa: E402
        base = mh.read_folder(os.path.join(FIX, m["folders"][0]), cfg)
        params = {n: base[n].to(dtype) for n, _ in tm.parameter_shapes(cfg)}
    else:
        params = {n: t["param." + n].to(dtype) for n, _ in tm.parameter_shapes(cfg)}
    lora = None
    if m["lora"]:
        lora = {n: t["param." + n].to(dtype) for n, _ in tm.lora_shapes(cfg, m["lora"]["rank"], m["lora"]["targets"])}
    inp = {k[len("input."):]: v for k, v in t.items() if k.startswith("input.")}
    for k in m["integerInputsAsF32"]:
        inp[k] = inp[k].to(torch.int64)
    for k in list(inp):
        if inp[k].is_floating_point():
            inp[k] = inp[k].to(dtype)
    return t, m, cfg, params, lora, inp


def loss_fn(m, cfg, params, lora, inp):
    scale = m["lora"]["scale"] if m["lora"] else 0.0
    logits = tm.forward(params, cfg, inp["input_ids"], inp["position_ids"], inp["attention_mask"], lora, scale)
    s = m["scalars"]
    if m["loss"] == "ppo":
        res = tm.ppo_loss(logits, inp["targets"], inp["loss_mask"], inp["advantages"], inp["old_logp"], inp["ref_logp"],
                          temperature=s["temperature"], clip_eps=s["clipEps"], kl_coef=s["klCoef"],
                          ent_coef=s["entCoef"], token_weight=s["tokenWeight"])
    else:
        res = tm.ce_loss(logits, inp["targets"], inp["loss_mask"], token_weight=s["tokenWeight"])
    res["logits"] = logits
    return res


def naive_forward(params, cfg, ids, pos, mask, lora=None, scale=0.0):
    """Straight from the spec: loops instead of the grouped/batched layout of tm.forward."""
    V, C, L, H, Hkv, D, Fi = tm.dims(cfg)
    eps, theta = cfg["rmsNormEps"], cfg["ropeTheta"]
    scaling = cfg.get("ropeScaling")
    Bn, Tn = ids.shape

    def inv_freq(j):  # Llama 3's rule, per frequency, from the spec in torch_model.py's header
        f = 1.0 / theta ** (2.0 * j / D)
        if not scaling:
            return f
        orig, low, high, factor = (scaling["originalMaxPositionEmbeddings"], scaling["lowFreqFactor"],
                                   scaling["highFreqFactor"], scaling["factor"])
        wavelen = 2 * 3.141592653589793 / f
        if wavelen < orig / high:
            return f
        if wavelen > orig / low:
            return f / factor
        s = (orig / wavelen - low) / (high - low)
        return (1 - s) * f / factor + s * f

    def lin(x, p, bias):
        y = x @ params[p + ".weight"].T
        if bias:
            y = y + params[p + ".bias"]
        if lora is not None and p + ".lora_A" in lora:
            y = y + scale * ((x @ lora[p + ".lora_A"].T) @ lora[p + ".lora_B"].T)
        return y

    def norm(x, w):
        return x / torch.sqrt((x * x).mean(-1, keepdim=True) + eps) * w

    def rope(vec, position):  # vec [D]
        out = torch.empty_like(vec)
        for d in range(D):
            j = d % (D // 2)
            ang = position * inv_freq(j)
            rot = -vec[d + D // 2] if d < D // 2 else vec[d - D // 2]
            out[d] = vec[d] * torch.cos(torch.tensor(ang, dtype=vec.dtype)) + rot * torch.sin(torch.tensor(ang, dtype=vec.dtype))
        return out

    x = params["embed.weight"][ids]
    for i in range(L):
        p = f"layers.{i}"
        h = norm(x, params[f"{p}.attn_norm.weight"])
        q = lin(h, f"{p}.attn.q", cfg["attentionBias"]).view(Bn, Tn, H, D)
        k = lin(h, f"{p}.attn.k", cfg["attentionBias"]).view(Bn, Tn, Hkv, D)
        v = lin(h, f"{p}.attn.v", cfg["attentionBias"]).view(Bn, Tn, Hkv, D)
        if cfg.get("qkNorm"):
            q = norm(q, params[f"{p}.attn.q_norm.weight"])
            k = norm(k, params[f"{p}.attn.k_norm.weight"])
        attn = torch.zeros(Bn, Tn, H * D, dtype=x.dtype)
        for b in range(Bn):
            qr = [[rope(q[b, t, hh], float(pos[b, t])) for hh in range(H)] for t in range(Tn)]
            kr = [[rope(k[b, t, hh], float(pos[b, t])) for hh in range(Hkv)] for t in range(Tn)]
            for hh in range(H):
                kv = hh // (H // Hkv)
                for ti in range(Tn):
                    sc = torch.stack([torch.dot(qr[ti][hh], kr[tj][kv]) / D ** 0.5
                                      + (0.0 if (tj <= ti and mask[b, tj] == 1) else -1e9) for tj in range(Tn)])
                    w = torch.softmax(sc, 0)
                    attn[b, ti, hh * D:(hh + 1) * D] = sum(w[tj] * v[b, tj, kv] for tj in range(Tn))
        x = x + lin(attn, f"{p}.attn.o", False)
        h2 = norm(x, params[f"{p}.mlp_norm.weight"])
        g = lin(h2, f"{p}.mlp.gate", False)
        x = x + lin(g * torch.sigmoid(g) * lin(h2, f"{p}.mlp.up", False), f"{p}.mlp.down", False)
    head = params["embed.weight"] if cfg["tieEmbeddings"] else params["lm_head.weight"]
    return norm(x, params["norm.weight"]) @ head.T


def main():
    torch.set_num_threads(1)
    failures = []
    report = {}
    for name in CASES:
        t, m, cfg, params, lora, inp = load_case(name)
        src = lora if lora is not None else params
        for n in m["trainable"]:
            src[n].requires_grad_(True)
        res = loss_fn(m, cfg, params, lora, inp)
        grads = dict(zip(m["trainable"], torch.autograd.grad(res["loss"], [src[n] for n in m["trainable"]])))
        real = inp["attention_mask"].bool()

        # 1. round trip
        rt = {}
        for k in ("loss", "clip_frac", "approx_kl", "entropy"):
            if "expect." + k in t:
                rt[k] = abs(float(res[k]) - float(t["expect." + k])) / max(abs(float(res[k])), 1e-30)
        rt["logits"] = float((res["logits"].detach() - t["expect.logits"].double())[real].abs().max())
        rt["gradMaxRel"] = max(float((grads[n] - t["grad." + n].double()).abs().max() / grads[n].abs().max())
                               for n in m["trainable"])
        # 2. finite differences
        gen = torch.Generator().manual_seed(7)
        names = m["trainable"]
        picks = [names[int(i)] for i in torch.linspace(0, len(names) - 1, 8).round().long()]
        h = 1e-6
        fd_rel, fd_abs = 0.0, 0.0
        gmax = max(float(g.abs().max()) for g in grads.values())
        with torch.no_grad():
            for n in picks:
                x = src[n]
                idx = int(torch.randint(0, x.numel(), (1,), generator=gen))
                flat = x.view(-1)
                old = float(flat[idx])
                flat[idx] = old + h
                lp = float(loss_fn(m, cfg, params, lora, inp)["loss"])
                flat[idx] = old - h
                lm = float(loss_fn(m, cfg, params, lora, inp)["loss"])
                flat[idx] = old
                fd = (lp - lm) / (2 * h)
                ag = float(grads[n].view(-1)[idx])
                fd_abs = max(fd_abs, abs(fd - ag))
                fd_rel = max(fd_rel, abs(fd - ag) / max(abs(ag), 1e-3 * gmax))
        # 3. left padding == unpadded row alone; 4. KV cache == full forward
        pad_err = {}
        cache_err = {}
        scale = m["lora"]["scale"] if m["lora"] else 0.0
        for dtype in (torch.float64, torch.float32):
            P = {k: v.detach().to(dtype) for k, v in params.items()}
            Lr = {k: v.detach().to(dtype) for k, v in lora.items()} if lora else None
            am = inp["attention_mask"].to(dtype)
            with torch.no_grad():
                full = tm.forward(P, cfg, inp["input_ids"], inp["position_ids"], am, Lr, scale)
                e = 0.0
                for b in range(am.shape[0]):
                    pad = int((am[b] == 0).sum())
                    if pad == 0:
                        continue
                    alone = tm.forward(P, cfg, inp["input_ids"][b:b + 1, pad:], inp["position_ids"][b:b + 1, pad:], None, Lr, scale)
                    e = max(e, float((alone[0] - full[b, pad:]).abs().max()))
                pad_err[str(dtype).replace("torch.", "")] = e
                Bn, Tn = inp["input_ids"].shape
                cache = tm.KVCache(cfg, Bn, Tn, dtype)
                rt_ = tm.rope_table(cfg, int(inp["position_ids"].max()) + 1, dtype)  # the cached path also exercises the precomputed rope table
                P0 = 3
                outs = [tm.forward(P, cfg, inp["input_ids"][:, :P0], inp["position_ids"][:, :P0], am[:, :P0], Lr, scale, cache, rt_)]
                for j in range(P0, Tn):
                    outs.append(tm.forward(P, cfg, inp["input_ids"][:, j:j + 1], inp["position_ids"][:, j:j + 1],
                                           am[:, :j + 1], Lr, scale, cache, rt_))
                inc = torch.cat(outs, 1)
                cache_err[str(dtype).replace("torch.", "")] = float((inc - full)[real].abs().max())
                assert torch.isfinite(full).all(), "non-finite logits (fully masked rows?)"
        with torch.no_grad():
            P = {k: v.detach() for k, v in params.items()}
            Lr = {k: v.detach() for k, v in lora.items()} if lora else None
            nv = naive_forward(P, cfg, inp["input_ids"], inp["position_ids"], inp["attention_mask"], Lr, scale)
            naive_err = float((nv - res["logits"].detach()).abs().max())
        report[name] = {"naiveVsForward": naive_err, "roundTrip": rt, "fdMaxRel": fd_rel, "fdMaxAbs": fd_abs, "fdEntries": len(picks),
                        "paddedVsUnpadded": pad_err, "kvCacheVsFull": cache_err}
        if naive_err > 1e-12:
            failures.append(f"{name}: naive forward differs by {naive_err}")
        if fd_rel > 1e-6:
            failures.append(f"{name}: finite differences rel err {fd_rel}")
        if pad_err["float64"] > 1e-12 or pad_err["float32"] > 1e-5:
            failures.append(f"{name}: padded vs unpadded {pad_err}")
        if cache_err["float64"] > 1e-12 or cache_err["float32"] > 1e-5:
            failures.append(f"{name}: kv cache vs full {cache_err}")
        if rt["gradMaxRel"] > 1e-6 or rt["logits"] > 1e-5:
            failures.append(f"{name}: fixture round trip {rt}")
    print(json.dumps(report, indent=1))
    if failures:
        print("FAILED:\n  " + "\n  ".join(failures))
        sys.exit(1)
    print("all self-checks passed")


if __name__ == "__main__":
    main()
