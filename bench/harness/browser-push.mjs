// Browser push rows of `npm run bench` (one JSON row per line on stdout, read by run.mjs; progress
// on stderr): the web page (web/app, Vite build) in headless Debian Chromium pushes a file to a
// `cutpoint serve` on 127.0.0.1 through the library's client (2 workers), against the native
// `cutpoint push` of the same file to another fresh store on 127.0.0.1; then a 1%-modified
// version of it from the browser (bytes sent ÷ novel bytes).
//   node bench/harness/browser-push.mjs [--quick] [--size 1g] [--reps 3] [--workers 2] [--gc] [--compression auto|off|max]
// (--gc: Chromium with --expose-gc, the page's and its workers' garbage collected before each
// memory sample, so the peak is of what is live rather than of what the collector has not
// reclaimed yet)
//
// Data: the store rows' files (bench/harness/store.mjs): `cutpoint gen --size S --versions 1
// --mods M --mod-size 64k --seed 9`, v0 random and v1 with M edits of 64 KiB covering 1%.
// Browser time: the page's own (from the push call to its result, `data-elapsed-ms`); native
// time: the whole `cutpoint push` process. Figures are medians of the repetitions. Also the peak
// memory (PSS summed over the browser's processes, sampled every 250 ms) during the first push,
// with its breakdown by process type (browser, renderer: the page and its workers, the network
// service, ...) at that peak and each type's own peak, less what each had before the push.
// And two floors in the same browser, same file, no store and no chunking: Chromium reading the
// File (2 workers, 16 MiB slices, what the chunking workers do) and Chromium uploading it
// (`fetch` POSTs of the File's own 8 MiB slices, 2 in flight, to a sink on 127.0.0.1 that only
// counts bytes): what a browser push cannot go below on this machine whatever the library does.
// CPU seconds (/proc utime + stime) of each side during each push and floor: Chromium's processes
// and the store for the browser, the `cutpoint push` process and the store for native. On a
// machine with few cores the browser push is bound by its CPU: it cannot finish in less than
// its CPU seconds ÷ the cores, which the rows report as `cpu_bound_seconds`.
import { execFileSync, spawn } from 'node:child_process'
import { existsSync, linkSync, copyFileSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs'
import os from 'node:os'
import { chromium } from 'playwright-core'
import { storeDataset } from './store-data.mjs'
import { serveStatic } from './serve-static.mjs'

const root = new URL('../../', import.meta.url).pathname
const argv = process.argv.slice(2)
const opt = (f, d) => (argv.includes(f) ? argv[argv.indexOf(f) + 1] : d)
const quick = argv.includes('--quick')
const size = opt('--size', quick ? '16m' : '1g')
const reps = Number(opt('--reps', quick ? '1' : '3'))
const workers = Number(opt('--workers', '2'))
const gcMode = argv.includes('--gc')
// Both sides' compression (the page's setting, `cutpoint push --compression`); default auto.
const compression = opt('--compression', 'auto')
const cli = `${root}native/target/release/cutpoint`
const exe = process.env.CUTPOINT_CHROMIUM ?? '/usr/bin/chromium'
const log = (l) => process.stderr.write(`${l}\n`)
const { total, mods, dataDir } = storeDataset(root, cli, size, log)
const app = `${root}web/app/dist`
if (!existsSync(`${app}/index.html`) || process.env.CUTPOINT_BENCH_REBUILD !== '0') {
  log('building the page: vite build -c web/app/vite.config.ts')
  execFileSync(`${root}node_modules/.bin/vite`, ['build', '-c', `${root}web/app/vite.config.ts`], { cwd: root, stdio: ['ignore', 'ignore', 'inherit'] })
}

// The two versions under one file name (the page names a file by its name), hard-linked.
const work = mkdtempSync(`${os.tmpdir()}/cutpoint-browser-push-`)
const files = {}
for (const [k, v] of [['base', 'v0'], ['mod', 'v1']]) {
  mkdirSync(`${work}/${k}`)
  files[k] = `${work}/${k}/f.bin`
  try {
    linkSync(`${dataDir}/${v}.bin`, files[k])
  } catch {
    copyFileSync(`${dataDir}/${v}.bin`, files[k])
  }
}

/** `cutpoint serve` on a fresh directory (127.0.0.1, a free port). */
function startStore(dir) {
  return new Promise((resolve, reject) => {
    const p = spawn(cli, ['serve', '--data', dir, '--listen', '127.0.0.1:0', '--cors-origin', appUrl], { stdio: ['ignore', 'pipe', 'inherit'] })
    let buf = ''
    p.stdout.on('data', (d) => {
      buf += d
      const m = /listening on (http:\/\/\S+)/.exec(buf)
      if (m && !p.url) resolve(Object.assign(p, { url: m[1] }))
    })
    p.on('error', reject)
    p.on('exit', (c) => (p.url ? null : reject(new Error(`cutpoint serve exited with ${c}`))))
  })
}
const stop = (p) => new Promise((r) => (p.exitCode !== null ? r() : (p.once('exit', r), p.kill())))

// The page, cross-origin isolated like the dev server; the floors' sink at /sink takes a body
// and answers its length (what the store would read, no storing).
const { server, url: appUrl } = await serveStatic(app, { sink: (u) => u === '/sink' })
const pageUrl = `${appUrl}/index.html`

/**
 * PSS of the browser's processes (those started with this run's profile directory), bytes:
 * `{ sum, by }`, `by` the PSS by process type (browser, renderer: the page and its workers,
 * utility:NetworkService, gpu-process, ...).
 */
function browserPss() {
  let sum = 0
  const by = {}
  for (const pid of readdirSync('/proc')) {
    if (!/^\d+$/.test(pid)) continue
    try {
      const cmd = readFileSync(`/proc/${pid}/cmdline`, 'utf8')
      if (!cmd.includes(`${work}/profile`)) continue
      const m = /Pss:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/smaps_rollup`, 'utf8'))
      if (!m) continue
      const t = (/--type=([a-z-]+)/.exec(cmd)?.[1] ?? 'browser') + (/--utility-sub-type=([\w.]+)/.exec(cmd)?.[1]?.replace(/.*\./, ':') ?? '')
      sum += Number(m[1]) * 1024
      by[t] = (by[t] ?? 0) + Number(m[1]) * 1024
    } catch {}
  }
  return { sum, by }
}

// CPU seconds from /proc: a process, the browser's processes, this process's waited-for children.
const TICK = Number(execFileSync('getconf', ['CLK_TCK'], { encoding: 'utf8' }).trim()) || 100
function cpuOf(pid, children = false) {
  try {
    const st = readFileSync(`/proc/${pid}/stat`, 'utf8')
    const f = st.slice(st.lastIndexOf(')') + 2).split(' ')
    return (children ? Number(f[13]) + Number(f[14]) : Number(f[11]) + Number(f[12])) / TICK
  } catch {
    return 0
  }
}
function browserCpu() {
  let sum = 0
  for (const pid of readdirSync('/proc')) {
    if (!/^\d+$/.test(pid)) continue
    try {
      if (readFileSync(`/proc/${pid}/cmdline`, 'utf8').includes(`${work}/profile`)) sum += cpuOf(pid)
    } catch {}
  }
  return sum
}
const CORES = os.cpus().length

/** Chromium's own floors for `file` in `page` (see the head of this file), seconds. */
async function floors(page, file) {
  await page.evaluate(() => {
    const i = document.createElement('input')
    i.type = 'file'
    i.id = 'floor-file'
    i.hidden = true
    document.body.append(i)
  })
  await page.setInputFiles('#floor-file', file)
  let c0 = browserCpu()
  const read_s = await page.evaluate(async () => {
    const f = document.getElementById('floor-file').files[0]
    const t0 = performance.now()
    const src = `onmessage = async (e) => { const { f, a, b } = e.data; let n = 0
      for (let o = a; o < b; o += 16 << 20) n += (await f.slice(o, Math.min(o + (16 << 20), b)).arrayBuffer()).byteLength
      postMessage(n) }`
    const url = URL.createObjectURL(new Blob([src], { type: 'text/javascript' }))
    const half = Math.ceil(f.size / 2)
    const got = await Promise.all(
      [0, 1].map((i) => new Promise((res, rej) => {
        const w = new Worker(url)
        w.onmessage = (e) => (w.terminate(), res(e.data))
        w.onerror = (e) => (w.terminate(), rej(new Error(e.message)))
        w.postMessage({ f, a: i * half, b: Math.min(f.size, (i + 1) * half) })
      })),
    )
    if (got[0] + got[1] !== f.size) throw new Error(`read ${got[0] + got[1]} of ${f.size} bytes`)
    return (performance.now() - t0) / 1000
  })
  const read_cpu = browserCpu() - c0
  c0 = browserCpu()
  const upload_s = await page.evaluate(async () => {
    const f = document.getElementById('floor-file').files[0]
    const t0 = performance.now()
    const inflight = new Set()
    let sent = 0
    for (let o = 0; o < f.size; o += 8 << 20) {
      while (inflight.size >= 2) await Promise.race(inflight)
      const p = fetch('/sink', { method: 'POST', body: f.slice(o, o + (8 << 20)) })
        .then((r) => r.json())
        .then((j) => (sent += j.n))
        .finally(() => inflight.delete(p))
      inflight.add(p)
    }
    await Promise.all([...inflight])
    if (sent !== f.size) throw new Error(`the sink got ${sent} of ${f.size} bytes`)
    return (performance.now() - t0) / 1000
  })
  return { read_s, upload_s, read_cpu, upload_cpu: browserCpu() - c0 }
}

const med = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]
const runs = []
let ctx
try {
  ctx = await chromium.launchPersistentContext(`${work}/profile`, {
    executablePath: exe,
    headless: true,
    args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking', '--disable-component-update', '--disable-sync', ...(gcMode ? ['--js-flags=--expose-gc'] : [])],
  })
  process.stderr.write(`chromium-version: ${ctx.browser()?.version() ?? '?'}\n`)
  for (let r = 0; r < reps; r++) {
    const run = {}
    // Native: a fresh store, `cutpoint push` of v0 then v1 under one name.
    mkdirSync(`${work}/native-${r}`)
    const ns = await startStore(`${work}/native-${r}`)
    try {
      for (const k of ['base', 'mod']) {
        const t0 = performance.now()
        const c0 = [cpuOf(process.pid, true), cpuOf(ns.pid)]
        const j = JSON.parse(execFileSync(cli, ['push', files[k], '--name', 'f.bin', '--store', ns.url, '--json', '--compression', compression], { encoding: 'utf8' }).trim().split('\n').pop())
        const cpu = { client: cpuOf(process.pid, true) - c0[0], store: cpuOf(ns.pid) - c0[1] }
        run[`native_${k}`] = { s: (performance.now() - t0) / 1000, ...j, cpu }
      }
    } finally {
      await stop(ns)
    }
    // Browser: another fresh store, the page pushes v0 then v1 under the same name.
    mkdirSync(`${work}/browser-${r}`)
    const bs = await startStore(`${work}/browser-${r}`)
    const page = await ctx.newPage()
    try {
      await page.goto(`${pageUrl}?store=${encodeURIComponent(bs.url)}`)
      await page.waitForFunction(() => document.body.dataset.ready, null, { timeout: 60_000 })
      await page.fill('#workers', String(workers))
      await page.selectOption('#rapid', 'off')
      await page.selectOption('#compression', compression)
      await page.click('#check-store')
      for (const k of ['base', 'mod']) {
        const t0 = performance.now()
        const c0 = [browserCpu(), cpuOf(bs.pid)]
        const first = browserPss()
        const before = first.sum
        // The peak of the sum, its breakdown by process type then, and each type's own peak.
        let peak = first.sum
        let peakBy = first.by
        const typePeak = { ...first.by }
        let sampling = false
        const timer = setInterval(async () => {
          if (sampling) return
          sampling = true
          if (gcMode) await Promise.all([page, ...page.workers()].map((t) => t.evaluate(() => globalThis.gc?.()).catch(() => {})))
          const s = browserPss()
          if (s.sum > peak) (peak = s.sum), (peakBy = s.by)
          for (const [t, v] of Object.entries(s.by)) typePeak[t] = Math.max(typePeak[t] ?? 0, v)
          sampling = false
        }, 250)
        await page.setInputFiles('#files', files[k])
        const sel = 'li.job:last-of-type'
        await page.waitForFunction((s) => ['done', 'error', 'stopped'].includes(document.querySelector(s)?.dataset.state ?? ''), sel, { timeout: 600_000, polling: 100 })
        const wall = (performance.now() - t0) / 1000
        const cpu = { chromium: browserCpu() - c0[0], store: cpuOf(bs.pid) - c0[1] }
        clearInterval(timer)
        const row = await page.$eval(sel, (li) => ({ ...li.dataset, text: li.querySelector('.job-state').textContent }))
        if (row.state !== 'done') throw new Error(`the page's push of ${k} ended: ${row.text}`)
        run[`browser_${k}`] = { s: Number(row.elapsedMs) / 1000, wall, bytes: Number(row.bytes), chunks: Number(row.chunks), novel_bytes: Number(row.novelBytes), compressed_bytes: Number(row.compressedBytes), compressed_chunks: Number(row.compressedChunks), sent_bytes: Number(row.sentBytes), packs: Number(row.packs), novel_chunks: Number(row.novelChunks), version: Number(row.version), pss_before: before, pss_peak: peak, pss_before_by: first.by, pss_peak_by: peakBy, pss_type_peak: typePeak, cpu }
      }
    } finally {
      run.floor = await floors(page, files.base)
      log(`  floors: Chromium reads the File in ${run.floor.read_s.toFixed(2)} s (${run.floor.read_cpu.toFixed(1)} CPU s), uploads it to a sink in ${run.floor.upload_s.toFixed(2)} s (${run.floor.upload_cpu.toFixed(1)} CPU s)`)
      await page.close()
      await stop(bs)
    }
    const b = run.browser_base
    const n = run.native_base
    log(`rep ${r + 1}/${reps}: native push ${n.s.toFixed(2)} s, browser push (${workers} workers) ${b.s.toFixed(2)} s (${(n.s / b.s).toFixed(2)}× native); 1% re-push from the browser: sent ${run.browser_mod.sent_bytes} / novel ${run.browser_mod.novel_bytes}`)
    log(`  CPU s: native client ${n.cpu.client.toFixed(1)} + store ${n.cpu.store.toFixed(1)}; browser Chromium ${b.cpu.chromium.toFixed(1)} + store ${b.cpu.store.toFixed(1)} (${CORES} cores)`)
    const mib = (o) => Object.entries(o).map(([t, v]) => `${t} ${((v - (b.pss_before_by[t] ?? 0)) / 2 ** 20).toFixed(0)}`).join(', ')
    log(`  memory added (MiB): ${((b.pss_peak - b.pss_before) / 2 ** 20).toFixed(0)} at the peak (${mib(b.pss_peak_by)}); each type's own peak: ${mib(b.pss_type_peak)}`)
    if (b.chunks !== n.chunks || b.novel_bytes !== n.novel_bytes) log(`  NOTE: browser chunks/novel ${b.chunks}/${b.novel_bytes} differ from native ${n.chunks}/${n.novel_bytes}`)
    runs.push(run)
  }
} finally {
  await ctx?.close()
  server.close()
  rmSync(work, { recursive: true, force: true })
}

