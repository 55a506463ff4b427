// Chromium benchmarks (Debian chromium via playwright-core): stage 1 per build/backend,
// fingerprints (core wasm vs hash-wasm vs WebCrypto), and chunk() of a File with 1 and 2 workers.
//   node bench/js/browser.mjs [SIZE=256m] [what=stage1,hash,chunk] (also: read = the File read alone, shared = chunk() of a SharedArrayBuffer)
//   READ=ab,frs,stream,byob READ_SEG=1m,4m,16m READ_DEPTH=1,2 READ_REPS=3 node bench/js/browser.mjs 2g read
import { chromium } from 'playwright-core'
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { dataFile, fmt, machine, root, stats } from './common.mjs'

/** '4m' -> bytes (k/m/g: powers of 1024). */
const bytes = (v) => parseInt(v) * ({ k: 1 << 10, m: 1 << 20, g: 1 << 30 }[v.slice(-1)] ?? 1)

const { serve } = await import(`${root}tests/js/server.ts`).catch(async () => {
  // Node cannot import .ts: a tiny copy of the test server.
  const http = await import('node:http')
  const fs = await import('node:fs')
  const path = await import('node:path')
  const types = { '.html': 'text/html', '.js': 'text/javascript', '.mjs': 'text/javascript', '.wasm': 'application/wasm' }
  return {
    serve: (dir) =>
      new Promise((resolve) => {
        const server = http.createServer((req, res) => {
          const file = path.join(dir, path.normalize(decodeURIComponent(new URL(req.url, 'http://x').pathname)))
          if (!file.startsWith(dir) || !fs.existsSync(file) || !fs.statSync(file).isFile()) return res.writeHead(404).end()
          res.writeHead(200, { 'content-type': types[path.extname(file)] ?? 'application/octet-stream', 'cross-origin-opener-policy': 'same-origin', 'cross-origin-embedder-policy': 'require-corp' })
          fs.createReadStream(file).pipe(res)
        })
        server.listen(0, '127.0.0.1', () => resolve({ url: `http://127.0.0.1:${server.address().port}`, server }))
      }),
  }
})

