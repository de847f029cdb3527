#!/usr/bin/env bash
# Packs what `bench/gpu/run-on-device.sh` needs on a lent GPU machine that has no network and no
# Node.js: this machine's node binary, the few packages the engine loads at run time (onnxruntime-node
# with its Linux x64 library only, tsx and esbuild, zod, the Hugging Face tokenizer packages) and the
# Vulkan loader and the glvnd/GL libraries (.deb, x86-64) that Dawn (WebGPU inside onnxruntime-node)
# and the NVIDIA Vulkan driver (libGLX_nvidia) need: without them the H100 gave no WebGPU adapter. node_modules is
# 679 MB (other platforms' ORT builds, the editor's packages); the device carries 64 MiB in all.
#
# Writes .gpuship/ship.tar.xz and .gpuship/*.deb at the repository root (ignored through
# .git/info/exclude, never committed); pass `carry: [".gpuship"]` to the device call.
# Usage: bash bench/gpu/pack-for-device.sh
set -euo pipefail
cd "$(dirname "$0")/../.."
root=$PWD
grep -qx '/.gpuship/' .git/info/exclude 2>/dev/null || echo '/.gpuship/' >>.git/info/exclude
rm -rf .gpuship && mkdir -p .gpuship
stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
mkdir -p "$stage/bin" "$stage/node_modules"
cp "$(readlink -f "$(command -v node)")" "$stage/bin/node"
for p in onnxruntime-common zod tsx esbuild @esbuild/linux-x64 @huggingface/tokenizers @huggingface/jinja; do
  mkdir -p "$stage/node_modules/$(dirname "$p")"
  cp -a "node_modules/$p" "$stage/node_modules/$p"
done
mkdir -p "$stage/node_modules/onnxruntime-node/bin/napi-v6/linux"
(cd node_modules/onnxruntime-node && cp -a package.json dist lib "$stage/node_modules/onnxruntime-node/" && cp -a bin/napi-v6/linux/x64 "$stage/node_modules/onnxruntime-node/bin/napi-v6/linux/")
tar -C "$stage" -cf - bin node_modules | xz -T0 -6 >.gpuship/ship.tar.xz
# The Vulkan loader for amd64 whatever this machine's processor (the recipe in the device README).
lists=$(mktemp -d)
o=(-oAPT::Architecture=amd64 -oAPT::Architectures=amd64 "-oDir::State::Lists=$lists")
mkdir -p "$lists/partial"
apt-get "${o[@]}" update -qq
(cd .gpuship && apt-get "${o[@]}" download libvulkan1 libegl1 libglvnd0 libopengl0 libgl1 libglx0 libgles2 >/dev/null)
rm -rf "$lists"
du -sh .gpuship/*
