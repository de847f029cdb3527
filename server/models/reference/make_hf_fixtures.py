"""Tiny random Hugging Face checkpoints (Qwen2, Qwen3, Llama 3 with llama3 RoPE scaling, GPT-2) and the
PyTorch numbers the TypeScript loader and graphs must reproduce on them.

README
  Regenerate (deterministic; Debian python3-torch 1.13 + python3-numpy, no PyPI, no transformers):
      /usr/bin/python3 server/models/reference/make_hf_fixtures.py
  Writes, under server/models/fixtures/:
    hf/<case>-<variant>/config.json            a transformers-style config.json (model_type, …)
    hf/<case>-<variant>/model.safetensors      HF tensor names (model.layers.0.self_attn.q_proj.weight …)
      or model.safetensors.index.json + model-0000k-of-00002.safetensors (the sharded variant)
    hf-<case>.safetensors                      inputs, LoRA tensors, expected logits/logp/loss and
                                               LoRA gradients (the make_fixtures.py layout: input.*,
                                               param.<lora name>, expect.*, grad.*; __metadata__ "case")
  Every variant of a case holds the SAME values: weights are drawn, rounded to bfloat16, and values
  below float16's normal range set to 0, so F32, BF16 and F16 files store them exactly. The
  TypeScript tests load each folder and compare bit for bit with the F32 one, then run the model.

  Independence: this script reads its own files back with torch_model.read_safetensors, maps HF
  names and config.json fields to the reference model with its own tables (HF_TO_OURS,
  config_from_hf), and computes everything in float64 with torch_model.forward. The TypeScript side
  has its own reader, name map and config conversion (server/models/hf-*.ts).

  Cases (V=48, C=16, L=2; B=3, T=7 with left padding as in make_fixtures.py; LoRA rank 2 alpha 4 on
  all seven projections with nonzero lora_B; the PPO loss of tiny-lora-ppo):
    qwen2  heads 4, kv 2 (D=4), q/k/v biases, tied embeddings, rope_theta 1e6.  Variants f32, bf16, f16.
    qwen3  heads 4, kv 2, head_dim 8 != hidden/heads, q_norm/k_norm, untied lm_head.  Variants f32,
           bf16-sharded (two shards with an index).
    llama  heads 2, kv 1, head_dim 8, tied (Llama 3.2 style), rms_norm_eps 1e-5, rope_scaling
           llama3 (factor 8, low 1, high 8, original 256) with D/2 = 4 frequencies in all three bands
           (kept, interpolated, divided); positions start at 40 so the scaled low frequencies move
           the logits.  Variants f32, bf16.
    gpt2   (run_gpt2_case) GPT2LMHeadModel layout: transformer.h.{i}.attn.c_attn [C, 3C] and every
           projection a Conv1D [in, out], LayerNorm with bias, learned wpe (n_positions 64), tied
           head, gelu_new; heads 4 (D=4), n_inner None (= 4·C = 64). The reference forward
           (torch_model.gpt2_forward) runs on those tensors as transformers does, so the loader's
           split and transpose are what is checked. LoRA on q, k, v, o, up, down. The f32 variant
           also carries the old attn.bias / attn.masked_bias buffers. Variants f32, bf16.
  Regenerate one case: make_hf_fixtures.py gpt2
"""
from __future__ import annotations

import json
import os
import re
import struct
import sys

sys.dont_write_bytecode = True

import numpy as np
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import torch_model as tm  # noqa: E402
import make_fixtures as mf  # noqa: E402

FIXTURES = os.path.normpath(os.path.join(HERE, "..", "fixtures"))
HF_DIR = os.path.join(FIXTURES, "hf")

COMMON = {"vocab_size": 48, "hidden_size": 16, "num_hidden_layers": 2, "intermediate_size": 32, "hidden_act": "silu"}

