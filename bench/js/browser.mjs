// Chromium benchmarks (Debian chromium via playwright-core): stage 1 per build/backend,
// fingerprints (core wasm vs hash-wasm vs WebCrypto), and chunk() of a File with 1 and 2 workers.
//   node bench/js/browser.mjs [SIZE=256m] [what=stage1,hash,chunk] (also: read = the File read alone, shared = chunk() of a SharedArrayBuffer)
import { chromium } from 'playwright-core'
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { dataFile, machine, root } from './common.mjs'

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
    console.log('# reading the File alone (the ceiling for chunk(File)), 1 and 2 workers, twice')
    for (const w of [1, 2, 1, 2]) console.log(await page.evaluate((w) => window.readBench(w), w))
  }
  if (what.includes('shared')) {
    console.log('# chunk() of 1 GiB in a SharedArrayBuffer (no file reads), 1 and 2 workers, twice')
    for (const hash of ['none', 'blake3']) for (const w of [1, 2, 1, 2]) console.log(await page.evaluate(([w, h]) => window.chunkBenchShared(w, h, 1 << 30), [w, hash]))
  }
  if (what.includes('chunk')) {
    // SEGMENT=8m (or 16m...): the segmentSize option (default: the library's, 4 MiB).
    const seg = process.env.SEGMENT ? parseInt(process.env.SEGMENT) * (process.env.SEGMENT.endsWith('m') ? 1 << 20 : 1) : undefined
    console.log(`# chunk(File) through Web Workers${seg ? `, segmentSize ${seg}` : ''}`)
    for (const hash of ['none', 'blake3']) {
      for (const w of [1, 2, 1, 2]) console.log(await page.evaluate(([w, h, seg]) => window.chunkBench(w, h, true, seg), [w, hash, seg]))
      if (hash !== 'none') for (const w of [1, 2, 1, 2]) console.log(await page.evaluate(([w, h]) => window.chunkBench(w, h, false), [w, hash]))
    }
  }
} finally {
  await ctx.close()
  server.close()
  rmSync(dir, { recursive: true, force: true })
}
