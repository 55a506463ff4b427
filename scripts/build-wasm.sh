#!/usr/bin/env bash
# Builds the WebAssembly modules and their wasm-bindgen glue (not committed):
#   wasm/pkg-plain/            no SIMD;
#   wasm/pkg-simd128/          simd128;
#   wasm/pkg-simd128-relaxed/  the same with relaxed-simd (`i8x16.relaxed_swizzle`: one `pshufb`
#                              on x64 where `i8x16.swizzle` is two instructions); the loader
#                              picks it instead of pkg-simd128 where the engine validates it.
# Same source and same results; the stage-1 kernel only ever swizzles indices below 16.
# Needs the wasm32 target and the wasm-bindgen CLI at the exact version of the crate (scripts/install-js.sh installs both).
# wasm-opt (npm `binaryen`, a dev dependency) runs when it is installed; CUTPOINT_WASM_OPT=0 skips it.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/lib.sh
want=$(sed -n 's/^wasm-bindgen = "=\(.*\)"/\1/p' wasm/Cargo.toml)
have_v=$(wasm-bindgen --version 2>/dev/null | awk '{print $2}' || true)
if [ "$have_v" != "$want" ]; then
  echo "wasm-bindgen CLI $want is needed (found '${have_v:-none}'): run scripts/install-js.sh" >&2
  exit 1
fi
build() { # flavor rustflags features
  local flavor=$1 flags=$2 feats=$3
  step "wasm: cargo build ($flavor)"
  (cd wasm && RUSTFLAGS="$flags" CARGO_TARGET_DIR="target/$flavor" \
     cargo build --target wasm32-unknown-unknown --release $feats)
  rm -rf "wasm/pkg-$flavor"
  wasm-bindgen --target web --out-dir "wasm/pkg-$flavor" \
    "wasm/target/$flavor/wasm32-unknown-unknown/release/cutpoint_wasm.wasm"
  local opt=node_modules/.bin/wasm-opt
  if [ "${CUTPOINT_WASM_OPT:-1}" != 0 ] && [ -x "$opt" ]; then
    local extra=""
    case $flavor in simd128) extra="--enable-simd" ;; simd128-relaxed) extra="--enable-simd --enable-relaxed-simd" ;; esac
    "$opt" -O3 $extra --enable-bulk-memory --enable-nontrapping-float-to-int --enable-sign-ext \
      --enable-mutable-globals --enable-reference-types --enable-multivalue \
      "wasm/pkg-$flavor/cutpoint_wasm_bg.wasm" -o "wasm/pkg-$flavor/cutpoint_wasm_bg.wasm"
  fi
  ls -l "wasm/pkg-$flavor/cutpoint_wasm_bg.wasm"
}
build plain "" ""
build simd128 "-C target-feature=+simd128" "--features simd"
build simd128-relaxed "-C target-feature=+simd128,+relaxed-simd" "--features simd"
