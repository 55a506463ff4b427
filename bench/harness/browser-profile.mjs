// Profiling the library in headless Chromium, step by step, for what browser-push.mjs measures as
// a whole (issue #16): a page (tests/browser/index.html, cross-origin isolated) picks a File and
// runs the steps given, each timed on its own; a `cutpoint serve` on 127.0.0.1 for the pushes
// and a sink (POST: counts the body) for the upload experiments.
//   node bench/harness/browser-profile.mjs FILE STEP,STEP,...
// Steps:
//   readN            the main thread reads the File in N MiB slices (default 16)
//   stream           the main thread reads File.stream()
//   wkK-S-ab|frs     K workers read it in S MiB slices (arrayBuffer | FileReaderSync)
//   upread|upbuf|upslice  read 4 MiB runs, frame ~9.6 KiB pieces into packs (PACK MiB, default 8),
//                    POST them 2 in flight as a Blob | a Uint8Array | a Blob of File slices
//   upxhrblob|upxhrbuf    the same through XMLHttpRequest
//   upfile[-S]|uptoc[-S]  POST the File's own S (else PACK, else 8) MiB slices (CONC in flight, default 2) | each as a Blob
//                    behind a 32 KiB Uint8Array (a heads-first pack's shape)
//   wkup-blob|wkup-buf    read and POST from a worker, as a Blob | a Uint8Array
//   chunk[-S]|chunknone[-S]  chunk() with BLAKE3 | no fingerprint, 2 workers, span S MiB (default: the library's)
//   push | pushNAME  createClient().push of the File (a new name | NAME), with its stage times
//   push-S[-K]       a first push of the File to a fresh namespace, S MiB packs, K uploads in flight
//                    (PCONC=N uploads in flight, PPACK=MiB per pack, PCOMP=auto|off|max: the client's options)
//   file:PATH        pick another file
// PS=1: CPU seconds each process name used during each step (/proc: Chromium's, the store's, node's);
// PS=threads: Chromium's split by process type and thread (see cpuByName); PS=procs: by process
// type, threads that ended included (a finished call's workers).
// JSFLAGS=...: V8 flags for Chromium (--perf-basic-prof: names for `perf report`).
// PROF=PREFIX: a CPU profile of the page's main thread for the steps starting with PREFIX (the
// 25 functions with the most self time).
// Build first: native/target/release/cutpoint, `npm run build:js`.
import { chromium } from 'playwright-core'
import { serveStatic } from './serve-static.mjs'
import { spawn } from 'node:child_process'
import { mkdtempSync, rmSync, readdirSync, readFileSync } from 'node:fs'
import os from 'node:os'
const root = new URL('../..', import.meta.url).pathname.replace(/\/$/, '')
const file = process.argv[2]
const what = (process.argv[3] ?? 'read,chunk,chunknone,push').split(',')
if (!file) throw new Error('usage: node bench/harness/browser-profile.mjs FILE STEP,STEP,...')
// Any POST is the sink (the upload steps' baseline).
const { server, url: base } = await serveStatic(root, { sink: () => true })
const dir = mkdtempSync(`${os.tmpdir()}/cutpoint-profile-store-`)
const st = spawn(`${root}/native/target/release/cutpoint`, ['serve', '--data', dir, '--listen', '127.0.0.1:0', '--cors-origin', base], { stdio: ['ignore', 'pipe', 'inherit'] })
const storeUrl = await new Promise((r) => { let b = ''; st.stdout.on('data', (d) => { b += d; const m = /listening on (http:\/\/\S+)/.exec(b); if (m) r(m[1]) }) })
const profileDir = mkdtempSync(`${os.tmpdir()}/cutpoint-profile-chromium-`)
const ctx = await chromium.launchPersistentContext(profileDir, { executablePath: '/usr/bin/chromium', headless: true, args: ['--headless', '--no-sandbox', '--disable-gpu', ...(process.env.JSFLAGS ? [`--js-flags=${process.env.JSFLAGS}`] : [])] })
const page = await ctx.newPage()
page.on('console', (m) => console.log('page:', m.text()))
await page.goto(`${base}/tests/browser/index.html?pack=${process.env.PACK ?? 8}&conc=${process.env.CONC ?? 2}&pconc=${process.env.PCONC ?? ''}&ppack=${process.env.PPACK ?? ''}&pcomp=${process.env.PCOMP ?? ''}`)
await page.evaluate(() => window.ready)
await page.setInputFiles('#file', file)
// CPU seconds by process name (utime + stime from /proc), this user's processes only
// With PS=threads, Chromium's by process type and thread name instead (a thread that ended
// during the step, such as a worker of a finished push, takes its CPU seconds with it).
const byThread = process.env.PS === 'threads'
// PS=procs: Chromium's by process type, from each process's own counters (which keep the CPU
// seconds of its threads that ended, such as a finished push's workers).
const byProc = process.env.PS === 'procs'
const cpuByName = () => {
  const out = {}
  for (const pid of readdirSync('/proc').filter((d) => /^\d+$/.test(d))) {
    try {
      const cmd = byThread || byProc ? readFileSync(`/proc/${pid}/cmdline`, 'utf8') : ''
      const typ = cmd.includes('chromium') ? (/--type=([a-z-]+)/.exec(cmd)?.[1] ?? 'browser') + (/--utility-sub-type=([\w.]+)/.exec(cmd)?.[1]?.replace(/.*\./, ':') ?? '') : undefined
      for (const tid of typ && !byProc ? readdirSync(`/proc/${pid}/task`) : [undefined]) {
        const st = readFileSync(tid ? `/proc/${pid}/task/${tid}/stat` : `/proc/${pid}/stat`, 'utf8')
        const name = st.slice(st.indexOf('(') + 1, st.lastIndexOf(')'))
        const f = st.slice(st.lastIndexOf(')') + 2).split(' ')
        const k = typ ? (byProc ? typ : `${typ}/${name.replace(/\d+$/, '')}`) : name
        out[k] = (out[k] ?? 0) + (Number(f[11]) + Number(f[12])) / 100
      }
    } catch {}
  }
  return out
}
let cpu0 = cpuByName()
for (const w of what) {
  if (w.startsWith('file:')) { await page.setInputFiles('#file', w.slice(5)); continue }
  const prof = process.env.PROF && w.startsWith(process.env.PROF)
  let cdp
  if (prof) { cdp = await page.context().newCDPSession(page); await cdp.send('Profiler.enable'); await cdp.send('Profiler.setSamplingInterval', { interval: 200 }); await cdp.send('Profiler.start') }
  const r = await page.evaluate(async ({ w, storeUrl }) => {
    const cp = await window.eval("import('/web/dist/web/src/index.js')")
    await cp.init()
    const f = document.getElementById('file').files[0]
    const t0 = performance.now()
    let n = 0
    if (w.startsWith('read')) {
      const sz = (Number(w.slice(4)) || 16) << 20
      for (let o = 0; o < f.size; o += sz) n += (await f.slice(o, o + sz).arrayBuffer()).byteLength
    } else if (w.startsWith('up') && !/^up(file|toc)(-\d+)?$/.test(w)) {
      // upread: read 4 MiB runs, concat into 8 MiB packs, Blob, POST; upslice: Blob of heads + per-chunk slices
      const CH = 9576, PACK = (Number(new URLSearchParams(location.search).get('pack')) || 8) << 20
      let parts = [], len = 0
      const inflight = new Set()
      const flush = async () => {
        const body = w !== 'upslice' ? (() => { const out = new Uint8Array(len); let at = 0; for (const p of parts) { out.set(p, at); at += p.length } return w === 'upbuf' || w === 'upxhrbuf' ? out : new Blob([out]) })() : new Blob(parts)
        parts = []; len = 0
        while (inflight.size >= 2) await Promise.race(inflight)
        const p = (w.startsWith('upxhr') ? new Promise((res, rej) => { const x = new XMLHttpRequest(); x.open('POST', '/sink'); x.responseType = 'text'; x.onload = () => res({ json: () => JSON.parse(x.responseText) }); x.onerror = rej; x.send(w === 'upxhrblob' ? body : body instanceof Blob ? body : body) }) : fetch('/sink', { method: 'POST', body })).then((r) => r.json()).then((j) => { n += j.n }).finally(() => inflight.delete(p))
        inflight.add(p)
      }
      const head = new Uint8Array(36)
      for (let o = 0; o < f.size; o += 4 << 20) {
        const e = Math.min(o + (4 << 20), f.size)
        const buf = w !== 'upslice' ? new Uint8Array(await f.slice(o, e).arrayBuffer()) : null
        for (let c = o; c < e; c += CH) {
          const ce = Math.min(c + CH, e)
          parts.push(head, buf ? buf.subarray(c - o, ce - o) : f.slice(c, ce)); len += 36 + ce - c
          if (len >= PACK) await flush()
        }
      }
      if (len) await flush()
      await Promise.all([...inflight])
    } else if (/^up(file|toc)(-\d+)?$/.test(w)) {
      // uptoc: each slice behind a ~31 KiB part (a pack's heads, heads-first layout)
      const toc = new Uint8Array(16 + 37 * 876)
      const inflight = new Set()
      const K = Number(new URLSearchParams(location.search).get('conc')) || 2
      const S = (Number(w.split('-')[1]) || Number(new URLSearchParams(location.search).get('pack')) || 8) << 20
      for (let o = 0; o < f.size; o += S) {
        while (inflight.size >= K) await Promise.race(inflight)
        const p = fetch('/sink', { method: 'POST', body: w.startsWith('uptoc') ? new Blob([toc, f.slice(o, o + S)]) : f.slice(o, o + S) }).then((r) => r.json()).then((j) => { n += j.n }).finally(() => inflight.delete(p))
        inflight.add(p)
      }
      await Promise.all([...inflight])
    } else if (w.startsWith('wkup')) {
      const src = `onmessage = async (e) => { const { f, m, url } = e.data; let n = 0; const inflight = new Set()
        const buf = new Uint8Array(8 << 20)
        for (let o = 0; o < f.size; o += 8 << 20) {
          const d = new Uint8Array(await f.slice(o, o + (8 << 20)).arrayBuffer())
          buf.set(d)
          const body = m === 'buf' ? buf.slice(0, d.length) : new Blob([buf.subarray(0, d.length)])
          while (inflight.size >= 2) await Promise.race(inflight)
          const p = fetch(url, { method: 'POST', body }).then((r) => r.json()).then((j) => { n += j.n }).finally(() => inflight.delete(p))
          inflight.add(p)
        }
        await Promise.all([...inflight]); postMessage(n) }`
      const url = URL.createObjectURL(new Blob([src], { type: 'text/javascript' }))
      const wk = new Worker(url)
      n = await new Promise((res) => { wk.onmessage = (e) => res(e.data); wk.postMessage({ f, m: w.slice(5), url: location.origin + '/sink' }) })
      wk.terminate()
    } else if (w === 'stream') {
      const rd = f.stream().getReader()
      for (;;) { const { done, value } = await rd.read(); if (done) break; n += value.length }
    } else if (w.startsWith('wk')) {
      // wkK-S-M: K workers, slices of S MiB, mode M (ab: arrayBuffer, frs: FileReaderSync)
      const [k, s, m] = w.slice(2).split('-')
      const src = `onmessage = async (e) => { const { f, a, b, sz, m } = e.data; let n = 0; const fr = m === 'frs' ? new FileReaderSync() : null;
        for (let o = a; o < b; o += sz) { const sl = f.slice(o, Math.min(o + sz, b)); n += m === 'frs' ? fr.readAsArrayBuffer(sl).byteLength : (await sl.arrayBuffer()).byteLength }
        postMessage(n) }`
      const url = URL.createObjectURL(new Blob([src], { type: 'text/javascript' }))
      const K = Number(k), per = Math.ceil(f.size / K / (1 << 20)) << 20
      const ws = Array.from({ length: K }, () => new Worker(url))
      const rs = await Promise.all(ws.map((wk, i) => new Promise((res) => { wk.onmessage = (e) => res(e.data); wk.postMessage({ f, a: i * per, b: Math.min(f.size, (i + 1) * per), sz: Number(s) << 20, m }) })))
      ws.forEach((x) => x.terminate())
      n = rs.reduce((a, b) => a + b, 0)
    } else if (w.startsWith('chunk')) {
      const [kind, sp] = w.split('-')
      const it = cp.chunk(f, { workers: 2, hash: kind === 'chunk' ? 'blake3' : 'none', span: sp ? Number(sp) << 20 : undefined })
      for await (const b of it.batches()) n += b.length
    } else if (w.startsWith('push')) {
      const q = new URLSearchParams(location.search)
      // push-S[-K]: a first push (a fresh namespace) in S MiB packs, K in flight
      const m = /^push-(\d+)(?:-(\d+))?$/.exec(w)
      const c = cp.createClient({ store: storeUrl, namespace: m ? 'ns' + Math.random().toString(36).slice(2) : undefined, workers: 2, concurrency: Number(m?.[2] ?? q.get('pconc')) || undefined, packSize: Number(m?.[1] ?? q.get('ppack')) << 20 || undefined, compression: q.get('pcomp') || undefined })
      const marks = []
      let last = ''
      const r = await c.push(f, { name: w === 'push' || m ? 'x' + Math.random() : w, onProgress: (p) => { if (p.stage !== last) { last = p.stage; marks.push(p.stage + '@' + ((performance.now() - t0) / 1000).toFixed(2)) } } })
      console.log('stages (s):', marks.join(' '))
      n = r.chunks
    }
    return { w, n, s: (performance.now() - t0) / 1000, coi: crossOriginIsolated }
  }, { w, storeUrl })
  console.log(JSON.stringify(r))
  // PS=1: the processes' CPU seconds so far (Chromium's, the store's, this harness's)
  if (process.env.PS) {
    const now = cpuByName()
    console.log('cpu s:', Object.entries(now).map(([k, v]) => `${k} ${(v - (cpu0[k] ?? 0)).toFixed(1)}`).filter((x) => !x.endsWith(' 0.0')).join(', '))
    cpu0 = now
  }
  if (prof) {
    const { profile } = await cdp.send('Profiler.stop')
    const self = new Map(); const byId = new Map(profile.nodes.map((n) => [n.id, n]))
    const dt = profile.timeDeltas; const total = dt.reduce((a, b) => a + b, 0)
    const counts = new Map(); profile.samples.forEach((id, i) => counts.set(id, (counts.get(id) ?? 0) + (dt[i] ?? 0)))
    for (const [id, t] of counts) { const n = byId.get(id); const k = `${n.callFrame.functionName || '(anon)'} ${n.callFrame.url.split('/').pop()}:${n.callFrame.lineNumber}`; self.set(k, (self.get(k) ?? 0) + t) }
    console.log('total ms', (total / 1000).toFixed(0))
    for (const [k, t] of [...self].sort((a, b) => b[1] - a[1]).slice(0, 25)) console.log((t / 1000).toFixed(0).padStart(7), k)
  }
}
await ctx.close(); st.kill(); server.close(); rmSync(dir, { recursive: true, force: true }); rmSync(profileDir, { recursive: true, force: true })
