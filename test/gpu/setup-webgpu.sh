#!/usr/bin/env bash
# Gives ONNX Runtime's WebGPU execution provider an adapter on a machine without a GPU, so the
# `*.gpu.test.ts` tests run in CI: Mesa's lavapipe (a Vulkan driver that runs on the CPU) is a
# software adapter that Dawn, the WebGPU implementation inside onnxruntime-node, accepts.
#
# Debian 12's own Mesa (22.3) is not enough: Dawn rejects its lavapipe ("Vulkan
# shaderUniform*ArrayDynamicIndexing required ... No supported adapters"); Mesa 25 from
# bookworm-backports has the feature. Debian 13 and later ship a recent enough Mesa themselves.
#
# Idempotent and fast when done: with mesa-vulkan-drivers >= 25 and libvulkan1 installed it
# returns at once without touching apt. Without root (and no sudo) it says what to run and
# exits 0: the GPU tests then skip themselves, naming the missing adapter.
#
# Usage: bash test/gpu/setup-webgpu.sh
set -euo pipefail

log() { printf '[webgpu setup] %s\n' "$*"; }

mesa_major() {
  # "25.0.7-2~bpo12+1" -> 25; empty when the package is not installed. dpkg-query fails for a
  # package dpkg has never seen (a fresh machine): that is "not installed", not an error for
  # pipefail and set -e to stop the script on.
  { dpkg-query -W -f='${db:Status-Abbrev} ${Version}\n' mesa-vulkan-drivers 2>/dev/null || true; } |
    awk '$1 == "ii" { split($2, v, "."); print v[1] }'
}
installed() { dpkg-query -W -f='${db:Status-Abbrev}\n' "$1" 2>/dev/null | grep -q '^ii'; }

if ! command -v dpkg-query >/dev/null; then
  log "not a Debian system: install a Vulkan driver (Mesa >= 25 lavapipe, or your GPU's) and the Vulkan loader yourself"
  exit 0
fi

major="$(mesa_major)"
if [[ -n "$major" && "$major" -ge 25 ]] && installed libvulkan1; then
  log "lavapipe ready (mesa-vulkan-drivers $major.x, libvulkan1 installed)"
  exit 0
fi

codename="$(. /etc/os-release && echo "${VERSION_CODENAME-}")"
sudo=()
if [[ "$(id -u)" != 0 ]]; then
  if ! command -v sudo >/dev/null || ! sudo -n true 2>/dev/null; then
    log "needs root to install Mesa's lavapipe; as root run: bash $0"
    exit 0
  fi
  sudo=(sudo -n)
fi

target=()
case "$codename" in
  bookworm)
    list=/etc/apt/sources.list.d/bookworm-backports.sources
    if ! grep -rqs 'bookworm-backports' /etc/apt/sources.list /etc/apt/sources.list.d/; then
      log "adding bookworm-backports ($list)"
      printf '%s\n' 'Types: deb' 'URIs: http://deb.debian.org/debian' 'Suites: bookworm-backports' 'Components: main' \
        'Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg' | "${sudo[@]}" tee "$list" >/dev/null
    fi
    target=(-t bookworm-backports)
    ;;
  '' | buster | bullseye)
    log "Debian '${codename:-unknown}' has no Mesa >= 25 package; the WebGPU tests will skip"
    exit 0
    ;;
  *) ;; # trixie and later: the release's own Mesa is recent enough.
esac

start=$(date +%s)
"${sudo[@]}" apt-get update -qq
"${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
  "${target[@]}" mesa-vulkan-drivers libvulkan1 >/dev/null
major="$(mesa_major)"
if [[ -z "$major" || "$major" -lt 25 ]]; then
  log "installed mesa-vulkan-drivers is ${major:-missing}.x, Dawn needs >= 25; the WebGPU tests will skip"
  exit 0
fi
log "installed lavapipe (mesa-vulkan-drivers $major.x) in $(($(date +%s) - start))s"
