#!/usr/bin/env bash
# One command on a fresh machine: install and build everything a user is told about, then run the
# main job on the embedded store.
#   - the toolchains and packages (scripts/install.sh, scripts/install-js.sh; quick when present);
#   - the native CLI (release), both wasm builds, the TypeScript library and `cutpoint-js`, the
#     web page (web/app/dist); bin/cutpoint and bin/cutpoint-js linked (scripts/link-bins.sh);
#   - the main job: start `cutpoint serve` on a temporary directory (127.0.0.1, a free port), push
#     a generated versioned dataset version by version (each version sends only the chunks the
#     store lacks), pull one version back and compare it byte for byte, then stop the store.
# Idempotent: a second run rebuilds only what changed.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/lib.sh

step "install prerequisites (native)"
bash scripts/install.sh
step "install prerequisites (WebAssembly, npm packages, chromium)"
bash scripts/install-js.sh
step "build the native CLI (release)"
(cd native && cargo build --release -p cutpoint-cli)
bin=native/target/release/cutpoint
step "build the WebAssembly modules and the TypeScript library (with cutpoint-js)"
bash scripts/build-wasm.sh
npm run build -w web
step "build the edge store's WebAssembly module (edge/pkg)"
bash scripts/build-edge.sh
step "build the web page (web/app/dist)"
npm run build:app
step "link bin/cutpoint and bin/cutpoint-js"
bash scripts/link-bins.sh
data=bench/data/sample
step "generate a versioned dataset in $data (base 64 MiB + 4 versions, 1000 edits each)"
"$bin" gen --out "$data" --size 64m --versions 4 --mods 1000 --seed 1
"$bin" backends

store=$(mktemp -d "${TMPDIR:-/tmp}/cutpoint-store.XXXXXX")
log="$store.log"
step "start the store: cutpoint serve --data $store --listen 127.0.0.1:0"
"$bin" serve --data "$store" --listen 127.0.0.1:0 >"$log" 2>&1 &
server=$!
cleanup() { kill "$server" 2>/dev/null || true; wait "$server" 2>/dev/null || true; rm -rf "$store" "$log"; }
trap cleanup EXIT
for _ in $(seq 1 100); do grep -q 'listening on' "$log" && break; sleep 0.1; done
url=$(sed -n 's/^cutpoint serve: listening on //p' "$log")
[ -n "$url" ] || { cat "$log" >&2; echo "the store did not start" >&2; exit 1; }
cat "$log"

step "push the versions in order under one name (processed vs sent on the wire)"
for f in "$data"/v*.bin; do
  "$bin" push "$f" --name sample.bin --store "$url"
done
"$bin" ls --store "$url"

step "pull version 3 back, verified, and compare it with $data/v2.bin"
out="$store/pulled-v3.bin"
"$bin" pull sample.bin --version 3 -o "$out" --store "$url"
cmp "$out" "$data/v2.bin"
echo "byte-identical"
"$bin" check --store "$url"
step "stop the store"
cleanup
trap - EXIT

step "set up; next steps"
cat <<MSG
The CLIs are linked in bin/: put them on PATH from this directory with
  export PATH="\$PWD/bin:\$PATH"
(or install the native one into ~/.cargo/bin: cargo install --path native/cli).
  cutpoint serve --data ~/cutpoint-store --cors-origin http://127.0.0.1:5173
                                                  a store on http://127.0.0.1:7373 that the page may call
  cutpoint push FILE --name NAME                  push (only novel chunks travel); cutpoint --help
  cutpoint-js push FILE --name NAME               the same from Node (npx --no-install cutpoint-js from here)
  npm run dev                                     the web page: open the URL it prints
The quick start: README.md; every command: docs/cli.md and web/README.md.
MSG