CASES = [
    {
        "name": "qwen2", "seed": 5005, "posOffset": 0, "variants": ["f32", "bf16", "f16"],
        "hf": {**COMMON, "architectures": ["Qwen2ForCausalLM"], "model_type": "qwen2", "num_attention_heads": 4,
               "num_key_value_heads": 2, "rope_theta": 1000000.0, "rms_norm_eps": 1e-6, "tie_word_embeddings": True,
               "max_position_embeddings": 64, "use_sliding_window": False, "sliding_window": 64,
               "torch_dtype": "bfloat16", "rope_scaling": None},
    },
    {
        "name": "qwen3", "seed": 6006, "posOffset": 3, "variants": ["f32", "bf16-sharded"],
        "hf": {**COMMON, "architectures": ["Qwen3ForCausalLM"], "model_type": "qwen3", "num_attention_heads": 4,
               "num_key_value_heads": 2, "head_dim": 8, "attention_bias": False, "rope_theta": 1000000.0,
               "rms_norm_eps": 1e-6, "tie_word_embeddings": False, "max_position_embeddings": 64,
               "use_sliding_window": False, "torch_dtype": "bfloat16", "rope_scaling": None},
    },
    {
        "name": "llama", "seed": 7007, "posOffset": 40, "variants": ["f32", "bf16"],
        "hf": {**COMMON, "architectures": ["LlamaForCausalLM"], "model_type": "llama", "num_attention_heads": 2,
               "num_key_value_heads": 1, "head_dim": 8, "attention_bias": False, "mlp_bias": False,
               "rope_theta": 10000.0, "rms_norm_eps": 1e-5, "tie_word_embeddings": True,
               "max_position_embeddings": 512, "torch_dtype": "bfloat16",
               "rope_scaling": {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0,
                                "high_freq_factor": 8.0, "original_max_position_embeddings": 256}},
    },
]

LORA = {"rank": 2, "alpha": 4.0, "targets": list(tm.LORA_TARGETS)}

# HF name pattern -> reference (our) name, written independently of server/models/hf-names.ts.
HF_TO_OURS = [
    (r"^model\.embed_tokens\.weight$", "embed.weight"),
    (r"^model\.layers\.(\d+)\.input_layernorm\.weight$", r"layers.\1.attn_norm.weight"),
    (r"^model\.layers\.(\d+)\.self_attn\.([qkvo])_proj\.(weight|bias)$", r"layers.\1.attn.\2.\3"),
    (r"^model\.layers\.(\d+)\.self_attn\.([qk])_norm\.weight$", r"layers.\1.attn.\2_norm.weight"),
    (r"^model\.layers\.(\d+)\.post_attention_layernorm\.weight$", r"layers.\1.mlp_norm.weight"),
    (r"^model\.layers\.(\d+)\.mlp\.(gate|up|down)_proj\.weight$", r"layers.\1.mlp.\2.weight"),
    (r"^model\.norm\.weight$", "norm.weight"),
    (r"^lm_head\.weight$", "lm_head.weight"),
]
OURS_TO_HF = [
    (r"^embed\.weight$", "model.embed_tokens.weight"),
    (r"^layers\.(\d+)\.attn_norm\.weight$", r"model.layers.\1.input_layernorm.weight"),
    (r"^layers\.(\d+)\.attn\.([qkvo])\.(weight|bias)$", r"model.layers.\1.self_attn.\2_proj.\3"),
    (r"^layers\.(\d+)\.attn\.([qk])_norm\.weight$", r"model.layers.\1.self_attn.\2_norm.weight"),
    (r"^layers\.(\d+)\.mlp_norm\.weight$", r"model.layers.\1.post_attention_layernorm.weight"),
    (r"^layers\.(\d+)\.mlp\.(gate|up|down)\.weight$", r"model.layers.\1.mlp.\2_proj.weight"),
    (r"^norm\.weight$", "model.norm.weight"),
    (r"^lm_head\.weight$", "lm_head.weight"),
]


