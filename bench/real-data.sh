#!/usr/bin/env bash
# Real versioned data from a registry this machine reaches: successive releases of an npm
# package, unpacked to uncompressed tar files (compression would hide the redundancy).
# Usage: bench/real-data.sh [PACKAGE] [VERSION...]   -> prints the .tar paths, oldest first.
# Default: typescript 5.4.2 5.4.3 5.4.4 5.4.5 (about 32 MB each). Cached in bench/data/real/.
set -euo pipefail
cd "$(dirname "$0")/.."
pkg=${1:-typescript}
shift || true
versions=("$@")
[ ${#versions[@]} -gt 0 ] || versions=(5.4.2 5.4.3 5.4.4 5.4.5)
dir=bench/data/real/$pkg
mkdir -p "$dir"
for v in "${versions[@]}"; do
  tar="$dir/$pkg-$v.tar"
  if [ ! -s "$tar" ]; then
    tgz=$(cd "$dir" && npm pack "$pkg@$v" --silent 2>/dev/null | tail -n1)
    gunzip -c "$dir/$tgz" > "$tar.tmp" && mv "$tar.tmp" "$tar" && rm -f "$dir/$tgz"
  fi
  echo "$tar"
done
