// Browser compression rows of `npm run bench` (issue #28: "browser push bytes sent with
// compression ÷ without, real versions"; one JSON row per line on stdout, read by run.mjs;
// progress on stderr): the web page (web/app, Vite build) in headless Debian Chromium pushes the
// TypeScript releases of restic.mjs (RELEASES in peer-lib.mjs, uncompressed tars from
// bench/real-data.sh) in order as versions of one name, once with its Compression setting `off`
// and once `auto`, each to a fresh `cutpoint serve` on 127.0.0.1. Bytes sent = the page's
// `sentBytes` of each push (every request body: queries, packs, commits), summed over the versions.
//   node bench/harness/browser-comp.mjs [--versions N] [--workers 2] [--modes off,auto]
// --versions N: the first N releases only (a shorter run; the ratio is then of those).
import { execFileSync, spawn, spawnSync } from 'node:child_process'
import { existsSync, linkSync, copyFileSync, mkdirSync, mkdtempSync, rmSync } from 'node:fs'
import os from 'node:os'
import { chromium } from 'playwright-core'
import { serveStatic } from './serve-static.mjs'
import { RELEASES, cli, log, root } from './peer-lib.mjs'

const argv = process.argv.slice(2)
const opt = (f, d) => (argv.includes(f) ? argv[argv.indexOf(f) + 1] : d)
const workers = Number(opt('--workers', '2'))
const releases = RELEASES.slice(0, Number(opt('--versions', RELEASES.length)))
const modes = opt('--modes', 'off,auto').split(',')
const exe = process.env.CUTPOINT_CHROMIUM ?? '/usr/bin/chromium'
const emit = (row) => process.stdout.write(`${JSON.stringify({ section: 'compression', runtime: 'chromium', workers, ...row })}\n`)

const got = spawnSync('bash', [`${root}bench/real-data.sh`, 'typescript', ...releases], { encoding: 'utf8', timeout: 900_000 })
if (got.status !== 0) {
  emit({ name: 'browser-comp/real', skipped: true, reason: `bench/real-data.sh failed (${(got.stderr || got.error?.message || '').trim().split('\n').pop()})` })
  process.exit(0)
}
const tars = got.stdout.trim().split('\n').filter(Boolean).map((p) => (p.startsWith('/') ? p : `${root}${p}`))
const app = `${root}web/app/dist`
if (!existsSync(`${app}/index.html`) || process.env.CUTPOINT_BENCH_REBUILD !== '0') {
  log('building the page: vite build -c web/app/vite.config.ts')
  execFileSync(`${root}node_modules/.bin/vite`, ['build', '-c', `${root}web/app/vite.config.ts`], { cwd: root, stdio: ['ignore', 'ignore', 'inherit'] })
}

// Each release under one file name (the page names a file by its name), hard-linked.
const work = mkdtempSync(`${os.tmpdir()}/cutpoint-browser-comp-`)
const files = tars.map((t, i) => {
  mkdirSync(`${work}/v${i}`)
  const f = `${work}/v${i}/typescript.tar`
  try {
    linkSync(t, f)
  } catch {
    copyFileSync(t, f)
  }
  return f
})

const { server, url: appUrl } = await serveStatic(app)
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

const sides = {}
let ctx
try {
  ctx = await chromium.launchPersistentContext(`${work}/profile`, {
    executablePath: exe,
    headless: true,
    args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking', '--disable-component-update', '--disable-sync'],
  })
  for (const mode of modes) {
    mkdirSync(`${work}/store-${mode}`)
    const st = await startStore(`${work}/store-${mode}`)
    const page = await ctx.newPage()
    try {
      await page.goto(`${appUrl}/index.html?store=${encodeURIComponent(st.url)}`)
      await page.waitForFunction(() => document.body.dataset.ready, null, { timeout: 60_000 })
      await page.fill('#workers', String(workers))
      await page.selectOption('#rapid', 'off')
      await page.selectOption('#compression', mode)
      await page.click('#check-store')
      const versions = []
      for (let i = 0; i < files.length; i++) {
        await page.setInputFiles('#files', files[i])
        // The page keeps a row per push: this push's is the (i + 1)-th.
        const sel = 'li.job:last-of-type'
        await page.waitForFunction(([s, n]) => document.querySelectorAll('li.job').length === n && ['done', 'error', 'stopped'].includes(document.querySelector(s)?.dataset.state ?? ''), [sel, i + 1], { timeout: 600_000, polling: 100 })
        const row = await page.$eval(sel, (li) => ({ ...li.dataset, text: li.querySelector('.job-state').textContent }))
        if (row.state !== 'done') throw new Error(`the page's push of ${releases[i]} (${mode}) ended: ${row.text}`)
        if (Number(row.version) !== i + 1) throw new Error(`the page's push of ${releases[i]} (${mode}) made version ${row.version}, not ${i + 1}`)
        versions.push({ release: releases[i], bytes: Number(row.bytes), novel_bytes: Number(row.novelBytes), compressed_bytes: Number(row.compressedBytes), compressed_chunks: Number(row.compressedChunks), sent_bytes: Number(row.sentBytes), s: Number(row.elapsedMs) / 1000 })
        log(`${mode} ${releases[i]}: sent ${versions.at(-1).sent_bytes} of ${versions.at(-1).bytes} bytes (novel ${versions.at(-1).novel_bytes}) in ${versions.at(-1).s.toFixed(2)} s`)
      }
      sides[mode] = versions
    } finally {
      await page.close()
      await stop(st)
    }
  }
} finally {
  await ctx?.close()
  server.close()
  rmSync(work, { recursive: true, force: true })
}

const sum = (xs) => xs.reduce((a, b) => a + b, 0)
const what = `TypeScript ${releases.join(', ')} (npm, uncompressed tars) pushed in order from the web page in Chromium (${workers} workers)`
for (const [mode, vs] of Object.entries(sides)) {
  emit({ name: `browser-comp/real/${mode}`, what: `${what}, compression ${mode}: bytes sent, all versions`, mode, versions: vs.length, bytes: sum(vs.map((v) => v.bytes)), novel_bytes: sum(vs.map((v) => v.novel_bytes)), compressed_bytes: sum(vs.map((v) => v.compressed_bytes)), compressed_chunks: sum(vs.map((v) => v.compressed_chunks)), sent_bytes: sum(vs.map((v) => v.sent_bytes)), seconds: sum(vs.map((v) => v.s)), value: sum(vs.map((v) => v.sent_bytes)), unit: 'bytes', per_version: vs })
}
if (sides.auto && sides.off) {
  const on = sum(sides.auto.map((v) => v.sent_bytes))
  const off = sum(sides.off.map((v) => v.sent_bytes))
  emit({ name: 'browser-comp/real/auto-over-off', what: `${what}: bytes sent with compression auto ÷ off (issue #28 asks ≤ 0.35)`, mode: 'auto/off', sent_bytes: on, off_sent_bytes: off, value: on / off, unit: 'ratio', goal: 0.35, seconds_auto: sum(sides.auto.map((v) => v.s)), seconds_off: sum(sides.off.map((v) => v.s)) })
  log(`browser push bytes sent, auto ÷ off: ${(on / off).toFixed(3)} (${on} / ${off})`)
}
