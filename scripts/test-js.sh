#!/usr/bin/env bash
# WebAssembly + TypeScript + browser + Deno tests. Works on a fresh machine: installs what it
# needs first (scripts/install-js.sh), builds both wasm modules and the library, then runs Vitest:
#   tests/js/node.test.ts, init.test.ts   Node 20, worker_threads
#   tests/js/reads.test.ts                how a worker reads a Blob (BYOB reads into reused buffers)
#   tests/js/browser.test.ts              headless Debian chromium through playwright-core
#   tests/js/deno.test.ts                 Deno (npm package `deno`) running tests/deno/vectors.js
#   tests/js/client.test.ts, cli.test.ts  the store client and cutpoint-js (Node, Deno) against a
#                                         real `cutpoint serve` (tests/js/store.ts starts it)
#   tests/js/web-app.test.ts              the web page (web/app, Vite build) in chromium against
#                                         real `cutpoint serve`s; screenshots in tests/artifacts/
#   tests/js/web-journal.test.ts          the push journal (IndexedDB): a push cut off by a page
#                                         reload resumes without re-sending what was stored
#   tests/js/edge.test.ts                 one suite against `cutpoint serve` and the edge store
#                                         (edge/, workerd through miniflare); two Worker instances
#                                         over one bucket
#   tests/js/edge-page.test.ts            the web page in chromium pushing through the edge store
#   tests/js/readme.test.ts               the README's quick start, as written, against a store on
#                                         127.0.0.1 (a free port)
# The >= 1 GiB picked-File browser test runs too (CUTPOINT_BIG=0 skips it; CUTPOINT_BIG_SIZE=2g,
# CUTPOINT_BIG_WORKERS=1,2 and CUTPOINT_BIG_OUT=FILE.json change or record it).
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/lib.sh

bash scripts/install-js.sh

step "build: wasm (simd128 + plain) and the TypeScript library"
bash scripts/build-wasm.sh
npm run build -w web
bash scripts/build-edge.sh

# The store client's tests (tests/js/client.test.ts, cli.test.ts) start a real `cutpoint serve`.
if [ ! -x native/target/release/cutpoint ]; then
  step "build: the native cutpoint (the store the client tests talk to)"
  (cd native && cargo build --release -p cutpoint-cli)
fi

# bin/cutpoint, bin/cutpoint-js (the README's quick start, tests/js/readme.test.ts, runs them).
bash scripts/link-bins.sh

step "vitest: Node, Chromium, Deno"
# `cutpoint push` of several files keeps a push cache under $XDG_CACHE_HOME: a temporary one, not the user's.
XDG_CACHE_HOME=$(mktemp -d "${TMPDIR:-/tmp}/cutpoint-test-cache.XXXXXX")
export XDG_CACHE_HOME
trap 'rm -rf "$XDG_CACHE_HOME"' EXIT
export DENO_NO_UPDATE_CHECK=1
npx vitest run
