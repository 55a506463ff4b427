// Node rows of `npm run bench`: the shared WebAssembly benchmark (wasm-bench.mjs) and the npm
// peers (speed on the same bytes, dedup ratio on the versioned datasets).
//   node bench/harness/node.mjs CONFIG.json   -> one JSON row per line on stdout, progress on stderr
// CONFIG: { input, limits, syn: [paths], real: [paths], workers: [1,2], reps, quick, sections }
import { readFileSync } from 'node:fs'
import { createRequire } from 'node:module'
import { createHash, webcrypto } from 'node:crypto'
import { runWasmBench } from './wasm-bench.mjs'

const root = new URL('../../', import.meta.url).pathname
const cfg = JSON.parse(readFileSync(process.argv[2], 'utf8'))
const emit = (row) => process.stdout.write(`${JSON.stringify(row)}\n`)
const skip = (name, reason, section = name.split('/')[0]) => emit({ section, runtime: 'node', name, skipped: true, reason })
const log = (l) => process.stderr.write(`  ${l}\n`)
const data = new Uint8Array(readFileSync(cfg.input))
const sections = cfg.sections ?? ['limits', 'stage1', 'chunk', 'hash', 'e2e', 'peers']

async function loadBuild(flavor) {
  const mod = await import(`${root}web/dist/wasm/${flavor}/cutpoint_wasm.js`)
  const ex = mod.initSync({ module: readFileSync(`${root}web/dist/wasm/${flavor}/cutpoint_wasm_bg.wasm`) })
  return { mod, memory: ex.memory }
}

let hashwasm
try {
  hashwasm = await import('hash-wasm')
} catch (e) {
  skip('hash/node/hash-wasm', `hash-wasm not installed: ${e.message}`, 'hash')
}
const cp = await import(`${root}web/dist/web/src/index.js`)
await runWasmBench({
  runtime: 'node',
  data,
  limits: readFileSync(cfg.limits),
  loadBuild,
  cp,
  hashwasm,
  subtle: webcrypto.subtle,
  hashExtra: { 'node-crypto/sha256': (b) => createHash('sha256').update(b).digest() },
  versions: cfg.syn,
  versionBytes: cfg.syn.reduce((a, f) => a + readFileSync(f).length, 0),
  workers: cfg.workers,
  flavors: cfg.flavors,
  reps: cfg.reps,
  quick: cfg.quick,
  sections,
  emit,
  skip,
  log,
})

