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

# An S3-compatible server for the store's tests (versitygw, its posix backend on a temporary
# directory; the tests start it on 127.0.0.1). Built from source with `go install`, pinned.
VERSITYGW_VERSION=v1.8.0
GOBIN_DIR="${CUTPOINT_GOBIN:-$HOME/go/bin}"
if ! have go && [ -x /usr/local/go/bin/go ]; then
  export PATH="$PATH:/usr/local/go/bin"
fi
if [ -x "$GOBIN_DIR/versitygw" ] && "$GOBIN_DIR/versitygw" --version 2>/dev/null | grep -q "${VERSITYGW_VERSION#v}"; then
  :
elif [ -x "$GOBIN_DIR/versitygw" ] && [ -f "$GOBIN_DIR/.versitygw-$VERSITYGW_VERSION" ]; then
  :
else
  if ! have go; then
    echo "go not found: the store's S3 tests need versitygw, built with 'go install' (Go >= 1.24)" >&2
    exit 1
  fi
  step "versitygw $VERSITYGW_VERSION (go install, into $GOBIN_DIR)"
  mkdir -p "$GOBIN_DIR"
  GOBIN="$GOBIN_DIR" go install "github.com/versity/versitygw/cmd/versitygw@$VERSITYGW_VERSION"
  touch "$GOBIN_DIR/.versitygw-$VERSITYGW_VERSION"
fi

# restic, the peer the bench compares pushes with (bench steps "restic" and "folder"), pinned,
# built with `go install` into the same directory; the bench fetches nothing at run time.
RESTIC_VERSION=v0.18.1
if [ -x "$GOBIN_DIR/restic" ] && "$GOBIN_DIR/restic" version 2>/dev/null | grep -q "^restic ${RESTIC_VERSION#v} "; then
  :
else
  if ! have go; then
    echo "go not found: the bench's restic steps need restic, built with 'go install' (Go >= 1.23)" >&2
    exit 1
  fi
  step "restic $RESTIC_VERSION (go install, into $GOBIN_DIR)"
  mkdir -p "$GOBIN_DIR"
  GOBIN="$GOBIN_DIR" go install "github.com/restic/restic/cmd/restic@$RESTIC_VERSION"
fi

# cargo-fuzz for scripts/fuzz.sh (a step of scripts/test.sh), pinned; only where a nightly
# toolchain is present (libFuzzer needs nightly's -Z flags). Without nightly, fuzz.sh says
# plainly that fuzzing did not run.
CARGO_FUZZ_VERSION=0.13.2
if have rustup && rustup toolchain list | grep -q '^nightly'; then
  if ! cargo fuzz --version 2>/dev/null | grep -qx "cargo-fuzz $CARGO_FUZZ_VERSION"; then
    step "cargo-fuzz $CARGO_FUZZ_VERSION (cargo install --locked)"
    cargo install --locked cargo-fuzz --version "$CARGO_FUZZ_VERSION"
  fi
else
  echo "install: no nightly Rust toolchain: cargo-fuzz not installed, fuzzing will not run (rustup toolchain install nightly)" >&2
fi
