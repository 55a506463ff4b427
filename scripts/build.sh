#!/usr/bin/env bash
# Builds everything: the native CLI (release), both wasm modules, the TypeScript library and the
# web page (a static site in web/app/dist).
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/lib.sh
bash scripts/install.sh
step "native: cargo build --release"
(cd native && cargo build --release --workspace)
bash scripts/install-js.sh
step "wasm (simd128 + plain) and the TypeScript library"
bash scripts/build-wasm.sh
bash scripts/build-edge.sh
npm run build -w web
step "the web page (Vite): web/app/dist"
npm run build:app
bash scripts/link-bins.sh
