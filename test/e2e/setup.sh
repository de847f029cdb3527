#!/usr/bin/env bash
# Installs what the end-to-end tests need: Debian's chromium (driven by playwright-core), and
# code-server (VS Code served to that browser) from test/e2e/code-server/package-lock.json with
# its native modules built here. Idempotent: a stamp records what was installed, and a second
# run that finds everything in place returns in well under a second.
#
# Why not code-server's own postinstall: it runs `npm install` in lib/vscode with scripts on,
# and @vscode/ripgrep's script downloads its binary from outside the npm registry, which this
# machine (and CI) cannot reach. So we install with scripts off and redo the postinstall's
# steps here, building each native module with node-gyp against the local Node headers and
# putting Debian's rg where @vscode/ripgrep looks for its binary.
#
# Usage: bash test/e2e/setup.sh [--force]     (--force reinstalls code-server from scratch)
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
pkg="$here/code-server"
modules="$pkg/node_modules"
cs="$modules/code-server"
vscode="$cs/lib/vscode"
stamp="$modules/.troupe-e2e-setup.stamp"
logs="$pkg/.setup-logs" # kept out of node_modules: npm ci empties that first

# VS Code's native modules under lib/vscode (the install scripts we skip would build them).
# The Windows-only ones (@vscode/windows-*) are never loaded on Linux and are left unbuilt.
native_modules=(@vscode/spdlog kerberos native-watchdog node-pty @vscode/deviceid)

t_start=$(date +%s)
t_step=$t_start
step() {
  local now
  now=$(date +%s)
  printf '[e2e setup] %-58s %4ss (total %ss)\n' "$1" "$((now - t_step))" "$((now - t_start))"
  t_step=$now
}
die() {
  printf '[e2e setup] error: %s\n' "$*" >&2
  exit 1
}
# Runs a command with its output in a log file, printing the log's tail if it fails.
logged() {
  local name="$1"
  shift
  mkdir -p "$logs"
  if ! "$@" >"$logs/$name.log" 2>&1; then
    printf '[e2e setup] error: %s failed; the last lines of %s:\n' "$*" "$logs/$name.log" >&2
    tail -n 40 "$logs/$name.log" >&2
    exit 1
  fi
}

# Runs a command in a directory, in a subshell so the caller's directory stays as it was.
in_dir() {
  local dir="$1"
  shift
  (cd "$dir" && "$@")
}

force=false
case "${1-}" in
  --force) force=true ;;
  '') ;;
  *) die "unknown argument '$1' (usage: setup.sh [--force])" ;;
esac

# --- Node -------------------------------------------------------------------------------------
node_version="$(node --version)"
# code-server 4.100.x supports Node 20 only (later code-server releases need Node 22).
[[ "$node_version" == v20.* ]] ||
  die "code-server 4.100.3 needs Node 20; found $node_version"

