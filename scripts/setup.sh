#!/usr/bin/env bash
# One command on a fresh machine: install, build, and run the main job on the embedded store:
# start `cutpoint serve` on a temporary directory (127.0.0.1, a free port), push a generated
# versioned dataset version by version (each version sends only the chunks the store lacks),
# pull one version back and compare it byte for byte, then stop the store.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/lib.sh

step "install prerequisites"
bash scripts/install.sh
step "build the native CLI (release)"
(cd native && cargo build --release -p cutpoint-cli)
bin=native/target/release/cutpoint
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
