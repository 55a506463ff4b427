#!/usr/bin/env bash
# Runs the benchmarks that exist so far, in one run on this machine, and keeps the output in
# bench/results/<host>-<date>.txt. `--quick` uses small sizes (CI runs it only to prove the
# harness still works; it asserts no speed).
#   native speed table (examples/speed: kernels, SS-CDC vs sequential, vs fastcdc, vs memcpy, 2 threads)
#   family comparison on real + synthetic versioned data (bench/families.sh)
#   peak memory chunking a generated stream from stdin (bench/memory.sh)
#   RapidCDC figures (examples/rapid_bench), MT-FBC (examples/mtfbc_bench)
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/lib.sh
quick=0; [ "${1:-}" = --quick ] && quick=1
mkdir -p bench/results
out="bench/results/$(hostname)-$(date -u +%Y-%m-%d).txt"
bash scripts/install.sh
(cd native && cargo build --release --workspace --examples)
{
  echo "# cutpoint benchmarks — $(date -u +%FT%TZ)"
  echo "cpu: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), cores: $(nproc)"
  echo "rustc: $(rustc --version)"
  if [ $quick = 1 ]; then export CUTPOINT_MIB=8 CUTPOINT_REPS=3; fi
  step "speed (native kernels and engine)"
  native/target/release/examples/speed
  step "families (how the default profile was chosen)"
  bash bench/families.sh
  step "memory"
  if [ $quick = 1 ]; then bash bench/memory.sh 256m; else bash bench/memory.sh 8g; fi
  step "RapidCDC"
  if [ $quick = 1 ]; then CUTPOINT_FILES=4 native/target/release/examples/rapid_bench; else native/target/release/examples/rapid_bench; fi
  step "MT-FBC"
  if [ $quick = 1 ]; then native/target/release/examples/mtfbc_bench --quick; else native/target/release/examples/mtfbc_bench; fi
} 2>&1 | tee "$out"
echo "wrote $out"
