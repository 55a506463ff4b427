#!/usr/bin/env bash
# `npm run bench [-- --quick] [-- --out DIR]`: one run of every benchmark on this machine
# (bench/harness/run.mjs says what and how), written as bench/results/<host>-<date>.json, a
# Markdown table file and SVG plots beside it; a full run into bench/results also regenerates the
# performance section of docs/performance.md. `--quick` uses tiny sizes (CI runs it only to prove the harness
# still works; it asserts no speed). Also runnable alone:
#   bench/families.sh (how the default profile was chosen), bench/memory.sh 8g (peak RSS).
# CUTPOINT_BENCH_REBUILD=0 skips rebuilding the wasm modules and web/dist when they exist (the
# bench test sets it: scripts/test-js.sh has just built them).
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/lib.sh
bash scripts/install.sh
bash scripts/install-js.sh
step "build: native release + examples, wasm (simd128 + plain), web library"
(cd native && cargo build --release --workspace --examples 2>&1 | grep -v '^\s*\(Compiling\|Finished\)' || true)
[ -x native/target/release/examples/bench_rows ] || { echo "bench: native build failed" >&2; exit 1; }
if [ ! -f web/dist/web/src/index.js ] || [ ! -f web/dist/wasm/simd128/cutpoint_wasm_bg.wasm ] || [ "${CUTPOINT_BENCH_REBUILD:-1}" = 1 ]; then
  if ! { bash scripts/build-wasm.sh && npm run build -w web >/dev/null; }; then
    [ -f web/dist/web/src/index.js ] || { echo "bench: wasm/web build failed" >&2; exit 1; }
    echo "bench: WARNING: wasm/web rebuild failed; measuring the existing web/dist" >&2
  fi
fi
step "bench"
node bench/harness/run.mjs "$@"
