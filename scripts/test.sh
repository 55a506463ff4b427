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

# Bounded-time fuzzing (cargo-fuzz; needs nightly): each target FUZZ_SECONDS (default 20).
step "fuzz: native/fuzz targets for a bounded time (scripts/fuzz.sh)"
fuzz_note=""
set +e
bash scripts/fuzz.sh
fuzz_rc=$?
set -e
case $fuzz_rc in
  0) ;;
  3) fuzz_note=" -- but FUZZING DID NOT RUN (see the fuzz step above)" ;;
  *) echo "fuzzing failed" >&2; exit 1 ;;
esac
step "all tests passed$fuzz_note"
