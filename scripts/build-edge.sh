#!/usr/bin/env bash
# Builds the edge store's WebAssembly module (edge/wasm: cutpoint-core's protocol logic for the
# Worker) and its wasm-bindgen glue into edge/pkg/ (not committed). The Worker (edge/src) imports
# it; `npm run edge` and tests/js/edge.test.ts need it. Needs what scripts/build-wasm.sh needs
# (the wasm32 target, the wasm-bindgen CLI at the pinned version, clang for zstd).
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/lib.sh
want=$(sed -n 's/^wasm-bindgen = "=\(.*\)"/\1/p' edge/wasm/Cargo.toml)
have_v=$(wasm-bindgen --version 2>/dev/null | awk '{print $2}' || true)
if [ "$have_v" != "$want" ]; then
  echo "wasm-bindgen CLI $want is needed (found '${have_v:-none}'): run scripts/install-js.sh" >&2
  exit 1
fi
step "edge wasm: cargo build"
(cd edge/wasm && cargo build --target wasm32-unknown-unknown --release)
rm -rf edge/pkg
# --target experimental-nodejs-module would import node:fs; the Worker gets the module from its
# bundle (a CompiledWasm module rule), so the glue is built for a bundler-less ES module host.
wasm-bindgen --target web --out-dir edge/pkg edge/wasm/target/wasm32-unknown-unknown/release/cutpoint_edge_wasm.wasm
ls -l edge/pkg/cutpoint_edge_wasm_bg.wasm