const emit = (row) => process.stdout.write(`${JSON.stringify({ section: 'store', runtime: 'chromium', size, reps, workers, compression, ...row })}\n`)
for (const [k, what] of [['base', `browser push (Chromium, web page, ${workers} workers), empty store`], ['mod', `browser 1%-modified re-push (Chromium, web page, ${workers} workers)`]]) {
  const bs = med(runs.map((x) => x[`browser_${k}`].s))
  const ns = med(runs.map((x) => x[`native_${k}`].s))
  const last = runs.at(-1)[`browser_${k}`]
  emit({
    name: `store/browser-push/${k === 'base' ? 'first' : 'mod'}`,
    what,
    value: total / bs / 1e9,
    unit: 'GB/s',
    seconds: bs,
    native_seconds: ns,
    vs_native: ns / bs,
    novel_bytes: last.novel_bytes,
    sent_bytes: last.sent_bytes,
    // Both sides with their default compression (auto, where the store lists zstd).
    compressed_bytes: last.compressed_bytes,
    compressed_chunks: last.compressed_chunks,
    native_compressed_bytes: runs.at(-1)[`native_${k}`].compressed_bytes,
    sent_over_novel: last.novel_bytes ? last.sent_bytes / last.novel_bytes : null,
    chunks: last.chunks,
    novel_chunks: last.novel_chunks,
    native_novel_bytes: runs.at(-1)[`native_${k}`].novel_bytes,
    native_sent_bytes: runs.at(-1)[`native_${k}`].sent_bytes,
    // Packs: the page sends a File in 32 MiB packs (heads first), the native push in 8 MiB ones,
    // so the bytes sent differ by a pack's framing (16-byte header, 36-byte end frame) per pack.
    packs: last.packs,
    native_packs: runs.at(-1)[`native_${k}`].packs,
    // CPU seconds (medians): Chromium's processes and the store; the native client and the store
    cores: CORES,
    cpu_chromium: med(runs.map((x) => x[`browser_${k}`].cpu.chromium)),
    cpu_store: med(runs.map((x) => x[`browser_${k}`].cpu.store)),
    native_cpu_client: med(runs.map((x) => x[`native_${k}`].cpu.client)),
    native_cpu_store: med(runs.map((x) => x[`native_${k}`].cpu.store)),
    cpu_bound_seconds: med(runs.map((x) => (x[`browser_${k}`].cpu.chromium + x[`browser_${k}`].cpu.store) / CORES)),
  })
}
// The floors, and the push against them (a ratio near 1: the browser itself is the limit).
const readS = med(runs.map((x) => x.floor.read_s))
const upS = med(runs.map((x) => x.floor.upload_s))
emit({ name: 'store/browser-push/floor-read', what: `Chromium reading the ${size} File, 2 workers, 16 MiB slices (no chunking)`, value: total / readS / 1e9, unit: 'GB/s', seconds: readS, cpu_chromium: med(runs.map((x) => x.floor.read_cpu)), browser_mod_over_floor: med(runs.map((x) => x.browser_mod.s)) / readS })
emit({ name: 'store/browser-push/floor-upload', what: `Chromium uploading the ${size} File: fetch POSTs of its 8 MiB slices, 2 in flight, to a sink on 127.0.0.1`, value: total / upS / 1e9, unit: 'GB/s', seconds: upS, cpu_chromium: med(runs.map((x) => x.floor.upload_cpu)), vs_native: med(runs.map((x) => x.native_base.s)) / upS, native_push_seconds: med(runs.map((x) => x.native_base.s)), browser_first_over_floor: med(runs.map((x) => x.browser_base.s)) / upS, native_over_floor: med(runs.map((x) => x.native_base.s)) / upS })
const peak = Math.max(...runs.map((x) => x.browser_base.pss_peak))
/** The run with the highest peak: its memory added by process type at the peak, and each type's own peak (MiB). */
function addedBy() {
  const b = runs.reduce((m, x) => (x.browser_base.pss_peak > m.browser_base.pss_peak ? x : m)).browser_base
  const less = (o) => Object.fromEntries(Object.entries(o).map(([t, v]) => [t, Math.round(((v - (b.pss_before_by[t] ?? 0)) / 2 ** 20) * 10) / 10]))
  return { added_by_type_mib: less(b.pss_peak_by), added_type_peak_mib: less(b.pss_type_peak) }
}
process.stdout.write(`${JSON.stringify({ section: 'memory', runtime: 'chromium', name: `memory/browser-push/${size}${gcMode ? '/gc' : ''}`, what: `peak PSS of the browser's processes during the web page's push of a ${size} File (${workers} workers)${gcMode ? ', garbage collected before each sample' : ''}`, value: peak / 2 ** 20, unit: 'MiB', size, hash: 'blake3', workers, before_mib: Math.min(...runs.map((x) => x.browser_base.pss_before)) / 2 ** 20, added_mib: Math.max(...runs.map((x) => x.browser_base.pss_peak - x.browser_base.pss_before)) / 2 ** 20, ...addedBy(), chunks: runs.at(-1).browser_base.chunks, seconds: runs.at(-1).browser_base.s })}\n`)
