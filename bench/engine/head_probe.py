"""What a fresh [N, V] tensor costs PyTorch at Qwen2.5-0.5B's vocabulary, and its LM-head GEMMs per OpenBLAS core.

Run:  /usr/bin/python3 bench/engine/head_probe.py [--rounds 2] [--threads 1] [--out bench/results/head-probe.json]

PyTorch's LoRA PPO step at Qwen2.5-0.5B's shapes (bench-real-vocab.ts: 4 x 128 tokens, V = 151936) holds
its logits and the loss's intermediates as [4, 128, 151936] float32 tensors, 311 MB each. glibc serves a
block that large with mmap and unmaps it on free (it keeps nothing over 32 MB), and PyTorch's CPU allocator
caches nothing, so every such tensor faults its 76k pages in again. This times, in child processes that
alternate round by round (each child one variant, its own environment):

  - fill_ / exp into a fresh [N, V] tensor against into one allocated before (the page faults alone);
  - the LM head's forward (x [N, C] @ W[V, C]^T, as F.linear computes it) into a fresh output and into a
    preallocated one, and its input gradient (dY [N, V] @ W [V, C]), GFLOP/s;

under these variants: glibc's default malloc; glibc.malloc.hugetlb=1 (GLIBC_TUNABLES: large blocks madvised
for transparent huge pages, faulted 2 MiB at a time; what torch_bench.py now sets); and, for the GEMMs,
OpenBLAS's own core (cpuid) against OPENBLAS_CORETYPE=Haswell and SkylakeX. Each figure: wall ms, CPU ms
of the process (system time of the faults included: steadier than wall time on a shared machine) and
minor page faults per call; medians over the rounds' medians, and each variant's ratio to the default.
Writes the JSON and prints a table.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import statistics
import subprocess
import sys
import time

sys.dont_write_bytecode = True
HERE = os.path.dirname(os.path.abspath(__file__))

N, C, V = 4 * 128, 896, 151936
VARIANTS = {
    # name: environment laid over the parent's (None unsets); "" keeps glibc's defaults explicitly
    "default": {"GLIBC_TUNABLES": "", "OPENBLAS_CORETYPE": None},
    "hugetlb": {"GLIBC_TUNABLES": "glibc.malloc.hugetlb=1", "OPENBLAS_CORETYPE": None},
    "haswell": {"GLIBC_TUNABLES": "", "OPENBLAS_CORETYPE": "Haswell"},
    "skylakex": {"GLIBC_TUNABLES": "", "OPENBLAS_CORETYPE": "SkylakeX"},
}
# The core variants time the GEMMs only (the page faults do not depend on the BLAS).
GEMM_ONLY = {"haswell", "skylakex"}


def child(threads: int, gemm_only: bool) -> dict:
    os.environ.setdefault("OMP_NUM_THREADS", str(threads))
    import torch
    import torch.nn.functional as F

    from blas_probe import blas_libraries, openblas_corename

    torch.set_num_threads(threads)
    g = torch.Generator().manual_seed(0)
    w = torch.randn(V, C, generator=g) * 0.02
    x = torch.randn(N, C, generator=g)
    dy = torch.randn(N, V, generator=g) * 1e-3
    out = torch.empty(N, V)
    out.fill_(0.0)
    dx = torch.empty(N, C)

    def faults():
        return resource.getrusage(resource.RUSAGE_SELF).ru_minflt

    def timed(fn, reps=3):
        fn()
        rows = []
        for _ in range(reps):
            f0, c0, t0 = faults(), time.process_time(), time.perf_counter()
            fn()
            rows.append(((time.perf_counter() - t0) * 1e3, (time.process_time() - c0) * 1e3, faults() - f0))
        return {"ms": statistics.median(r[0] for r in rows), "cpuMs": statistics.median(r[1] for r in rows),
                "faults": statistics.median(r[2] for r in rows)}

    flops = 2.0 * N * C * V
    ops = {
        "head forward, fresh output (F.linear)": (lambda: F.linear(x, w), flops),
        "head forward, into a preallocated output": (lambda: torch.mm(x, w.t(), out=out), flops),
        "head input gradient dY @ W": (lambda: torch.mm(dy, w, out=dx), flops),
    }
    if not gemm_only:
        ops.update({
            "fill_ of a fresh [N, V] tensor": (lambda: torch.empty(N, V).fill_(1.0), None),
            "fill_ of a reused [N, V] tensor": (lambda: out.fill_(1.0), None),
            "exp into a fresh [N, V] tensor": (lambda: dy.exp(), None),
            "exp into a reused [N, V] tensor": (lambda: torch.exp(dy, out=out), None),
        })
    res = {}
    for name, (fn, fl) in ops.items():
        r = timed(fn)
        if fl:
            r["gflops"] = fl / r["ms"] / 1e6
        res[name] = r
    return {"core": openblas_corename(blas_libraries()), "threads": torch.get_num_threads(), "ops": res}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--out", default=os.path.join(HERE, "..", "results", "head-probe.json"))
    ap.add_argument("--child", choices=sorted(VARIANTS))
    args = ap.parse_args()
    if args.child:
        print(json.dumps(child(args.threads, args.child in GEMM_ONLY)))
        return
    load0 = os.getloadavg()[0]
    runs = {v: [] for v in VARIANTS}
    for r in range(args.rounds):
        for v in (list(VARIANTS) if r % 2 == 0 else list(reversed(VARIANTS))):
            env = {k: val for k, val in os.environ.items()}
            for k, val in VARIANTS[v].items():
                if val is None:
                    env.pop(k, None)
                else:
                    env[k] = val
            p = subprocess.run([sys.executable, __file__, "--child", v, "--threads", str(args.threads)], env=env,
                               capture_output=True, text=True, cwd=HERE)
            if p.returncode != 0:
                raise SystemExit(f"head_probe child {v} exited {p.returncode}: {p.stderr[-800:]}")
            runs[v].append(json.loads(p.stdout.strip().splitlines()[-1]))
            print(f"round {r + 1}/{args.rounds} {v}: done", file=sys.stderr)
    summary = {}
    for v, rs in runs.items():
        ops = {}
        for op in rs[0]["ops"]:
            ops[op] = {k: statistics.median(x["ops"][op][k] for x in rs) for k in rs[0]["ops"][op]}
        summary[v] = {"core": rs[0]["core"], "env": VARIANTS[v], "ops": ops}
    base = summary["default"]["ops"]
    for v, s in summary.items():
        for op, f in s["ops"].items():
            f["cpuRatioToDefault"] = f["cpuMs"] / base[op]["cpuMs"] if base[op]["cpuMs"] > 0 else None
    out = {
        "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "python": platform.python_version(),
        "shape": {"N": N, "C": C, "V": V}, "threads": args.threads, "rounds": args.rounds,
        "loadAverage": {"start": load0, "end": os.getloadavg()[0]}, "cpus": os.cpu_count(),
        "thp": open("/sys/kernel/mm/transparent_hugepage/enabled").read().strip() if os.path.exists("/sys/kernel/mm/transparent_hugepage/enabled") else None,
        "note": "medians over rounds of each child's median of 3 calls; cpuMs is the process's CPU time (user + system) per call",
        "variants": summary, "raw": runs,
    }
    with open(args.out, "w") as f:
        f.write(json.dumps(out, indent=2) + "\n")
    print(f"| op | variant | core | wall ms | CPU ms | faults/call | GFLOP/s | CPU vs default |")
    print("|---|---|---|---|---|---|---|---|")
    for op in base:
        for v, s in summary.items():
            f = s["ops"].get(op)
            if f is None:
                continue
            gf = f"{f['gflops']:.1f}" if "gflops" in f else ""
            print(f"| {op} | {v} | {s['core']} | {f['ms']:.1f} | {f['cpuMs']:.1f} | {f['faults']:.0f} | {gf} | {f['cpuRatioToDefault']:.2f}x |")
    print(f"load average {out['loadAverage']['start']:.2f} -> {out['loadAverage']['end']:.2f} on {out['cpus']} cores; wrote {args.out}")


if __name__ == "__main__":
    main()
