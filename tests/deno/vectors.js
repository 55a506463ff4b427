// Deno: the shared vectors through Deno workers (Uint8Array, Blob, path and stream inputs),
// 1/2/4 workers, odd segment sizes, simd128 and plain builds. Run from tests/js/deno.test.ts:
//   DENO_NO_UPDATE_CHECK=1 deno run --allow-read tests/deno/vectors.js
import * as cp from '../../web/dist/web/src/index.js'
import { generate, diff } from '../js/vectors.mjs'

const dir = new URL('../vectors/', import.meta.url)
const names = []
for await (const e of Deno.readDir(dir)) if (e.name.endsWith('.json')) names.push(e.name)
names.sort()
const info = await cp.init()
// The configs check that odd, tiny stage-1 jobs give the same chunks: keep their sizes (the
// library raises a segmentSize below 64 KiB to 64 KiB otherwise).
cp.__test.minSpan(1)
console.log(`deno ${Deno.version.deno}, ${info.buildId}, vectors: ${names.length} files`)

const configs = [
  { workers: 2, segmentSize: 4099, wasm: 'simd128', input: 'blob' },
  { workers: 1, segmentSize: 65537, wasm: 'plain', input: 'bytes', hash: 'sha256' },
  { workers: 4, segmentSize: 1021, wasm: 'simd128', input: 'path', backend: 'scalar' },
  { workers: 2, segmentSize: 30011, wasm: 'simd128', input: 'stream' },
]
let passed = 0
let failed = 0
const tmp = await Deno.makeTempDir({ prefix: 'cutpoint-deno-' })
try {
  for (const name of names) {
    const vf = JSON.parse(await Deno.readTextFile(new URL(name, dir)))
    for (const [i, c] of vf.cases.entries()) {
      const data = generate(c.input)
      for (const [k, cfg] of configs.entries()) {
        // The path config runs on every fifth case (file writes are slow on a shared disk).
        if (cfg.input === 'path' && i % 5) continue
        let input
        if (cfg.input === 'blob') input = new Blob([data])
        else if (cfg.input === 'bytes') input = data
        else if (cfg.input === 'stream') input = new Blob([data]).stream()
        else {
          input = `${tmp}/${name}.${i}.bin`
          await Deno.writeFile(input, data)
        }
        try {
          const got = await cp.chunkAll(input, { profile: vf.profile, ...cfg, input: undefined })
          const d = diff(got, c, cfg.hash ?? 'blake3')
          if (d) throw new Error(d)
          passed++
        } catch (e) {
          failed++
          console.log(`FAIL ${name} #${i} (${c.note}) config ${k}: ${e.message}`)
        }
      }
    }
  }
  // A clear error for a bad profile and a missing file.
  for (const [what, f, re] of [
    ['bad profile', () => cp.chunkAll(new Uint8Array(4), { profile: 'gear:2k:8k' }), /expected FAMILY/],
    ['missing file', () => cp.chunkAll(`${tmp}/nope.bin`, { workers: 2 }), /nope\.bin/],
  ]) {
    try {
      await f()
      failed++
      console.log(`FAIL ${what}: no error`)
    } catch (e) {
      if (re.test(String(e.message))) passed++
      else {
        failed++
        console.log(`FAIL ${what}: ${e.message}`)
      }
    }
  }
} finally {
  await Deno.remove(tmp, { recursive: true })
}
console.log(`deno: ${passed} passed, ${failed} failed`)
Deno.exit(failed ? 1 : 0)
