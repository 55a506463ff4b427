#!/usr/bin/env bash
# Links the two CLIs into bin/ (not committed), after they are built:
#   bin/cutpoint     -> native/target/release/cutpoint
#   bin/cutpoint-js  -> web/dist/web/src/cli/main.js (made executable)
# and node_modules/.bin/cutpoint-js (the workspace's bin: npm links it only when web/dist exists
# at install time), so that `npx --no-install cutpoint-js` finds it and never asks the registry.
# `export PATH="$PWD/bin:$PATH"` in the clone puts both on PATH. Idempotent.
set -euo pipefail
cd "$(dirname "$0")/.."
js=web/dist/web/src/cli/main.js
native=native/target/release/cutpoint
mkdir -p bin
if [ -x "$native" ]; then ln -sfn "../$native" bin/cutpoint; fi
if [ -f "$js" ]; then
  chmod +x "$js"
  ln -sfn "../$js" bin/cutpoint-js
  if [ -d node_modules/.bin ]; then ln -sfn "../@cutpoint/web/dist/web/src/cli/main.js" node_modules/.bin/cutpoint-js; fi
fi
