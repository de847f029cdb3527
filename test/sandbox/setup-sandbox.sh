#!/usr/bin/env bash
# Installs bubblewrap, the sandbox model-written code runs in (server/sandbox/), so that
# server/sandbox/sandbox.test.ts runs its escape corpus in CI instead of skipping.
#
# Idempotent and instant when done: with /usr/bin/bwrap present it returns at once without
# touching apt. Without root (and no sudo) it says what to run and exits 0: the sandbox tests
# then skip themselves, naming the missing bwrap.
#
# Usage: bash test/sandbox/setup-sandbox.sh
set -euo pipefail

log() { printf '[sandbox setup] %s\n' "$*"; }

if [[ -x /usr/bin/bwrap ]]; then
  log "bubblewrap ready ($(/usr/bin/bwrap --version))"
  exit 0
fi

if ! command -v apt-get >/dev/null; then
  log "not a Debian system: install bubblewrap (/usr/bin/bwrap) yourself"
  exit 0
fi

sudo=()
if [[ "$(id -u)" != 0 ]]; then
  if ! command -v sudo >/dev/null || ! sudo -n true 2>/dev/null; then
    log "needs root to install bubblewrap; as root run: bash $0"
    exit 0
  fi
  sudo=(sudo -n)
fi

start=$(date +%s)
"${sudo[@]}" apt-get update -qq
"${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends bubblewrap >/dev/null
log "installed $(/usr/bin/bwrap --version) in $(($(date +%s) - start))s"
