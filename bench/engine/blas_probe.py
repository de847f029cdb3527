"""Which OpenBLAS kernel PyTorch gets in this process, whether its results are right, and how fast it is.

Run:  OPENBLAS_VERBOSE=2 [OPENBLAS_CORETYPE=SkylakeX] /usr/bin/python3 bench/engine/blas_probe.py \
          [--threads 2] [--n 512] [--reps 10] [--tries 5]
OpenBLAS picks its kernel ("core") once, when the library loads, from cpuid, unless OPENBLAS_CORETYPE
names one; with OPENBLAS_VERBOSE=2 it prints "Core: <name>" to stderr. `torch-blas.ts` reads that
line and runs this probe once per core it considers.

Prints one JSON line on stdout:
  {"corename": openblas_get_corename() (null when no OpenBLAS is mapped), "blasLibrary": [paths],
   "threads": n, "n": n, "gflops": best try, "gflopsTries": [...],
   "checks": [{"shape": [m, k, n], "entries": count, "maxScaledError": e}]}
The checks compare torch.mm's float32 results with float64 dot products summed in Python (math.fsum),
so the reference does not go through the BLAS under test. The error of each checked entry is scaled by
sum_k |a_ik * b_kj|, the quantity the standard float32 bound (|error| <= k * 2^-24 * sum |a b|) is
stated against; `torch-blas.ts` holds the bound.
"""
from __future__ import annotations

import argparse
import ctypes
import json
import math
import os
import random
import sys
import time

sys.dont_write_bytecode = True

# Shapes [m, k, n] checked against float64 besides the timed n x n square: ragged ones that reach the
# kernels' edge paths (a wrong kernel tends to fail on the leftovers of its register blocking first).
RAGGED_SHAPES = [(64, 257, 129), (7, 33, 5), (1, 896, 131)]
CHECK_ENTRIES = 256


def blas_libraries():
    """The BLAS/LAPACK libraries mapped into this process (resolved paths)."""
    libs = set()
    with open("/proc/self/maps") as f:
        for line in f:
            parts = line.split()
            if len(parts) >= 6 and any(x in parts[5] for x in ("blas", "lapack", "mkl")):
                libs.add(os.path.realpath(parts[5]))
    return sorted(libs)


def openblas_corename(libs):
    """OpenBLAS's own name for the kernel it runs (openblas_get_corename), or None without OpenBLAS."""
    for path in libs:
        if "openblas" in os.path.basename(path):
            fn = getattr(ctypes.CDLL(path), "openblas_get_corename", None)
            if fn is not None:
                fn.restype = ctypes.c_char_p
                return fn().decode()
    return None


def check(torch, m, k, n, rng):
    g = torch.Generator().manual_seed(m * 1000003 + k * 1009 + n)
    a = torch.randn(m, k, generator=g)
    b = torch.randn(k, n, generator=g)
    c = torch.mm(a, b)
    al, bl, cl = a.tolist(), b.tolist(), c.tolist()
    cells = [(i, j) for i in range(m) for j in range(n)] if m * n <= CHECK_ENTRIES else \
        [(rng.randrange(m), rng.randrange(n)) for _ in range(CHECK_ENTRIES)]
    worst = 0.0
    for i, j in cells:
        terms = [al[i][p] * bl[p][j] for p in range(k)]  # exact: a product of two float32 fits a float64
        ref = math.fsum(terms)
        scale = math.fsum(abs(t) for t in terms) or 1.0
        worst = max(worst, abs(cl[i][j] - ref) / scale)
    return {"shape": [m, k, n], "entries": len(cells), "maxScaledError": worst}


def peak(torch, n, reps, tries):
    a = torch.randn(n, n)
    b = torch.randn(n, n)
    out = torch.empty(n, n)
    for _ in range(3):
        torch.mm(a, b, out=out)
    res = []
    for _ in range(tries):
        t0 = time.perf_counter()
        for _ in range(reps):
            torch.mm(a, b, out=out)
        res.append(2.0 * n ** 3 * reps / (time.perf_counter() - t0) / 1e9)
    return res


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--n", type=int, default=512)
    ap.add_argument("--reps", type=int, default=10)
    ap.add_argument("--tries", type=int, default=5)
    args = ap.parse_args()
    os.environ.setdefault("OMP_NUM_THREADS", str(args.threads))
    import torch  # after OMP_NUM_THREADS: OpenBLAS (OpenMP build) sizes its pool when it loads

    torch.set_num_threads(args.threads)
    libs = blas_libraries()
    rng = random.Random(0)
    checks = [check(torch, m, k, n, rng) for m, k, n in [(args.n, args.n, args.n)] + RAGGED_SHAPES]
    tries = peak(torch, args.n, args.reps, args.tries)
    print(json.dumps({
        "corename": openblas_corename(libs), "blasLibrary": libs, "threads": torch.get_num_threads(), "n": args.n,
        "gflops": max(tries), "gflopsTries": [round(x, 2) for x in tries], "checks": checks,
        "coretypeEnv": os.environ.get("OPENBLAS_CORETYPE"),
    }))


if __name__ == "__main__":
    main()
