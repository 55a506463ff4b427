// Where Chromium's CPU goes during one call of the bench page (bench/js/browser.html): CPU
// milliseconds per process type and thread name (from /proc/PID/task/*/stat) over the call.
// Threads that exit during the call (the library's workers) are not listed; their time is the
// rest of the wall-clock x cores.
//   node bench/js/chromium-cpu.mjs FILE SPEC...   SPEC: chunk:WORKERS:HASH | read:WORKERS
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

/** CPU ms by "process type/thread name" over every Chromium process now alive. */
function snapshot() {
  const m = new Map()
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
    for (const t of tasks) {
      try {
        const st = readFileSync(`/proc/${pid}/task/${t}/stat`, 'utf8')
        const comm = st.slice(st.indexOf('(') + 1, st.lastIndexOf(')')).replace(/[0-9]+$/, '')
        const f = st.slice(st.lastIndexOf(')') + 2).split(' ')
        const key = `${type}/${comm}`
        m.set(key, (m.get(key) ?? 0) + (Number(f[11]) + Number(f[12])) * 10)
      } catch {}
    }
  }
  return m
}

try {
  const page = await ctx.newPage()
  await page.goto(`http://127.0.0.1:${server.address().port}/bench/js/browser.html`)
  await page.waitForFunction(() => window.ready)
  await page.setInputFiles('#file', process.argv[2])
  for (const spec of process.argv.slice(3)) {
    const [what, w, hash] = spec.split(':')
    const a = snapshot()
    const t0 = Date.now()
    const line = what === 'read' ? await page.evaluate((w) => window.readBench(w), Number(w)) : await page.evaluate(([w, h]) => window.chunkBench(w, h), [Number(w), hash ?? 'blake3'])
    const wall = Date.now() - t0
    const b = snapshot()
    const rows = [...b].map(([k, v]) => [k, v - (a.get(k) ?? 0)]).filter(([, v]) => v >= 20).sort((x, y) => y[1] - x[1])
    console.log(line)
    console.log(`  wall ${wall} ms; CPU ms: ${rows.map(([k, v]) => `${k} ${v}`).join(', ')}`)
  }
} finally {
  await ctx.close()
  server.close()
  rmSync(dir, { recursive: true, force: true })
}
