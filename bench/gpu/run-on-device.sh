#!/usr/bin/env bash
# The one prepared command for a lent GPU machine (no network, no Node.js): runs `bench:gpu` at
# Qwen2.5-0.5B and then Qwen3-1.7B shapes, each model under its own time limit, and copies the
# results and logs into $OUT as they finish, so a run stopped at its limit still returns what ended.
#
# Needs .gpuship/ from `bash bench/gpu/pack-for-device.sh` (node, the runtime packages, the Vulkan
# loader) carried with the working tree: device run with carry [".gpuship"], command
#   bash bench/gpu/run-on-device.sh
# Env: GPU_BENCH_BUDGET_S (450: seconds for both models together), GPU_BENCH_SMALL_S (220: the
# 0.5B model's share), GPU_BENCH_MODELS (qwen2.5-0.5b,qwen3-1.7b); BENCH_GPU_* pass through to the
# bench (bench/gpu/bench-gpu.ts); GPU_BENCH_ENV_<model, non-alphanumerics as _> adds settings
# for one model (e.g. GPU_BENCH_ENV_qwen3_1_7b="BENCH_GPU_PHASES=ppo"). GPU_BENCH_KERNELS=1 runs
# bench/gpu/webgpu-kernels.ts instead (MatMul throughput and small-kernel cost, both sides). GPU_BENCH_TINY=1 runs the
# CPU form instead (a check of the bundle on a machine without a GPU).
# GPU_BENCH_PROFILE=1: after the models, one more Troupe-only pass of GPU_BENCH_PROFILE_MODEL
# (qwen2.5-0.5b) with ONNX Runtime's profiler on (BENCH_GPU_PROFILE=1: one PPO step and one decode
# after their warm-ups), in the last GPU_BENCH_PROFILE_S (200) seconds of the budget, which the
# models leave it; its per-session summary comes back as $OUT/profile-<model>.json, the raw
# traces (hundreds of MB) stay on the machine. GPU_BENCH_MODELS= (empty) runs the profile alone.
set -uo pipefail
cd "$(dirname "$0")/../.."
start=$(date +%s)
OUT=${OUT:-/tmp/gpu-bench-out}
mkdir -p "$OUT"
log() { printf '[run-on-device] %s\n' "$*" | tee -a "$OUT/device.txt"; }
budget=${GPU_BENCH_BUDGET_S:-450}
left() { echo $((budget - ($(date +%s) - start))); }

