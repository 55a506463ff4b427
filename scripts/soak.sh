#!/usr/bin/env bash
# The store's fault / load campaign at larger counts (opt-in; `npm test` runs it small):
# 100 pushes with SIGKILLs of the store at random points (local directory and S3 bucket),
# 32 clients at once through two nodes of one bucket, 64 commits of one name at once through
# two nodes, connections cut mid-pack and mid-commit. Prints the figures each test measures.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/lib.sh
bash scripts/install.sh
step "soak: native/cli/tests/scale.rs with CUTPOINT_SOAK=1"
(cd native && CUTPOINT_SOAK=1 cargo test --release -p cutpoint-cli --test scale -- --nocapture --test-threads 1 2>&1)
