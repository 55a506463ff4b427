#!/usr/bin/env bash
# Installs the toolchains and packages the project needs on a fresh Debian 12 machine of this
# kind (Rust via rustup and Node 20 are there already). Idempotent: quick when all is present.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/lib.sh
if ! have cargo; then
  echo "cargo not found: install Rust with rustup first" >&2
  exit 1
fi
