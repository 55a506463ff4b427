#!/usr/bin/env bash
# Load figures of one store node, over a local directory and over an S3 bucket (versitygw on
# 127.0.0.1, posix backend on a temporary directory): pack ingest (a first push of a random
# file) in MB/s with the node's CPU seconds per GiB, and existence queries per second (bodies
# of 16,384 ids: all present, then all absent, which in a bucket lists the namespace's packs).
# Usage: bash bench/scale-load.sh [SIZE_MIB=256] [QUERIES=50]. Needs `npm run build` (or
# cargo build --release -p cutpoint-cli) and scripts/install.sh (versitygw).
set -euo pipefail
cd "$(dirname "$0")/.."
SIZE=${1:-256}
QUERIES=${2:-50}
BIN=native/target/release/cutpoint
VGW=${CUTPOINT_VERSITYGW:-${CUTPOINT_GOBIN:-$HOME/go/bin}/versitygw}
T=$(mktemp -d)
PIDS=()
cleanup() { for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done; rm -rf "$T"; }
trap cleanup EXIT
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
cpu_s() { awk '{print ($14+$15)/100}' "/proc/$1/stat"; }

"$BIN" gen --stream --size "${SIZE}m" --seed 17 > "$T/file"
"$BIN" chunk "$T/file" --format jsonl | python3 -c '
import sys, json
out = open(sys.argv[1], "wb")
n = 0
for line in sys.stdin:
    if n == 16384: break
    out.write(bytes.fromhex(json.loads(line)["hash"])); n += 1
' "$T/present.ids"
head -c $((16384 * 32)) /dev/urandom > "$T/absent.ids"

mkdir -p "$T/s3/bench"
VPORT=$(free_port)
"$VGW" --access benchkey --secret benchsecret0123 --port "127.0.0.1:$VPORT" posix "$T/s3" >/dev/null 2>&1 &
PIDS+=($!)
sleep 2

run() { # label, serve args...
  local label=$1; shift
  local port; port=$(free_port)
  AWS_ACCESS_KEY_ID=benchkey AWS_SECRET_ACCESS_KEY=benchsecret0123 AWS_REGION=us-east-1 \
    "$BIN" serve "$@" --listen "127.0.0.1:$port" >/dev/null 2>&1 &
  local pid=$!
  PIDS+=($pid)
  for _ in $(seq 100); do curl -s "http://127.0.0.1:$port/v1" >/dev/null && break; sleep 0.1; done
  local c0 t0 t1 c1
  c0=$(cpu_s $pid); t0=$(date +%s.%N)
  "$BIN" push "$T/file" --name f --store "http://127.0.0.1:$port" --json >/dev/null
  t1=$(date +%s.%N); c1=$(cpu_s $pid)
  python3 -c "import sys; s,c=float(sys.argv[2])-float(sys.argv[1]),float(sys.argv[4])-float(sys.argv[3]); n=$SIZE/1024; print(f'$label: first push of $SIZE MiB: {s:.2f} s, {$SIZE*1.048576/s:.0f} MB/s, node CPU {c:.2f} s = {c/n:.2f} CPU s/GiB')" "$t0" "$t1" "$c0" "$c1"
  for kind in present absent; do
    t0=$(date +%s.%N); c0=$(cpu_s $pid)
    for _ in $(seq "$QUERIES"); do
      curl -s -o /dev/null -X POST --data-binary "@$T/$kind.ids" "http://127.0.0.1:$port/v1/ns/default/query"
    done
    t1=$(date +%s.%N); c1=$(cpu_s $pid)
    python3 -c "import sys; s=float(sys.argv[2])-float(sys.argv[1]); c=float(sys.argv[4])-float(sys.argv[3]); print(f'$label: {$QUERIES} queries of 16384 ids, all $kind: {$QUERIES/s:.1f} queries/s = {$QUERIES*16384/s:,.0f} ids/s, node CPU {c/$QUERIES*1000:.1f} ms/query')" "$t0" "$t1" "$c0" "$c1"
  done
  kill $pid
}
run local --data "$T/local"
run s3 --data s3://bench/p --s3-endpoint "http://127.0.0.1:$VPORT" --cache "$T/cache"
