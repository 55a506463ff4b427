#!/bin/bash
# The 1 GiB 1%-modified re-push (spec6 "Part deltas" 5): push v0 then v1 --json to a fresh store.
# Usage: [CUTPOINT_BIN=...] scripts/repush-1g.sh [SERVE ARGS...]   (data generated once into $REPUSH_DIR/data, default
# /tmp/pdelta; rm -rf it after). Prints wall and CPU seconds of the client and of the store during
# the v1 push (on a loaded machine the CPU seconds are the steadier figure).
set -e
BIN=${CUTPOINT_BIN:-$(cd "$(dirname "$0")/.." && pwd)/native/target/release/cutpoint}
D=${REPUSH_DIR:-/tmp/pdelta}
mkdir -p $D
if [ ! -f $D/data/v1.bin ]; then
  $BIN gen --out $D/data --size 1g --versions 1 --mods 164 --mod-size 65536 --seed 9
fi
rm -rf $D/store
$BIN serve --data $D/store --listen 127.0.0.1:0 "$@" > $D/serve.out 2> $D/serve.err &
SPID=$!
trap "kill $SPID" EXIT
for i in $(seq 50); do grep -q listening $D/serve.out 2>/dev/null && break; sleep 0.2; done
URL=$(sed -n 's/^cutpoint serve: listening on //p' $D/serve.out | head -1)
echo "store $URL"
$BIN push $D/data/v0.bin --name big --store $URL --json > $D/v0.json
# The store's CPU seconds (utime + stime of /proc/PID/stat, in clock ticks) around the v1 push.
cpu() { awk -v t=$(getconf CLK_TCK) '{printf "%.2f", ($14+$15)/t}' /proc/$SPID/stat; }
S0=$(cpu)
/usr/bin/time -f "v1 push wall %e s, client cpu %U user + %S sys s, max rss %M KiB" $BIN push $D/data/v1.bin --name big --store $URL --json > $D/v1.json
S1=$(cpu)
echo "store cpu during the v1 push: $(python3 -c "print(round($S1-$S0,2))") s"
python3 - <<PY
import json
for v in ("v0","v1"):
    r=json.load(open("$D/%s.json"%v))
    print(v, {k:r[k] for k in ("bytes","chunks","novel_bytes","sent_bytes","pack_bytes","recipe_bytes","parts","parts_sent","parts_delta","base_part_bytes","known_from_base","seconds","ids_held") if k in r}, "sent/novel=%.3f"%(r["sent_bytes"]/max(1,r["novel_bytes"])))
PY
/usr/bin/time -f "stats v1 wall %e s, cpu %U user + %S sys s" $BIN stats $D/data/v1.bin > /dev/null
$BIN pull big --store $URL --output $D/back.bin >/dev/null
cmp $D/back.bin $D/data/v1.bin && echo "pull byte-identical"
rm -f $D/back.bin
