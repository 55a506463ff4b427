#!/usr/bin/env bash
# One command on a fresh machine: install, build, generate a small versioned dataset, and run
# the main job on it (`cutpoint stats`: chunks, average size, dedup ratio, throughput, backend).
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
step "cutpoint stats over the versions, in order (each deduplicated against those before it)"
"$bin" backends
"$bin" stats "$data"/v*.bin