const size = process.argv[2] ?? '256m'
const what = (process.argv[3] ?? 'stage1,hash,chunk').split(',')
const file = dataFile(size)
const { url, server } = await serve(root, true)
const dir = mkdtempSync(`${tmpdir()}/cutpoint-bench-chromium-`)
const ctx = await chromium.launchPersistentContext(dir, {
  executablePath: '/usr/bin/chromium',
  headless: true,
  args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking', '--disable-component-update', '--disable-sync'],
})
try {
  const page = await ctx.newPage()
  await page.goto(`${url}/bench/js/browser.html`)
  await page.waitForFunction(() => window.ready)
  await page.setInputFiles('#file', file)
  console.log(`# Chromium ${ctx.browser()?.version() ?? ''} on ${machine()}, ${size} random`)
  if (what.includes('stage1')) {
    console.log('# stage 1, one thread (page), 64 MiB, MB/s per run sorted')
    for (const l of await page.evaluate(() => window.stage1Bench(64 << 20, 5))) console.log(l)
  }
  if (what.includes('hash')) {
    console.log('# fingerprints, 32 MiB, MB/s min median max')
    for (const l of await page.evaluate(() => window.hashBench(32 << 20))) console.log(l)
  }
  if (what.includes('read')) {
    // READ=ab,frs,stream,byob (methods, see readBench in browser.html; default ab, the library's),
    // READ_SEG=1m,4m,16m (slice sizes, default 4m), READ_DEPTH=1,2 (slices read at once per worker,
    // default 1), READ_REPS=N (default 2). Every rep runs every variant with 1 then 2 workers, so
    // the variants alternate through the run; then medians and ranges per variant.
    const list = (v, d) => (v ?? d).split(',').filter(Boolean)
    const methods = list(process.env.READ, 'ab')
    const segs = list(process.env.READ_SEG, '4m').map(bytes)
    const depths = list(process.env.READ_DEPTH, '1').map(Number)
    const reps = Number(process.env.READ_REPS ?? 2)
    console.log(`# reading the File alone (the ceiling for chunk(File)), 1 and 2 workers, ${reps} reps alternated`)
    const runs = new Map()
    const sums = new Set()
    for (let r = 0; r < reps; r++) {
      for (const method of methods) for (const seg of segs) for (const depth of depths) {
        if (method === 'frs' && depth > 1) continue
        for (const w of [1, 2]) {
          let x
          try {
            x = await page.evaluate(([w, o]) => window.readBench(w, o), [w, { method, seg, depth }])
          } catch (e) {
            console.log(`read/chromium/${method}/seg${seg >> 20}m/d${depth}/w${w}: ${String(e.message).split('\n')[0]}`)
            continue
          }
          console.log(x.line)
          sums.add(x.sum)
          const key = x.name.replace(/\/w\d$/, '')
          if (!runs.has(key)) runs.set(key, { 1: [], 2: [] })
          runs.get(key)[w].push(x.mbs)
        }
      }
    }
    if (sums.size > 1) console.log(`# CHECKSUMS DIFFER between runs: ${[...sums].join(' ')}`)
    console.log('# summary: MB/s median [min-max] with 1 and 2 workers; efficiency = median(2) / (2 x median(1)), and per rep')
    for (const [key, v] of runs) {
      const [a, b] = [stats(v[1]), stats(v[2])]
      const per = v[2].map((x, i) => (v[1][i] ? (x / (2 * v[1][i])).toFixed(2) : '-')).join(' ')
      console.log(`${key.padEnd(32)} w1 ${fmt(a.median)} [${a.min.toFixed(0)}-${a.max.toFixed(0)}]  w2 ${fmt(b.median)} [${b.min.toFixed(0)}-${b.max.toFixed(0)}]  eff ${(b.median / (2 * a.median)).toFixed(2)} (${per})`)
    }
  }
  if (what.includes('shared')) {
    console.log('# chunk() of 1 GiB in a SharedArrayBuffer (no file reads), 1 and 2 workers, twice')
    for (const hash of ['none', 'blake3']) for (const w of [1, 2, 1, 2]) console.log(await page.evaluate(([w, h]) => window.chunkBenchShared(w, h, 1 << 30), [w, hash]))
  }
  if (what.includes('chunk')) {
    // SEGMENT=8m (or 16m...): the segmentSize option (default: the library's, 4 MiB).
    const seg = process.env.SEGMENT ? bytes(process.env.SEGMENT) : undefined
    // LIBS=web/dist,bench/data/lib-before (copies of web/dist under the repository): compare
    // builds of the library, alternated in one page (the order reversed every other rep); CHUNK_REPS=N (default 2), HASHES=none,blake3.
    const libs = process.env.LIBS ? process.env.LIBS.split(',') : undefined
    if (libs) {
      const reps = Number(process.env.CHUNK_REPS ?? 2)
      console.log(`# chunk(File) through Web Workers${seg ? `, segmentSize ${seg}` : ''}, libraries ${libs.join(' / ')} alternated, ${reps} reps`)
      const runs = new Map()
      for (const hash of (process.env.HASHES ?? 'none,blake3').split(',')) {
        for (let r = 0; r < reps; r++) for (const lib of r % 2 ? [...libs].reverse() : libs) for (const w of [1, 2]) {
          const line = await page.evaluate(([w, h, seg, lib]) => window.chunkBench(w, h, true, seg, lib), [w, hash, seg, lib === 'web/dist' ? undefined : lib])
          console.log(line)
          const key = `${hash} ${lib}`
          if (!runs.has(key)) runs.set(key, { 1: [], 2: [] })
          runs.get(key)[w].push(parseFloat(line.split(/\s+/)[1]))
        }
      }
      console.log('# summary: MB/s median [min-max] with 1 and 2 workers; efficiency = median(2) / (2 x median(1)), and per rep')
      for (const [key, v] of runs) {
        const [a, b] = [stats(v[1]), stats(v[2])]
        const per = v[2].map((x, i) => (x / (2 * v[1][i])).toFixed(2)).join(' ')
        console.log(`${key.padEnd(32)} w1 ${fmt(a.median)} [${a.min}-${a.max}]  w2 ${fmt(b.median)} [${b.min}-${b.max}]  eff ${(b.median / (2 * a.median)).toFixed(2)} (${per})`)
      }
    } else {
      console.log(`# chunk(File) through Web Workers${seg ? `, segmentSize ${seg}` : ''}`)
      for (const hash of ['none', 'blake3']) {
        for (const w of [1, 2, 1, 2]) console.log(await page.evaluate(([w, h, seg]) => window.chunkBench(w, h, true, seg), [w, hash, seg]))
        if (hash !== 'none') for (const w of [1, 2, 1, 2]) console.log(await page.evaluate(([w, h]) => window.chunkBench(w, h, false), [w, hash]))
      }
    }
  }
} finally {
  await ctx.close()
  server.close()
  rmSync(dir, { recursive: true, force: true })
}