def rename(name: str, table) -> str:
    for pat, rep in table:
        if re.match(pat, name):
            return re.sub(pat, rep, name)
    raise ValueError(f"no mapping for tensor {name}")


def config_from_hf(hf: dict) -> dict:
    """transformers semantics of the fields this family uses -> reference config."""
    mt = hf["model_type"]
    scaling = None
    rs = hf.get("rope_scaling")
    if rs and rs.get("rope_type", rs.get("type")) not in (None, "default"):
        assert rs["rope_type"] == "llama3"
        scaling = {"type": "llama3", "factor": rs["factor"], "lowFreqFactor": rs["low_freq_factor"],
                   "highFreqFactor": rs["high_freq_factor"],
                   "originalMaxPositionEmbeddings": rs["original_max_position_embeddings"]}
    cfg = {
        "vocabSize": hf["vocab_size"], "hiddenSize": hf["hidden_size"], "numLayers": hf["num_hidden_layers"],
        "numHeads": hf["num_attention_heads"], "numKvHeads": hf.get("num_key_value_heads") or hf["num_attention_heads"],
        "headDim": hf.get("head_dim") or hf["hidden_size"] // hf["num_attention_heads"],
        "intermediateSize": hf["intermediate_size"], "ropeTheta": hf.get("rope_theta", 10000.0),
        "rmsNormEps": hf.get("rms_norm_eps", 1e-6), "tieEmbeddings": hf.get("tie_word_embeddings", False),
        # Qwen2's attention always has q/k/v biases; Qwen3 and Llama follow attention_bias (default False).
        "attentionBias": True if mt == "qwen2" else bool(hf.get("attention_bias", False)),
        "maxSequenceLength": hf.get("max_position_embeddings", 2048),
    }
    if mt == "qwen3":
        cfg["qkNorm"] = True
    if scaling:
        cfg["ropeScaling"] = scaling
    return tm.normalize_config(cfg)


def representable(t: torch.Tensor) -> torch.Tensor:
    """Rounds to bfloat16 and zeroes values below float16's normal range: exact in F32, BF16 and F16."""
    r = t.to(torch.bfloat16).to(torch.float64)
    r[r.abs() < 2.0 ** -14] = 0.0
    return r


def encode(t: torch.Tensor, dtype: str) -> bytes:
    if dtype == "F32":
        return t.to(torch.float32).contiguous().numpy().astype("<f4").tobytes()
    if dtype == "F16":
        return t.to(torch.float32).contiguous().numpy().astype("<f2").tobytes()
    if dtype == "BF16":
        bits = t.to(torch.float32).contiguous().numpy().view(np.uint32)
        assert np.all(bits & 0xFFFF == 0), "value not representable in bfloat16"
        return (bits >> 16).astype("<u2").tobytes()
    raise ValueError(dtype)


def write_hf_safetensors(path: str, tensors: dict, dtype: str) -> None:
    """safetensors as torch's save_file lays it out: sorted names, {"format": "pt"} metadata."""
    header = {"__metadata__": {"format": "pt"}}
    chunks, off = [], 0
    for name in sorted(tensors):
        data = encode(tensors[name], dtype)
        header[name] = {"dtype": dtype, "shape": list(tensors[name].shape), "data_offsets": [off, off + len(data)]}
        chunks.append(data)
        off += len(data)
    hj = json.dumps(header, separators=(",", ":")).encode("utf-8")
    hj += b" " * ((8 - len(hj) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(hj)))
        f.write(hj)
        for c in chunks:
            f.write(c)