# Vulkan loader (Dawn opens libvulkan.so.1) and the GL vendor-neutral libraries the NVIDIA
# Vulkan driver (libGLX_nvidia) links against: the device README's recipe, unpacked on every run.
for f in .gpuship/*.deb; do dpkg -x "$f" /; done
ldconfig
for icd in /usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json /usr/share/vulkan/icd.d/nvidia_icd.json /etc/vulkan/icd.d/nvidia_icd.json; do
  if [[ -f $icd && -z ${VK_DRIVER_FILES:-} ]]; then export VK_DRIVER_FILES=$icd VK_ICD_FILENAMES=$icd; fi
done
egl=/usr/local/nvidia/share/glvnd/egl_vendor.d/10_nvidia.json
[[ -f $egl ]] && export __EGL_VENDOR_LIBRARY_FILENAMES=$egl

# Node and the packages the engine loads.
ship=/tmp/troupe-ship
mkdir -p "$ship" && tar -C "$ship" -xJf .gpuship/ship.tar.xz || { log "cannot unpack .gpuship/ship.tar.xz (run bench/gpu/pack-for-device.sh here and carry .gpuship)"; exit 2; }
[[ -e node_modules ]] || ln -s "$ship/node_modules" node_modules
export PATH="$ship/bin:$PATH"
{
  echo "node $(node --version); python3 $(command -v python3)"
  nvidia-smi --query-gpu=name,driver_version,memory.total,memory.used --format=csv 2>&1
  echo "VK_DRIVER_FILES=${VK_DRIVER_FILES:-unset}"
  ldconfig -p | grep -i vulkan
  python3 -c 'import torch; print("torch", torch.__version__, torch.cuda.is_available())' 2>&1
} 2>&1 | tee -a "$OUT/device.txt"
# Does WebGPU find the GPU? Try the manifest alone, then with the driver's lib folders on the
# library path, then the loader's own search; keep the first that gives a hardware adapter.
probe() {
  timeout 60 node --import tsx -e "import('./server/runtime/engine.ts').then(async ({ Engine }) => { const e = await Engine.start({ executionProvider: 'webgpu', log: () => {} }); console.log('provider', e.provider, e.providerReason, JSON.stringify(e.providerReport?.webgpu ?? null)); await e.close(); process.exit(e.provider === 'webgpu' ? 0 : 1); })" 2>&1 | tee -a "$OUT/device.txt"
  return "${PIPESTATUS[0]}"
}
if [[ ${GPU_BENCH_TINY:-0} != 1 ]]; then
  [[ -n ${VK_DRIVER_FILES:-} ]] && { echo "manifest:"; cat "$VK_DRIVER_FILES"; } 2>&1 | tee -a "$OUT/device.txt"
  if ! probe; then
    export LD_LIBRARY_PATH=/usr/local/nvidia/lib64:/usr/local/nvidia/lib:${LD_LIBRARY_PATH:-}
    log "retrying with LD_LIBRARY_PATH=$LD_LIBRARY_PATH"
    if ! probe; then
      unset VK_DRIVER_FILES VK_ICD_FILENAMES
      log "retrying with the loader's own driver search"
      probe || log "no WebGPU adapter: Troupe's side will fail"
    fi
  fi
fi
export TROUPE_BENCH_PYTHON=${TROUPE_BENCH_PYTHON:-$(command -v python3)} PYTHONUNBUFFERED=1

if [[ ${GPU_BENCH_TINY:-0} == 1 ]]; then
  BENCH_GPU_TINY=1 BENCH_GPU_OUT="$OUT/gpu-tiny.json" node --import tsx bench/gpu/bench-gpu.ts 2>&1 | tee "$OUT/log-tiny.txt"
  exit "${PIPESTATUS[0]}"
fi

if [[ ${GPU_BENCH_KERNELS:-0} == 1 ]]; then
  # Only the kernel-level figures (MatMul throughput, cost of a small kernel) beside PyTorch's.
  KERNELS_OUT="$OUT/webgpu-kernels.json" timeout -k 5 "$(left)" node --import tsx bench/gpu/webgpu-kernels.ts 2>&1 | tee "$OUT/log-kernels.txt"
  exit "${PIPESTATUS[0]}"
fi

export BENCH_GPU_PHASE_S=${BENCH_GPU_PHASE_S:-40}
models=${GPU_BENCH_MODELS-qwen2.5-0.5b,qwen3-1.7b}
# The profile pass's share, kept out of the models' budget.
reserve=0
[[ ${GPU_BENCH_PROFILE:-0} == 1 ]] && reserve=${GPU_BENCH_PROFILE_S:-200}
IFS=, read -ra list <<<"$models"
n=${#list[@]}
for i in "${!list[@]}"; do
  m=${list[$i]}
  t=$(($(left) - reserve))
  # The first model gets its share; the last whatever is left.
  if ((i < n - 1)) && ((t > ${GPU_BENCH_SMALL_S:-220})); then t=${GPU_BENCH_SMALL_S:-220}; fi
  if ((t < 30)); then log "$m: skipped, ${t}s left"; continue; fi
  export BENCH_GPU_PHASE_TIMEOUT_S=${BENCH_GPU_PHASE_TIMEOUT_S_SET:-$((t * 3 / 4))}
  log "$m: up to ${t}s (phase limit ${BENCH_GPU_PHASE_TIMEOUT_S}s)"
  per="GPU_BENCH_ENV_${m//[^a-zA-Z0-9]/_}"
  read -ra extra <<<"${!per:-}"
  [[ ${#extra[@]} -gt 0 ]] && log "$m: ${extra[*]}"
  env "${extra[@]}" BENCH_GPU_MODELS="$m" BENCH_GPU_OUT="$OUT/gpu-$m.json" timeout -k 5 "$t" node --import tsx bench/gpu/bench-gpu.ts 2>&1 | tee "$OUT/log-$m.txt"
  log "$m: exit ${PIPESTATUS[0]} after $(($(date +%s) - start))s in all"
done
if [[ ${GPU_BENCH_PROFILE:-0} == 1 ]]; then
  pm=${GPU_BENCH_PROFILE_MODEL:-qwen2.5-0.5b}
  t=$(left)
  log "profile $pm: up to ${t}s"
  # One timed round each (the warm-ups are in the trace too; the summary leaves each session's first run out).
  BENCH_GPU_PROFILE=1 BENCH_GPU_SIDES=troupe BENCH_GPU_MODELS="$pm" BENCH_GPU_TROUPE_ROUNDS=1 BENCH_GPU_PHASE_S=1 BENCH_GPU_DECODE=fused \
    BENCH_GPU_PHASE_TIMEOUT_S=$((t * 3 / 4)) BENCH_GPU_PROFILE_TRACES=/tmp/troupe-profile-traces \
    BENCH_GPU_OUT="$OUT/profiled-$pm.json" BENCH_GPU_PROFILE_OUT="$OUT/profile-$pm.json" \
    timeout -k 5 "$t" node --import tsx bench/gpu/bench-gpu.ts 2>&1 | tee "$OUT/log-profile-$pm.txt"
  log "profile $pm: exit ${PIPESTATUS[0]} after $(($(date +%s) - start))s in all"
  du -sh /tmp/troupe-profile-traces 2>&1 | tee -a "$OUT/device.txt"
fi
# One file for bench/results/gpu.json: every model's object in one list.
node -e '
const fs = require("fs"); const [out, ...names] = process.argv.slice(1);
const parts = names.map((m) => `${out}/gpu-${m}.json`).filter((f) => fs.existsSync(f)).map((f) => JSON.parse(fs.readFileSync(f, "utf8")));
if (parts.length) fs.writeFileSync(`${out}/gpu.json`, JSON.stringify({ ...parts[0], models: parts.flatMap((p) => p.models) }, null, 2) + "\n");
' "$OUT" "${list[@]}"
ls -la "$OUT" | tee -a "$OUT/device.txt"
