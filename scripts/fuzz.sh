#!/usr/bin/env bash
# Bounded-time fuzzing of native/fuzz (cargo-fuzz, libFuzzer; needs a nightly toolchain):
#   engines  differential chunking: every engine against the reference chunker
#   wire     every parser the store has (packs, deltas, query bodies, recipes, Range headers,
#            names, namespaces, the Authorization header, the tokens file)
# Each target runs FUZZ_SECONDS (default 20) from a corpus in native/fuzz/corpus/ (gitignored;
# it grows from run to run), seeded with the valid bodies of native/store/tests/parsers.rs.
# A crash, a panic, a failed check or a hang (> 10 s on one input) fails this script; the input
# is left in native/fuzz/artifacts/<target>/ (replay: cargo +nightly fuzz run <target> FILE).
#
# Exit status: 0 every target ran clean; 1 a target failed; 3 fuzzing did NOT run (no nightly
# toolchain or no cargo-fuzz): the reason is printed, and scripts/test.sh reports it as not run.
#   FUZZ_SECONDS=N          seconds per target
#   FUZZ_SANITIZER=address  cargo-fuzz's sanitizer (default none: see below)
#   FUZZ_TARGETS="a b"      which targets
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/lib.sh
SECONDS_PER_TARGET="${FUZZ_SECONDS:-20}"
# Default without a sanitizer: an AddressSanitizer build of the store's dependency tree
# (rusqlite's bundled SQLite, ring, tokio, axum) takes too long for the test suite on 2 cores;
# libFuzzer's coverage guidance, Rust's own bounds checks and debug assertions still run.
SANITIZER="${FUZZ_SANITIZER:-none}"
TARGETS="${FUZZ_TARGETS:-engines wire}"

not_run() {
  printf '\n!!! FUZZING DID NOT RUN: %s\n' "$*" >&2
  exit 3
}
have rustup || not_run "rustup not found (cargo-fuzz needs a nightly toolchain)"
rustup toolchain list | grep -q '^nightly' || not_run "no nightly toolchain (install: rustup toolchain install nightly; then scripts/install.sh installs cargo-fuzz)"
cargo +nightly fuzz --version >/dev/null 2>&1 || not_run "cargo-fuzz is not installed (scripts/install.sh installs it when a nightly toolchain is present)"

# The corpus grows from run to run (coverage carries over); past 4000 inputs a target's corpus
# starts again from the seeds, so its loading time stays bounded.
for t in $TARGETS; do
  d="native/fuzz/corpus/$t"
  if [ -d "$d" ] && [ "$(find "$d" -type f | wc -l)" -gt 4000 ]; then rm -rf "$d"; fi
  mkdir -p "$d"
done
# Seeds for the wire target: the valid bodies the parser tests start from.
mkdir -p native/fuzz/corpus/wire
(cd native && CUTPOINT_FUZZ_SEEDS="$PWD/fuzz/corpus/wire" cargo test --release -q -p cutpoint-store --test parsers valid_bodies 2>&1 | tail -n 3)

step "fuzz: build ($TARGETS; sanitizer $SANITIZER, release with debug assertions)"
t0=$(date +%s)
for t in $TARGETS; do
  (cd native/fuzz && cargo +nightly fuzz build -O -a -s "$SANITIZER" "$t")
done
echo "fuzz build: $(( $(date +%s) - t0 )) s"
fail=0
for t in $TARGETS; do
  step "fuzz: $t for ${SECONDS_PER_TARGET} s"
  if (cd native/fuzz && cargo +nightly fuzz run -O -a -s "$SANITIZER" "$t" "corpus/$t" -- \
        -max_total_time="$SECONDS_PER_TARGET" -timeout=10 -rss_limit_mb=4096 -print_final_stats=1 2>&1 | tail -n 60); then
    echo "fuzz: $t clean"
  else
    echo "fuzz: $t FAILED (input in native/fuzz/artifacts/$t/)" >&2
    fail=1
  fi
done
exit $fail
