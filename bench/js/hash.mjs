// node bench/js/hash.mjs [SIZE=64m]  — see hash-lib.mjs.
import { readFileSync } from 'node:fs'
import { createHash, webcrypto } from 'node:crypto'
import * as hashwasm from 'hash-wasm'
import { dataFile, loadBuild, machine } from './common.mjs'
import { runHashBench } from './hash-lib.mjs'

const size = process.argv[2] ?? '64m'
const data = new Uint8Array(readFileSync(dataFile(size)))
console.log(`# fingerprints in Node, ${size}; ${machine()}; MB/s min median max`)
await runHashBench({
  data,
  builds: { simd128: await loadBuild('simd128'), plain: await loadBuild('plain') },
  hashwasm,
  subtle: webcrypto.subtle,
  log: console.log,
  extra: { 'node-crypto/sha256': (b) => createHash('sha256').update(b).digest() },
})
