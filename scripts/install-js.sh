#!/usr/bin/env bash
# Installs what the WebAssembly / TypeScript / browser / Deno steps need on a fresh Debian 12
# machine (Rust via rustup and Node 20 are there already). Idempotent: quick when all is present.
#   - the wasm32-unknown-unknown Rust target;
#   - the wasm-bindgen CLI at exactly the version wasm/Cargo.toml pins (cargo install, ~2-5 min);
#   - Debian's chromium (apt-get) when /usr/bin/chromium is missing;
#   - Debian's clang (apt-get) when it is missing: the zstd codec (C, the `zstd` crate) is
#     compiled for wasm32 with it (docs/performance.md, "Chunk codecs", says why zstd's C);
#   - the npm packages of package-lock.json (npm ci): TypeScript 5, Vitest 3, Vite 7,
#     playwright-core, deno (its binary comes as an optional dependency), binaryen (wasm-opt),
#     hash-wasm (benchmark rival). npm 11 skips dependency install scripts; none is needed.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/lib.sh

if ! have cargo || ! have rustup; then
  echo "cargo/rustup not found: install Rust with rustup first" >&2
  exit 1
fi
if ! rustup target list --installed | grep -qx wasm32-unknown-unknown; then
  step "rustup target add wasm32-unknown-unknown"
  rustup target add wasm32-unknown-unknown
fi

want=$(sed -n 's/^wasm-bindgen = "=\(.*\)"/\1/p' wasm/Cargo.toml)
have_v=$(wasm-bindgen --version 2>/dev/null | awk '{print $2}' || true)
if [ "$have_v" != "$want" ]; then
  step "cargo install wasm-bindgen-cli --version $want (found '${have_v:-none}')"
  cargo install wasm-bindgen-cli --version "$want" --force
fi

if [ ! -x /usr/bin/chromium ]; then
  step "apt-get install chromium"
  SUDO=""; [ "$(id -u)" != 0 ] && SUDO=sudo
  $SUDO apt-get update
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y chromium
fi

if ! have clang; then
  step "apt-get install clang (zstd for wasm32)"
  SUDO=""; [ "$(id -u)" != 0 ] && SUDO=sudo
  $SUDO apt-get update
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y clang
fi

if ! have node; then
  echo "node not found: Node 20 is expected on this machine" >&2
  exit 1
fi
if [ ! -f node_modules/.package-lock.json ] || [ package-lock.json -nt node_modules/.package-lock.json ] \
   || [ ! -x node_modules/.bin/vitest ] || [ ! -x node_modules/.bin/deno ]; then
  step "npm ci"
  # npm ci refuses a lock file that lacks other platforms' optional packages (this machine's npm
  # config writes such locks); npm install --no-save then installs the locked versions.
  npm ci --no-audit --no-fund || npm install --no-save --no-audit --no-fund
fi

# Benchmark-only packages (bench/package.json, its own lock; not the library's dependencies): the
# npm peers `npm run bench` measures (@huggingface/xetchunk-wasm, @dstanesc/wasm-chunking-fastcdc-node,
# rabin-wasm) and vega + vega-lite for its SVG plots. Pinned exact versions.
if [ ! -f bench/node_modules/.package-lock.json ] || [ bench/package-lock.json -nt bench/node_modules/.package-lock.json ] \
   || [ ! -d bench/node_modules/vega-lite ]; then
  step "npm ci (bench/)"
  (cd bench && { npm ci --no-audit --no-fund || npm install --no-save --no-audit --no-fund; })
fi
