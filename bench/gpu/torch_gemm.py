"""PyTorch side of `bench/gpu/webgpu-kernels.ts`: the same chained GEMMs and elementwise chain on
the same device, timed with CUDA events (CPU: wall clock).

Run: python3 bench/gpu/torch_gemm.py '<json>' with {"gemms": [[M, N, chain], ...], "adds":
[rows, cols, chain], "device": "cuda"|"cpu", "reps": 5}. Prints one JSON object: per GEMM shape
and dtype (fp32 with TF32 off, tf32, bf16) the median ms of one chain and its TFLOP/s, and the
elementwise chain's µs per kernel.
"""
from __future__ import annotations

import json
import statistics
import sys
import time

import torch


def timed(fn, device: str, reps: int) -> float:
    fn()
    if device == "cuda":
        torch.cuda.synchronize()
    ms = []
    for _ in range(reps):
        if device == "cuda":
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            fn()
            end.record()
            torch.cuda.synchronize()
            ms.append(start.elapsed_time(end))
        else:
            t = time.perf_counter()
            fn()
            ms.append((time.perf_counter() - t) * 1000)
    return statistics.median(ms)


def main() -> None:
    spec = json.loads(sys.argv[1])
    device, reps = spec["device"], spec.get("reps", 5)
    out = {"torch": torch.__version__, "device": torch.cuda.get_device_name(0) if device == "cuda" else "cpu", "gemm": [], "adds": None}
    kinds = [("fp32", torch.float32, False), ("tf32", torch.float32, True), ("bf16", torch.bfloat16, False)] if device == "cuda" else [("fp32", torch.float32, False)]
    for m, n, chain in spec["gemms"]:
        for name, dtype, tf32 in kinds:
            torch.backends.cuda.matmul.allow_tf32 = tf32
            x = torch.randn(m, n, device=device, dtype=dtype) * 0.1
            w = torch.randn(n, n, device=device, dtype=dtype) / n**0.5

            def run() -> torch.Tensor:
                y = x
                for _ in range(chain):
                    y = y @ w
                return y

            ms = timed(run, device, reps)
            out["gemm"].append({"m": m, "n": n, "chain": chain, "dtype": name, "ms": ms, "tflops": 2 * m * n * n * chain / (ms / 1000) / 1e12})
    rows, cols, chain = spec["adds"]
    x = torch.randn(rows, cols, device=device)
    one = torch.ones(1, device=device)

    def adds() -> torch.Tensor:
        y = x
        for _ in range(chain):
            y = y + one
        return y

    ms = timed(adds, device, reps)
    out["adds"] = {"rows": rows, "cols": cols, "chain": chain, "ms": ms, "usPerKernel": ms * 1000 / chain}
    torch.backends.cuda.matmul.allow_tf32 = False
    print(json.dumps(out))


if __name__ == "__main__":
    main()
