// Where Chromium's CPU goes during one call of the bench page (bench/js/browser.html): CPU
// milliseconds per process type and thread name (from /proc/PID/task/*/stat) over the call.
// Threads that exit during the call (the library's workers) are not listed by thread; the
// per-process totals (/proc/PID/stat, which keeps the time of exited threads) include them.
//   node bench/js/chromium-cpu.mjs FILE SPEC...
//   SPEC: chunk:WORKERS:HASH[:SEGMENT[:LIB]] | read:WORKERS[:METHOD[:SEG[:DEPTH]]]
//   (LIB: a copy of web/dist under the repository to use instead, e.g. bench/data/lib-before)
//   (METHOD ab|frs|stream|byob, SEG like 4m, DEPTH 1|2: see readBench in browser.html)
import { chromium } from 'playwright-core'
import { mkdtempSync, readFileSync, readdirSync, rmSync } from 'node:fs'
import { execSync } from 'node:child_process'
import http from 'node:http'
import fs from 'node:fs'
import path from 'node:path'
import { root } from './common.mjs'

const types = { '.html': 'text/html', '.js': 'text/javascript', '.mjs': 'text/javascript', '.wasm': 'application/wasm' }
const server = http.createServer((req, res) => {
  const f = path.join(root, path.normalize(decodeURIComponent(new URL(req.url, 'http://x').pathname)))
  if (!f.startsWith(root) || !fs.existsSync(f) || !fs.statSync(f).isFile()) return res.writeHead(404).end()
  res.writeHead(200, { 'content-type': types[path.extname(f)] ?? 'application/octet-stream', 'cross-origin-opener-policy': 'same-origin', 'cross-origin-embedder-policy': 'require-corp' })
  fs.createReadStream(f).pipe(res)
})
await new Promise((r) => server.listen(0, '127.0.0.1', r))
const dir = mkdtempSync('/tmp/cutpoint-chromium-cpu-')
const ctx = await chromium.launchPersistentContext(dir, {
  executablePath: process.env.CUTPOINT_CHROMIUM ?? '/usr/bin/chromium',
  headless: true,
  args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking', '--disable-component-update', '--disable-sync'],
})

const bytes = (v) => parseInt(v) * ({ k: 1 << 10, m: 1 << 20, g: 1 << 30 }[v.slice(-1)] ?? 1)
const ticks = (st) => {
  const f = st.slice(st.lastIndexOf(')') + 2).split(' ')
  return (Number(f[11]) + Number(f[12])) * 10
}

/** CPU ms by "process type/thread name" over every Chromium process now alive, and by "process type" (whole processes, exited threads included). */
function snapshot() {
  const m = new Map()
  const procs = new Map()
  for (const pid of execSync('pgrep -f chromium || true').toString().trim().split('\n').filter(Boolean)) {
    let cmd
    let tasks
    try {
      cmd = readFileSync(`/proc/${pid}/cmdline`, 'utf8')
      tasks = readdirSync(`/proc/${pid}/task`)
    } catch {
      continue
    }
    const type = (cmd.match(/--type=([a-z-]+)/) ?? [, 'browser'])[1]
    try {
      procs.set(`${type}:${pid}`, ticks(readFileSync(`/proc/${pid}/stat`, 'utf8')))
    } catch {}
    for (const t of tasks) {
      try {
        const st = readFileSync(`/proc/${pid}/task/${t}/stat`, 'utf8')
        const comm = st.slice(st.indexOf('(') + 1, st.lastIndexOf(')')).replace(/[0-9]+$/, '')
        const key = `${type}/${comm}`
        m.set(key, (m.get(key) ?? 0) + ticks(st))
      } catch {}
    }
  }
  return { m, procs }
}

/** Per process type: CPU ms between two snapshots (a process that started in between counts from 0). */
function byType(a, b) {
  const t = new Map()
  for (const [k, v] of b.procs) {
    const type = k.split(':')[0]
    t.set(type, (t.get(type) ?? 0) + v - (a.procs.get(k) ?? 0))
  }
  return [...t].filter(([, v]) => v >= 20).sort((x, y) => y[1] - x[1])
}

try {
  const page = await ctx.newPage()
  await page.goto(`http://127.0.0.1:${server.address().port}/bench/js/browser.html`)
  await page.waitForFunction(() => window.ready)
  await page.setInputFiles('#file', process.argv[2])
  for (const spec of process.argv.slice(3)) {
    const [what, w, x, y, z] = spec.split(':')
    const a = snapshot()
    const t0 = Date.now()
    const line =
      what === 'read'
        ? (await page.evaluate(([w, o]) => window.readBench(w, o), [Number(w), { method: x ?? 'ab', seg: bytes(y ?? '4m'), depth: Number(z ?? 1) }])).line
        : await page.evaluate(([w, h, seg, lib]) => window.chunkBench(w, h, true, seg, lib), [Number(w), x ?? 'blake3', y ? bytes(y) : undefined, z || undefined])
    const wall = Date.now() - t0
    const b = snapshot()
    const rows = [...b.m].map(([k, v]) => [k, v - (a.m.get(k) ?? 0)]).filter(([, v]) => v >= 20).sort((x, y) => y[1] - x[1])
    const types = byType(a, b)
    console.log(`${spec}: ${line}`)
    console.log(`  wall ${wall} ms; CPU ms by process: ${types.map(([k, v]) => `${k} ${v}`).join(', ')}; total ${types.reduce((s, [, v]) => s + v, 0)}`)
    console.log(`  by thread (live ones): ${rows.map(([k, v]) => `${k} ${v}`).join(', ')}`)
  }
} finally {
  await ctx.close()
  server.close()
  rmSync(dir, { recursive: true, force: true })
}
