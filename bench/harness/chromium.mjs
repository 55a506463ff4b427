// Chromium rows of `npm run bench`: headless Debian chromium (playwright-core) opens
// bench/harness/page.html from a local server and runs the shared WebAssembly benchmark there,
// the library's workers being Web Workers and its inputs picked Files.
//   node bench/harness/chromium.mjs CONFIG.json   -> JSON rows on stdout; version on stderr
import { readFileSync, mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import path from 'node:path'
import { chromium } from 'playwright-core'
import { serveStatic } from './serve-static.mjs'

const root = new URL('../../', import.meta.url).pathname
const cfg = JSON.parse(readFileSync(process.argv[2], 'utf8'))
const exe = process.env.CUTPOINT_CHROMIUM ?? '/usr/bin/chromium'
const { server, url } = await serveStatic(root)
const dir = mkdtempSync(`${tmpdir()}/cutpoint-bench-chromium-`)
let ctx
try {
  ctx = await chromium.launchPersistentContext(dir, {
    executablePath: exe,
    headless: true,
    args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking', '--disable-component-update', '--disable-sync'],
  })
  const page = await ctx.newPage()
  page.on('console', (m) => process.stderr.write(`  chromium: ${m.text()}\n`))
  await page.goto(`${url}/bench/harness/page.html`)
  await page.waitForFunction(() => window.ready)
  await page.setInputFiles('#input', cfg.input)
  await page.setInputFiles('#versions', cfg.syn)
  const version = await page.evaluate(() => navigator.userAgent)
  process.stderr.write(`chromium-version: ${ctx.browser()?.version() ?? version}\n`)
  const rows = await page.evaluate((c) => window.run(c), { ...cfg, limitsUrl: `/${path.relative(root, cfg.limits)}` })
  for (const r of rows) process.stdout.write(`${JSON.stringify(r)}\n`)
} finally {
  await ctx?.close()
  server.close()
  rmSync(dir, { recursive: true, force: true })
}
