"""Which instructions ONNX Runtime's hot code runs: the share of `perf` samples in libonnxruntime that lie
within 256 bytes of a vpdpbusd (AVX512-VNNI / AVX-VNNI int8 dot product), a vpmaddubsw (AVX2/AVX512BW int8
without VNNI) or a vfmadd (fp32 FMA). libonnxruntime is stripped, so samples are addresses; this
disassembles around them (objdump).

Run (Linux, perf and objdump installed; docs/performance.md, "Per-kernel profiles, both sides"):
  NB_BITS=8 NB_SECONDS=14 node --import tsx bench/engine/nbits-loop.ts 2> /tmp/nb.err &
  until grep -q READY /tmp/nb.err; do sleep 0.5; done
  perf record -e cpu-clock -o /tmp/nb.data -p $! -- sleep 8
  python3 bench/engine/vnni_share.py /tmp/nb.data
"""
import bisect
import glob
import os
import re
import subprocess
import sys

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))


def main():
    data = sys.argv[1]
    libs = glob.glob(os.path.join(ROOT, "node_modules/onnxruntime-node/bin/napi-v*/linux/x64/libonnxruntime.so.1"))
    if not libs:
        raise SystemExit("vnni_share.py: no node_modules/onnxruntime-node/bin/napi-v*/linux/x64/libonnxruntime.so.1")
    report = subprocess.run(["perf", "report", "-i", data, "--stdio", "--sort", "dso,sym", "--percent-limit", "0.01"],
                            capture_output=True, text=True, check=True).stdout
    rows = []
    for line in report.splitlines():
        m = re.match(r"\s*([\d.]+)%\s+libonnxruntime\.so\.1\s+\[\.\]\s+0x([0-9a-f]+)", line)
        if m:
            rows.append((float(m.group(1)), int(m.group(2), 16)))
    if not rows:
        raise SystemExit(f"vnni_share.py: no samples in libonnxruntime in {data}")
    lo, hi = min(a for _, a in rows) - 4096, max(a for _, a in rows) + 4096
    dis = subprocess.run(["objdump", "-d", "--no-show-raw-insn", f"--start-address={lo}", f"--stop-address={hi}", libs[0]],
                         capture_output=True, text=True, check=True).stdout
    marks = {"vpdpbusd": [], "vpmaddubsw": [], "vfmadd": []}
    for line in dis.splitlines():
        m = re.match(r"\s*([0-9a-f]+):\s+(\S+)", line)
        if m:
            for k in marks:
                if m.group(2).startswith(k):
                    marks[k].append(int(m.group(1), 16))

    def near(addrs, a, w=256):
        i = bisect.bisect_left(addrs, a - w)
        return i < len(addrs) and addrs[i] <= a + w

    total = sum(p for p, _ in rows)
    shares = ", ".join(f"{k} {sum(p for p, a in rows if near(v, a)):.1f}%" for k, v in marks.items())
    print(f"{data}: libonnxruntime {total:.1f}% of samples; within 256 bytes of: {shares}")


if __name__ == "__main__":
    main()