def write_folder(folder: str, hf_config: dict, hf_tensors: dict, variant: str) -> None:
    os.makedirs(folder, exist_ok=True)
    for old in os.listdir(folder):
        os.remove(os.path.join(folder, old))
    dtype = {"f32": "F32", "bf16": "BF16", "f16": "F16"}[variant.split("-")[0]]
    with open(os.path.join(folder, "config.json"), "w") as f:
        json.dump({**hf_config, "torch_dtype": {"F32": "float32", "BF16": "bfloat16", "F16": "float16"}[dtype]}, f, indent=2)
        f.write("\n")
    if not variant.endswith("-sharded"):
        write_hf_safetensors(os.path.join(folder, "model.safetensors"), hf_tensors, dtype)
        return
    names = sorted(hf_tensors)
    shards = [names[: len(names) // 2], names[len(names) // 2:]]
    weight_map, total = {}, 0
    for k, shard in enumerate(shards):
        file = f"model-{k + 1:05d}-of-{len(shards):05d}.safetensors"
        write_hf_safetensors(os.path.join(folder, file), {n: hf_tensors[n] for n in shard}, dtype)
        for n in shard:
            weight_map[n] = file
            total += hf_tensors[n].numel() * 2
    with open(os.path.join(folder, "model.safetensors.index.json"), "w") as f:
        json.dump({"metadata": {"total_size": total}, "weight_map": weight_map}, f, indent=2)
        f.write("\n")


def read_folder(folder: str, cfg: dict) -> dict:
    """Reads a folder back (single or sharded) into reference names, float64."""
    files = [os.path.join(folder, "model.safetensors")]
    if not os.path.exists(files[0]):
        with open(os.path.join(folder, "model.safetensors.index.json")) as f:
            files = [os.path.join(folder, s) for s in sorted(set(json.load(f)["weight_map"].values()))]
    params = {}
    for path in files:
        tensors, _ = tm.read_safetensors(path)
        for hf_name, t in tensors.items():
            params[rename(hf_name, HF_TO_OURS)] = t.to(torch.float64)
    expected = dict(tm.parameter_shapes(cfg))
    assert set(params) == set(expected), (sorted(set(params) ^ set(expected)))
    for n, shape in expected.items():
        assert list(params[n].shape) == shape, n
    return params


def lora_ppo_step(cfg: dict, gen: torch.Generator, targets, forward, pos_offset: int):
    """A random LoRA adapter, the make_fixtures.py batch (positions shifted by pos_offset) and one PPO
    loss with its adapter gradients through `forward(ids, pos, attn, lora, scale)`, as fixture tensors."""
    r, alpha = LORA["rank"], LORA["alpha"]
    lora = {}
    for name, shape in tm.lora_shapes(cfg, r, targets):
        std = 0.3 if name.endswith("lora_A") else 0.2
        lora[name] = mf.f32(std * torch.randn(shape, generator=gen, dtype=torch.float64))
    scale = alpha / r
    fx_case = {"pads": [0, 2, 1], "prompt": [1, 1, 2]}
    ids, pos, attn, tgt, loss_mask = mf.make_inputs(fx_case, cfg, gen)
    pos = pos + pos_offset
    token_weight = 1.0 / float(loss_mask.sum())
    with torch.no_grad():
        logp0, _ = tm.token_logp(forward(ids, pos, attn, lora, scale), tgt, mf.PPO["temperature"])
    adv, log_ratio = mf.ppo_branches(loss_mask, gen)
    inputs = {
        "input_ids": ids, "position_ids": pos, "targets": tgt, "attention_mask": attn, "loss_mask": loss_mask,
        "advantages": mf.f32(adv), "old_logp": mf.f32(logp0 - log_ratio),
        "ref_logp": mf.f32(logp0 + 0.2 * torch.randn(mf.B, mf.T, generator=gen, dtype=torch.float64)),
    }
    trainable = [n for n, _ in tm.lora_shapes(cfg, r, targets)]
    Lp = {k: v.clone().requires_grad_(True) for k, v in lora.items()}
    logits = forward(ids, pos, attn, Lp, scale)
    res = tm.ppo_loss(logits, tgt, loss_mask, inputs["advantages"], inputs["old_logp"], inputs["ref_logp"],
                      temperature=mf.PPO["temperature"], clip_eps=mf.PPO["clipEps"], kl_coef=mf.PPO["klCoef"],
                      ent_coef=mf.PPO["entCoef"], token_weight=token_weight)
    grads = torch.autograd.grad(res["loss"], [Lp[n] for n in trainable])
    tensors = {f"param.{k}": v for k, v in lora.items()}
    tensors.update({f"input.{k}": v.to(torch.float64) for k, v in inputs.items()})
    tensors["expect.logits"] = logits.detach()
    for k, v in res.items():
        tensors[f"expect.{k}"] = v.detach()
    tensors.update({f"grad.{n}": g for n, g in zip(trainable, grads)})
    return tensors, res, trainable, token_weight, scale


def run_case(case) -> None:
    gen = torch.Generator().manual_seed(case["seed"])
    cfg = config_from_hf(case["hf"])
    params = {k: representable(v) for k, v in tm.init_params(cfg, gen).items()}
    hf_tensors = {rename(n, OURS_TO_HF): v for n, v in params.items()}
    folders = []
    for variant in case["variants"]:
        folder = os.path.join(HF_DIR, f"{case['name']}-{variant}")
        write_folder(folder, case["hf"], hf_tensors, variant)
        back = read_folder(folder, cfg)
        assert all(torch.equal(back[n], params[n]) for n in params), f"{folder} does not read back exactly"
        folders.append(os.path.relpath(folder, FIXTURES))

    forward = lambda ids, pos, attn, lora, scale: tm.forward(params, cfg, ids, pos, attn, lora, scale)  # noqa: E731
    tensors, res, trainable, token_weight, scale = lora_ppo_step(cfg, gen, LORA["targets"], forward, case["posOffset"])
    r, alpha = LORA["rank"], LORA["alpha"]
    meta = {
        "name": f"hf-{case['name']}",
        "description": f"Tiny random {case['hf']['model_type']} checkpoint in Hugging Face layout; LoRA PPO step.",
        "hfConfig": case["hf"],
        "modelConfig": cfg,
        "folders": folders,
        "loss": "ppo",
        "scalars": {**mf.PPO, "tokenWeight": token_weight},
        "lora": {"rank": r, "alpha": alpha, "scale": scale, "targets": LORA["targets"]},
        "trainable": trainable,
        "batch": mf.B,
        "seqLen": mf.T,
        "positionOffset": case["posOffset"],
        "integerInputsAsF32": ["input_ids", "position_ids", "targets"],
        "ropeInvFreq": tm.rope_inv_freq(tm.dims(cfg)[5], cfg["ropeTheta"], cfg.get("ropeScaling")).tolist(),
        "generator": f"torch {torch.__version__}, make_hf_fixtures.py seed {case['seed']}",
    }
    path = os.path.join(FIXTURES, f"hf-{case['name']}.safetensors")
    tm.write_safetensors(path, tensors, {"case": json.dumps(meta, sort_keys=True)})
    print(f"hf-{case['name']}: loss {float(res['loss']):.6f}, folders {folders}, {os.path.getsize(path)} bytes")


GPT2 = {
    "name": "gpt2", "seed": 8008, "variants": ["f32", "bf16"],
    # DialoGPT-medium's config.json fields (n_embd 1024, n_layer 24, n_head 16, n_positions 1024), shrunk.
    "hf": {"architectures": ["GPT2LMHeadModel"], "model_type": "gpt2", "vocab_size": 48, "n_embd": 16, "n_layer": 2,
           "n_head": 4, "n_inner": None, "n_positions": 64, "n_ctx": 64, "activation_function": "gelu_new",
           "layer_norm_epsilon": 1e-5, "resid_pdrop": 0.1, "embd_pdrop": 0.1, "attn_pdrop": 0.1,
           "scale_attn_weights": True, "bos_token_id": 47, "eos_token_id": 47, "torch_dtype": "float32"},
}


def gpt2_config_from_hf(hf: dict) -> dict:
    """GPT2Config semantics (n_inner None = 4·n_embd, tied head, layer_norm_epsilon) -> reference config."""
    C = hf["n_embd"]
    return tm.normalize_config({
        "vocabSize": hf["vocab_size"], "hiddenSize": C, "numLayers": hf["n_layer"], "numHeads": hf["n_head"],
        "numKvHeads": hf["n_head"], "intermediateSize": hf.get("n_inner") or 4 * C,
        "rmsNormEps": hf.get("layer_norm_epsilon", 1e-5), "tieEmbeddings": hf.get("tie_word_embeddings", True),
        "attentionBias": True, "maxSequenceLength": hf["n_positions"], "architecture": "gpt2",
        "positionEmbeddings": hf["n_positions"],
    })


def run_gpt2_case(case) -> None:
    """GPT-2 in its own layout (Conv1D [in, out], fused c_attn, transformer. prefix, mask buffers)."""
    gen = torch.Generator().manual_seed(case["seed"])
    cfg = gpt2_config_from_hf(case["hf"])
    params = {k: representable(v) for k, v in tm.gpt2_init_params(cfg, gen).items()}
    folders = []
    for variant in case["variants"]:
        folder = os.path.join(HF_DIR, f"{case['name']}-{variant}")
        tensors = dict(params)
        if variant == "f32":
            # Older GPT-2 checkpoints carry the causal-mask buffers; the loader must skip them.
            P = cfg["positionEmbeddings"]
            for i in range(cfg["numLayers"]):
                tensors[f"transformer.h.{i}.attn.bias"] = torch.tril(torch.ones(P, P, dtype=torch.float64)).view(1, 1, P, P)
                tensors[f"transformer.h.{i}.attn.masked_bias"] = torch.tensor(-1e4, dtype=torch.float64)
        write_folder(folder, case["hf"], tensors, variant)
        back, _ = tm.read_safetensors(os.path.join(folder, "model.safetensors"))
        assert all(torch.equal(back[n].to(torch.float64), params[n]) for n in params), f"{folder} does not read back exactly"
        folders.append(os.path.relpath(folder, FIXTURES))

    targets = list(tm.GPT2_LORA_TARGETS)
    forward = lambda ids, pos, attn, lora, scale: tm.gpt2_forward(params, cfg, ids, pos, attn, lora, scale)  # noqa: E731
    out, res, trainable, token_weight, scale = lora_ppo_step(cfg, gen, targets, forward, 0)
    r, alpha = LORA["rank"], LORA["alpha"]
    meta = {
        "name": "hf-gpt2", "description": "Tiny random gpt2 checkpoint (Conv1D layout, fused c_attn); LoRA PPO step.",
        "hfConfig": case["hf"], "modelConfig": cfg, "folders": folders, "loss": "ppo",
        "scalars": {**mf.PPO, "tokenWeight": token_weight},
        "lora": {"rank": r, "alpha": alpha, "scale": scale, "targets": targets}, "trainable": trainable,
        "batch": mf.B, "seqLen": mf.T, "positionOffset": 0,
        "integerInputsAsF32": ["input_ids", "position_ids", "targets"], "ropeInvFreq": [],
        "generator": f"torch {torch.__version__}, make_hf_fixtures.py seed {case['seed']}",
    }
    path = os.path.join(FIXTURES, "hf-gpt2.safetensors")
    tm.write_safetensors(path, out, {"case": json.dumps(meta, sort_keys=True)})
    print(f"hf-gpt2: loss {float(res['loss']):.6f}, folders {folders}, {os.path.getsize(path)} bytes")


def main():
    torch.set_num_threads(1)
    os.makedirs(HF_DIR, exist_ok=True)
    only = sys.argv[1:]
    for case in CASES:
        if not only or case["name"] in only:
            run_case(case)
    if not only or "gpt2" in only:
        run_gpt2_case(GPT2)


if __name__ == "__main__":
    main()
