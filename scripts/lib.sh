# Shared helpers for the scripts.
step() { printf '\n==> %s\n' "$*"; }
have() { command -v "$1" >/dev/null 2>&1; }
export CARGO_TERM_COLOR=never
[ -f "$HOME/.cargo/env" ] && source "$HOME/.cargo/env"
