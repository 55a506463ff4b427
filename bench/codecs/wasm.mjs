// Usage: node bench/codecs/wasm.mjs FILE  (after cargo build --release --lib --target wasm32-unknown-unknown)
import { readFileSync } from 'node:fs';
const wasm = new URL('./target/wasm32-unknown-unknown/release/codec_bench.wasm', import.meta.url);
const { instance } = await WebAssembly.instantiate(readFileSync(wasm), {});
const e = instance.exports;
const data = readFileSync(process.argv[2]);
const ptr = e.input(data.length);
new Uint8Array(e.memory.buffer, ptr, data.length).set(data);
const mib = data.length / 2 ** 20;
console.log(`wasm32, ${mib.toFixed(1)} MiB in 8 KiB pieces`);
for (const [name, codec, level] of [['zstd -1', 0, 1], ['zstd -3', 0, 3], ['zstd -9', 0, 9], ['ruzstd fastest', 1, 0], ['lz4_flex', 2, 0]]) {
  e.stored(codec, level, ptr, Math.min(data.length, 4 << 20)); // warm-up (tier-up)
  const t = performance.now();
  const stored = e.stored(codec, level, ptr, data.length);
  const s = (performance.now() - t) / 1000;
  console.log(`${name.padEnd(15)} | ${(stored / data.length).toFixed(3)} | ${(data.length / stored).toFixed(2)} | ${(mib / s).toFixed(0)} MiB/s`);
}
