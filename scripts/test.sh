#!/usr/bin/env bash
# Runs every test. Works on a fresh machine: installs what it needs first (idempotent).
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/lib.sh

step "install prerequisites"
bash scripts/install.sh

step "native: cargo test (all backends this CPU has, forced one by one)"
(cd native && cargo test --workspace --release 2>&1)

# JavaScript / WebAssembly / browser steps are added by their areas below.
if [ -f scripts/test-js.sh ]; then
  step "wasm + TypeScript + browser"
  bash scripts/test-js.sh
fi
step "all tests passed"
