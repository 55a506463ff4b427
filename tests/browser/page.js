// Runs in Chromium: the library from web/dist, the shared vectors regenerated in the page.
import * as cp from '/web/dist/web/src/index.js'
import { generate, diff } from '/tests/js/vectors.mjs'

// The configs check that odd, tiny stage-1 jobs give the same chunks: keep their sizes (the
// library raises a segmentSize below 64 KiB to 64 KiB otherwise).
cp.__test.minSpan(1)

const vectors = new Map()
async function vector(name) {
  if (!vectors.has(name)) vectors.set(name, await (await fetch(`/tests/vectors/${name}`)).json())
  return vectors.get(name)
}

/** Every case of the named files under each config; returns {passed, failed, failures}. */
window.runVectors = async (names, configs) => {
  const r = { passed: 0, failed: 0, failures: [] }
  for (const name of names) {
    const vf = await vector(name)
    for (const [i, c] of vf.cases.entries()) {
      const data = generate(c.input)
      for (const cfg of configs) {
        const alg = cfg.hash ?? 'blake3'
        const input = cfg.input === 'bytes' ? data : cfg.input === 'stream' ? new Blob([data]).stream() : new File([data], 'v.bin')
        try {
          const got = await cp.chunkAll(input, { profile: vf.profile, ...cfg, segmentSize: cfg.segmentSize + (cfg.oddStep ?? 0) * i, input: undefined })
          const d = diff(got, c, alg)
          if (d) throw new Error(d)
          r.passed++
        } catch (e) {
          r.failed++
          if (r.failures.length < 10) r.failures.push(`${name} #${i} ${c.note} ${JSON.stringify(cfg)}: ${e.message}`)
        }
      }
    }
  }
  return r
}

window.expectError = async (what) => {
  try {
    if (what === 'profile') await cp.chunkAll(new Uint8Array(10), { profile: 'gear:2k:8k' })
    if (what === 'crash') await cp.__test.poolCrash({ workers: 2 })
    if (what === 'read') {
      const data = new Uint8Array(300000)
      class Failing extends File {
        slice(a, b) {
          if ((a ?? 0) > 100000) return { arrayBuffer: () => Promise.reject(new Error('NotReadableError: the file changed')) }
          return new Blob([data.subarray(a, b)])
        }
      }
      await cp.chunkAll(new Failing([data], 'x'), { workers: 0, segmentSize: 65536 })
    }
    if (what === 'picked') await window.chunkPicked({ workers: 2, segmentSize: 65536 })
    return 'no error'
  } catch (e) {
    return String(e.message)
  }
}

/** Chunks the picked file on the workers while counting main-thread stalls. */
window.chunkPicked = async (opts) => {
  const file = document.getElementById('file').files[0]
  let last = performance.now()
  let maxGap = 0
  let frames = 0
  let running = true
  const tick = (t) => {
    maxGap = Math.max(maxGap, t - last)
    last = t
    frames++
    if (running) requestAnimationFrame(tick)
  }
  requestAnimationFrame(tick)
  let longTasks = 0
  let longest = 0
  const po = new PerformanceObserver((l) => {
    for (const e of l.getEntries()) {
      longTasks++
      longest = Math.max(longest, e.duration)
    }
  })
  po.observe({ type: 'longtask', buffered: false })
  const t0 = performance.now()
  // Digests of the listing in groups of 4096 chunks (the page keeps no per-chunk state).
  const enc = new TextEncoder()
  const groups = { cuts: [], hashes: [] }
  let cuts = []
  let hashes = []
  let chunks = 0
  const flush = () => {
    groups.cuts.push(cp.digest('blake3', enc.encode(cuts.join('\n'))))
    groups.hashes.push(cp.digest('blake3', enc.encode(hashes.join('\n'))))
    cuts = []
    hashes = []
  }
  for await (const c of cp.chunk(file, opts)) {
    cuts.push(c.offset + c.length)
    if (c.hash) hashes.push(c.hash)
    if (++chunks % 4096 === 0) flush()
  }
  if (cuts.length) flush()
  const seconds = (performance.now() - t0) / 1000
  running = false
  po.disconnect()
  return {
    size: file.size,
    chunks,
    seconds,
    mbps: file.size / seconds / 1e6,
    frames,
    maxFrameGapMs: maxGap,
    longTasks,
    longestTaskMs: longest,
    cutsDigest: cp.digest('blake3', enc.encode(groups.cuts.join('\n'))),
    hashesDigest: cp.digest('blake3', enc.encode(groups.hashes.join('\n'))),
  }
}

window.ready = cp.init().then((i) => {
  document.getElementById('status').textContent = `ready ${i.buildId}`
  window.initInfo = { ...i, isolated: self.crossOriginIsolated }
  return window.initInfo
})
