#!/usr/bin/env bash
# How the default profile was chosen: speed (one thread, fingerprints on) and dedup ratio of
# each family at the same MIN/AVG/MAX, on real versioned data (bench/real-data.sh) and on a
# synthetic versioned dataset (cutpoint gen). Prints one line per profile.
set -euo pipefail
cd "$(dirname "$0")/.."
bin=native/target/release/cutpoint
[ -x "$bin" ] || (cd native && cargo build --release -p cutpoint-cli)
mapfile -t real < <(bash bench/real-data.sh)
syn=bench/data/families-syn
[ -f "$syn/v4.bin" ] || "$bin" gen --out "$syn" --size 32m --versions 4 --mods 1000 --seed 3 >/dev/null
printf '%-24s %12s %10s %12s %10s\n' profile real-dedup real-MB/s synth-dedup synth-MB/s
for p in crc32:2k:8k:64k rabin:2k:8k:64k gear:2k:8k:64k:nc=0 gear:2k:8k:64k:nc=1 gear:2k:8k:64k gear:2k:8k:64k:nc=3; do
  r=$("$bin" stats -t 1 -p "$p" --json "${real[@]}")
  s=$("$bin" stats -t 1 -p "$p" --json "$syn"/v*.bin)
  node -e '
    const [p, r, s] = [process.argv[1], JSON.parse(process.argv[2]), JSON.parse(process.argv[3])];
    const f = (x) => x.total;
    const mbs = (x) => x.files.reduce((a, b) => a + b.bytes, 0) / x.files.reduce((a, b) => a + b.seconds, 0) / 1e6;
    console.log(p.padEnd(24), f(r).dedup_ratio.toFixed(3).padStart(12), mbs(r).toFixed(0).padStart(10),
      f(s).dedup_ratio.toFixed(3).padStart(12), mbs(s).toFixed(0).padStart(10));' "$p" "$r" "$s"
done
echo "(backend: $("$bin" stats -t 1 --json "$syn"/v0.bin | node -e 'let d="";process.stdin.on("data",c=>d+=c).on("end",()=>console.log(JSON.parse(d).backend))'), one thread, blake3; MB/s = bytes / summed per-file seconds)"