# --- Debian packages ----------------------------------------------------------------------------
missing=()
command -v chromium >/dev/null || missing+=(chromium)
command -v rg >/dev/null || missing+=(ripgrep)
dpkg -s libkrb5-dev >/dev/null 2>&1 || missing+=(libkrb5-dev) # kerberos' headers (gssapi)
command -v make >/dev/null || missing+=(make)
command -v g++ >/dev/null || missing+=(g++)
command -v python3 >/dev/null || missing+=(python3) # node-gyp
if ((${#missing[@]} > 0)); then
  sudo=()
  if [[ "$(id -u)" != 0 ]]; then
    command -v sudo >/dev/null ||
      die "missing Debian packages (${missing[*]}); install them as root: apt-get install ${missing[*]}"
    sudo=(sudo)
  fi
  echo "[e2e setup] installing Debian packages: ${missing[*]}"
  logged apt-update "${sudo[@]}" apt-get update
  logged apt-install "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive \
    apt-get install -y --no-install-recommends "${missing[@]}"
  step "apt-get install ${missing[*]}"
fi

# --- code-server ----------------------------------------------------------------------------------
# One install at a time: test processes started together would otherwise both reinstall,
# each deleting the other's tree. The second waits, then finds the stamp and returns.
exec 9>"$pkg/.setup.lock"
flock 9
# The stamp names everything the installed tree depends on: the lock file, this script, and
# the Node version the native modules were built for.
want_stamp="$(cat "$pkg/package-lock.json" "${BASH_SOURCE[0]}" | sha256sum | cut -d' ' -f1) node $node_version"
if ! $force && [[ -f "$stamp" && "$(cat "$stamp")" == "$want_stamp" ]]; then
  step "code-server already installed (stamp matches)"
  exit 0
fi

# Native modules build against the headers of the Node that runs them: Debian's Node has
# them in /usr/include/node (npm's nodedir). Without local headers node-gyp would try to
# download them, which fails offline.
node_prefix="$(dirname "$(dirname "$(readlink -f "$(command -v node)")")")"
[[ -f "$node_prefix/include/node/node_api.h" ]] ||
  die "no Node headers in $node_prefix/include/node (needed to build native modules offline)"
export npm_config_nodedir="$node_prefix"
# The node-gyp that npm itself uses for install scripts.
node_gyp="$(dirname "$(readlink -f "$(command -v npm)")")/../node_modules/node-gyp/bin/node-gyp.js"
[[ -f "$node_gyp" ]] || die "npm's bundled node-gyp is not at $node_gyp"

rm -rf "$modules" "$logs"
# Scripts off: code-server's postinstall is replaced by the steps below, and argon2's would
# try a download before falling back to building.
logged npm-ci in_dir "$pkg" npm ci --ignore-scripts --no-audit --no-fund
step "npm ci code-server (from package-lock.json)"

# argon2 hashes passwords; code-server loads it at start-up even with --auth none. Its
# install script (`node-pre-gyp install --fallback-to-build`) would try a download first;
# `node-pre-gyp rebuild` only builds, with the node-gyp named by npm_config_node_gyp, and
# puts the binary where argon2 loads it from (lib/binding/napi-v3).
node_pre_gyp="$(cd "$modules/argon2" && node -p "require.resolve('@mapbox/node-pre-gyp/bin/node-pre-gyp')")"
logged argon2 in_dir "$modules/argon2" env npm_config_node_gyp="$node_gyp" node "$node_pre_gyp" rebuild
step "build argon2"

# VS Code's dependencies, from the npm-shrinkwrap.json that code-server ships. VS Code's
# own repository installs with legacy-peer-deps, and the shrinkwrap was written that way:
# without it npm ci finds a peer dependency (tslib) the shrinkwrap lacks and refuses.
vscode_ci=(npm ci --omit=dev --ignore-scripts --legacy-peer-deps --no-audit --no-fund)
logged vscode-npm-ci in_dir "$vscode" "${vscode_ci[@]}"
logged vscode-extensions-npm-ci in_dir "$vscode/extensions" "${vscode_ci[@]}"
# The extensions' own postinstall: trims the TypeScript they share to what they load.
logged vscode-extensions-postinstall in_dir "$vscode/extensions" node postinstall.mjs
step "npm ci lib/vscode and lib/vscode/extensions"

for module in "${native_modules[@]}"; do
  logged "node-gyp-${module//\//-}" in_dir "$vscode/node_modules/$module" node "$node_gyp" rebuild --jobs=max
done
step "node-gyp ${native_modules[*]}"

# The rest of code-server's postinstall: Debian's ripgrep in place of the downloaded one
# (VS Code's search and the JSON/TS servers find it through @vscode/ripgrep's rgPath), the
# node_modules.asar alias VS Code resolves some modules through, and the CLI helper scripts.
mkdir -p "$vscode/node_modules/@vscode/ripgrep/bin"
ln -sfn "$(command -v rg)" "$vscode/node_modules/@vscode/ripgrep/bin/rg"
ln -sfn node_modules "$vscode/node_modules.asar"
ln -sfn code-linux.sh "$vscode/bin/remote-cli/code-server"
ln -sfn browser-linux.sh "$vscode/bin/helpers/browser.sh"

# A cheap check that the server starts: --version loads the CLI, argon2 included.
version="$(node "$cs/out/node/entry.js" --version 2>&1)" ||
  die "code-server does not start after install: $version"
step "link rg, node_modules.asar, CLI helpers; $(head -n1 <<<"$version" | cut -d' ' -f1-2)"

echo "$want_stamp" >"$stamp"
echo "[e2e setup] done in $(($(date +%s) - t_start))s"