// ---- npm peers -------------------------------------------------------------------------------
if (sections.includes('peers')) {
  const benchRequire = createRequire(`${root}bench/package.json`)
  const version = (name) => JSON.parse(readFileSync(benchRequire.resolve(`${name}/package.json`), 'utf8')).version
  const peers = []
  // Each peer: (bytes, avg) -> chunk end offsets. MIN/MAX as close to ours (AVG/4, AVG*8) as the peer allows.
  try {
    const { compute_chunks } = benchRequire('@dstanesc/wasm-chunking-fastcdc-node')
    peers.push({
      name: 'wasm-chunking-fastcdc', pkg: '@dstanesc/wasm-chunking-fastcdc-node', note: 'fastcdc-rs in wasm; MIN/AVG/MAX = AVG/4, AVG, AVG*8',
      cuts: (d, avg) => (d.length ? Array.from(compute_chunks(d, avg / 4, avg, avg * 8).subarray(1)) : []),
    })
  } catch (e) {
    skip('peer/node/wasm-chunking-fastcdc', `@dstanesc/wasm-chunking-fastcdc-node did not load: ${e.message}`, 'peers')
  }
  try {
    const rabin = benchRequire('rabin-wasm')
    const made = {}
    for (const avg of [8192, 16384, 65536]) made[avg] = { bits: Math.log2(avg), min: avg / 4, max: avg * 8 }
    peers.push({
      name: 'rabin-wasm', pkg: 'rabin-wasm', note: 'IPFS rabin chunker (AssemblyScript); window 16, polynomial 0x3df305dfb2a805 as js-ipfs; MIN/MAX = AVG/4, AVG*8',
      cuts: async (d, avg) => {
        const m = made[avg]
        const r = await rabin.create(m.bits, m.min, m.max, 16, 17437180132763653)
        const ends = []
        let e = 0
        // Fed in 1 MiB pieces as a stream (the module keeps the open chunk between calls).
        for (let p = 0; p < d.length; p += 1 << 20) {
          for (const l of r.fingerprint(d.subarray(p, Math.min(d.length, p + (1 << 20))))) ends.push((e += l))
        }
        if (e < d.length) ends.push(d.length)
        return ends
      },
    })
  } catch (e) {
    skip('peer/node/rabin-wasm', `rabin-wasm did not load: ${e.message}`, 'peers')
  }
  try {
    const xet = await import(benchRequire.resolve('@huggingface/xetchunk-wasm'))
    peers.push({
      name: 'xetchunk-wasm', pkg: '@huggingface/xetchunk-wasm', note: 'Hugging Face Xet chunker (gear); MIN/MAX fixed at AVG/8, AVG*2; always computes keyed BLAKE3 per chunk (no way to turn it off)',
      cuts: (d, avg) => {
        let e = 0
        return xet.getChunks(d, avg).map((c) => (e += c.length))
      },
    })
  } catch (e) {
    skip('peer/node/xetchunk-wasm', `@huggingface/xetchunk-wasm did not load: ${e.message}`, 'peers')
  }
  const sets = [['synthetic', cfg.syn], ['real', cfg.real]]
  for (const p of peers) {
    let v
    try {
      v = version(p.pkg)
    } catch {
      v = '?'
    }
    for (const avg of [8192, 16384, 65536]) {
      log(`node: peer ${p.name} avg ${avg}`)
      try {
        let chunks = 0
        const t = await time(cfg.reps, async () => {
          chunks = (await p.cuts(data, avg)).length
        })
        emit({ section: 'peers', runtime: 'node', name: `peer/node/${p.name}/${avg}`, peer: p.name, package: p.pkg, version: v, note: p.note, avg, chunks,
          value: data.length / t[0] / 1e9, unit: 'GB/s', min: data.length / t[2] / 1e9, max: data.length / t[1] / 1e9, seconds: t[0], bytes: data.length })
        for (const [set, files] of sets) {
          if (!files?.length) continue
          const [ratio, count, bytes] = await dedupOf(files, (d) => p.cuts(d, avg))
          emit({ section: 'dedup', runtime: 'node', name: `dedup/${set}/${p.name}/${avg}`, dataset: set, what: 'profile', engine: p.name, family: p.name, avg,
            value: ratio, unit: 'ratio', chunks: count, files: files.length, bytes, version: v })
        }
      } catch (e) {
        skip(`peer/node/${p.name}/${avg}`, `failed: ${e.message}`, 'peers')
      }
    }
  }
}

async function time(reps, fn) {
  await fn()
  const xs = []
  for (let r = 0; r < reps; r++) {
    const t0 = performance.now()
    await fn()
    xs.push((performance.now() - t0) / 1000)
  }
  xs.sort((a, b) => a - b)
  return [xs[Math.floor(xs.length / 2)], xs[0], xs[xs.length - 1]]
}

/** Bytes / unique bytes over the files in order (chunks named by SHA-1: identity only). */
async function dedupOf(files, cuts) {
  const seen = new Set()
  let total = 0
  let unique = 0
  let count = 0
  for (const f of files) {
    const d = new Uint8Array(readFileSync(f))
    let s = 0
    for (const e of await cuts(d)) {
      const h = createHash('sha1').update(d.subarray(s, e)).digest('base64')
      if (!seen.has(h)) {
        seen.add(h)
        unique += e - s
      }
      count++
      s = e
    }
    total += d.length
  }
  return [total / unique, count, total]
}
