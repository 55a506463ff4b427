// Where a browser push's memory goes, by file size (issue #16: bounded whatever the size): the web
// page (web/app/dist, `npm run build:app`) in headless Chromium pushes FILE to a fresh
// `cutpoint serve` on 127.0.0.1 (2 workers, RapidCDC off). Every 250 ms, after a garbage
// collection of the page, the PSS of Chromium's processes by type (browser, renderer, GPU,
// network, storage); every second, the page's and the workers' JavaScript memory (wasm included)
// from performance.measureUserAgentSpecificMemory (eager, so it may count garbage of the workers,
// which the page cannot collect). Prints the peaks and the push's numbers.
//   node bench/harness/browser-memory.mjs FILE
import { chromium } from 'playwright-core'
import { spawn } from 'node:child_process'
import { mkdtempSync, rmSync, readdirSync, readFileSync } from 'node:fs'
import os from 'node:os'
import { serveStatic } from './serve-static.mjs'

const root = new URL('../../', import.meta.url).pathname
const file = process.argv[2]
if (!file) throw new Error('usage: node bench/harness/browser-memory.mjs FILE')
const { server, url } = await serveStatic(`${root}web/app/dist`)
const dir = mkdtempSync(`${os.tmpdir()}/cutpoint-memory-store-`)
const st = spawn(`${root}native/target/release/cutpoint`, ['serve', '--data', dir, '--listen', '127.0.0.1:0', '--cors-origin', url], { stdio: ['ignore', 'pipe', 'inherit'] })
const storeUrl = await new Promise((r) => {
  let b = ''
  st.stdout.on('data', (d) => {
    b += d
    const m = /listening on (http:\/\/\S+)/.exec(b)
    if (m) r(m[1])
  })
})
const pdir = mkdtempSync(`${os.tmpdir()}/cutpoint-memory-chromium-`)
const args = ['--headless', '--no-sandbox', '--disable-gpu', '--js-flags=--expose-gc', '--enable-blink-features=ForceEagerMeasureMemory']
const ctx = await chromium.launchPersistentContext(pdir, { executablePath: process.env.CUTPOINT_CHROMIUM ?? '/usr/bin/chromium', headless: true, args })
try {
  const page = await ctx.newPage()
  await page.goto(`${url}/index.html?store=${encodeURIComponent(storeUrl)}`)
  await page.waitForFunction(() => document.body.dataset.ready, null, { timeout: 60_000 })
  await page.fill('#workers', '2')
  await page.selectOption('#rapid', 'off')
  await page.click('#check-store')

  /** PSS (MiB) of this run's Chromium processes, by process type. */
  const pss = () => {
    const out = {}
    for (const pid of readdirSync('/proc')) {
      if (!/^\d+$/.test(pid)) continue
      try {
        const cmd = readFileSync(`/proc/${pid}/cmdline`, 'utf8')
        if (!cmd.includes(pdir)) continue
        const t = (/--type=([a-z-]+)/.exec(cmd)?.[1] ?? 'browser') + (/--utility-sub-type=([\w.]+)/.exec(cmd)?.[1]?.replace(/.*\./, ':') ?? '')
        const m = /Pss:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/smaps_rollup`, 'utf8'))
        if (m) out[t] = (out[t] ?? 0) + Number(m[1]) / 1024
      } catch {}
    }
    return out
  }
  const sum = (o) => Object.values(o).reduce((a, b) => a + b, 0)
  const before = pss()
  let peak = before
  const js = {}
  let running = true
  const sampler = (async () => {
    while (running) {
      await page.evaluate(() => globalThis.gc?.()).catch(() => {})
      const s = pss()
      if (sum(s) > sum(peak)) peak = s
      await new Promise((r) => setTimeout(r, 250))
    }
  })()
  const measurer = (async () => {
    while (running) {
      const m = await page
        .evaluate(async () => {
          const out = {}
          for (const b of (await performance.measureUserAgentSpecificMemory()).breakdown) {
            const k = b.attribution.map((a) => a.scope).join('+') || b.types.join(',') || 'other'
            out[k] = (out[k] ?? 0) + b.bytes / 2 ** 20
          }
          return out
        })
        .catch(() => ({}))
      for (const [k, v] of Object.entries(m)) js[k] = Math.max(js[k] ?? 0, v)
      await new Promise((r) => setTimeout(r, 1000))
    }
  })()
  await page.setInputFiles('#files', file)
  await page.waitForFunction(() => ['done', 'error', 'stopped'].includes(document.querySelector('li.job:last-of-type')?.dataset.state ?? ''), null, { timeout: 900_000, polling: 250 })
  running = false
  await Promise.all([sampler, measurer])
  const row = await page.$eval('li.job:last-of-type', (li) => ({ ...li.dataset }))
  const r = (o) => Object.fromEntries(Object.entries(o).map(([k, v]) => [k, Math.round(v)]))
  console.log(JSON.stringify({ file, state: row.state, bytes: Number(row.bytes), chunks: Number(row.chunks), seconds: Number(row.elapsedMs) / 1000, pss_before_mib: Math.round(sum(before)), pss_peak_mib: Math.round(sum(peak)), pss_peak_by_type: r(peak), js_peak_mib: r(js) }))
} finally {
  await ctx.close()
  st.kill()
  server.close()
  rmSync(dir, { recursive: true, force: true })
  rmSync(pdir, { recursive: true, force: true })
}
