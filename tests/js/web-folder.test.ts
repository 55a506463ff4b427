// The web page (web/app, Vite build) in headless Chromium against a real `cutpoint serve` on
// 127.0.0.1: a chosen folder of many small generated files is one `pushMany` pipeline with a row
// per file (virtualized: only the rows in view are in the DOM). Two ways of choosing it:
// - 'picker': "Choose a folder…" with `showDirectoryPicker()` (the page's way in Chromium). The
//   picker's dialog cannot be driven here, so `showDirectoryPicker` is given a folder of the
//   origin private file system holding the same files (written by a worker beforehand); the page
//   walks its handles as it would a picked folder's. The frame gaps from the click to the last
//   row (requestAnimationFrame deltas) are asserted: no gap over GAP_LIMIT ms (500 by default on
//   this loaded machine; the issue's goal is 50 ms: CUTPOINT_FOLDER_GAP=50 on a quiet one).
// - 'drop': the folder (a real directory on disk) dropped on the drop zone through CDP
//   `Input.dispatchDragEvent` (dragEnter, dragOver, drop with its path): Chromium registers it as
//   a dropped folder (an isolated file system, as an OS drop does; the page must be served over
//   http, an opaque origin cannot read it), and the page walks it through `webkitGetAsEntry()`
//   directory readers. Its frame gaps are asserted as the picker's.
// - 'input': the `<input webkitdirectory>` fallback (other browsers), set by Playwright. Chromium
//   builds its File list on the page's thread before the page's code runs (one task of about 5 s
//   at 10,000 files), so its gaps are printed, not asserted.
// Each prints the bench row `folder-frames`. CUTPOINT_FOLDER_FILES sets the count (default 1,000;
// the issue's figure is 10,000); CUTPOINT_FOLDER_SOURCE=picker|drop|input runs one of them.
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { chromium, type BrowserContext, type Page } from 'playwright-core'
import { execFileSync, spawn, type ChildProcess } from 'node:child_process'
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import type { Server } from 'node:http'
import { root } from './helpers'
import { serve } from './server'
import { cutpointBin } from './store'

const CHROMIUM = process.env.CUTPOINT_CHROMIUM ?? '/usr/bin/chromium'
const ARGS = ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking', '--disable-component-update', '--disable-sync']
const APP = `${root}web/app`
const PROFILE = process.env.CUTPOINT_FOLDER_PROFILE
const N = Math.max(10, Number(process.env.CUTPOINT_FOLDER_FILES) || 1000)
const SOURCES = (['picker', 'drop', 'input'] as const).filter((s) => !process.env.CUTPOINT_FOLDER_SOURCE || process.env.CUTPOINT_FOLDER_SOURCE === s)
/**
 * The largest frame gap the picker's push may show (ms). The issue's goal is 50 ms; this shared
 * 2-vCPU machine (load average 8-14 while the others build and test) has gaps of 100-300 ms from
 * preemption alone, so the default catches the page's own freezes (the input's File list: 1.4 s
 * at 1,000 files, 5 s at 10,000) and CUTPOINT_FOLDER_GAP=50 asserts the goal on a quiet machine.
 */
const GAP_LIMIT = Number(process.env.CUTPOINT_FOLDER_GAP) || 500

/**
 * File i's bytes: N small files (16 B .. 16 KiB), the first few larger (200 KiB: several chunks
 * each, still chunked whole by a worker). As source text: the OPFS writer (a worker in the page)
 * makes the same bytes.
 */
const GEN = `function gen(i) {
  const b = new Uint8Array(i < 4 ? 200 << 10 : 16 + ((i * 7919) % (16 << 10)))
  let s = (Math.imul(i + 1, 2654435761) >>> 0) || 1
  for (let k = 0; k < b.length; k++) {
    s ^= s << 13
    s ^= s >>> 17
    s ^= s << 5
    b[k] = s & 0xff
  }
  return b
}`
const gen: (i: number) => Uint8Array = new Function(`${GEN}; return gen`)()
const fileName = (i: number) => `${i % 2 ? 'a' : 'b'}/f${String(i).padStart(5, '0')}.bin`

let tmp = ''
let ctx: BrowserContext
let server: Server
let proc: ChildProcess
let storeUrl = ''
let pageUrl = ''

beforeAll(async () => {
  tmp = mkdtempSync(`${tmpdir()}/cutpoint-folder-`)
  // N files (`gen`), in two subfolders.
  for (const sub of ['a', 'b']) mkdirSync(`${tmp}/folder/${sub}`, { recursive: true })
  for (let i = 0; i < N; i++) writeFileSync(`${tmp}/folder/${fileName(i)}`, gen(i))
  // CUTPOINT_FOLDER_PROFILE=FILE: the page's main thread profiled (CDP) during the push, written to FILE (unminified build).
  execFileSync(`${root}node_modules/.bin/vite`, ['build', '-c', `${APP}/vite.config.ts`, ...(PROFILE ? ['--minify', 'false'] : [])], { cwd: root, stdio: 'pipe' })
  const s = await serve(`${APP}/dist`, true)
  server = s.server
  pageUrl = s.url
  mkdirSync(`${tmp}/store`)
  storeUrl = await new Promise<string>((resolve, reject) => {
    proc = spawn(cutpointBin, ['serve', '--data', `${tmp}/store`, '--listen', '127.0.0.1:0', '--cors-origin', pageUrl], { stdio: ['ignore', 'pipe', 'pipe'] })
    let out = ''
    const timer = setTimeout(() => reject(new Error(`cutpoint serve did not start: ${out}`)), 20_000)
    const seen = (d: Buffer) => {
      out += d
      const m = /cutpoint serve: listening on (http:\/\/\S+)/.exec(out)
      if (m) {
        clearTimeout(timer)
        resolve(m[1])
      }
    }
    proc.stdout!.on('data', seen)
    proc.stderr!.on('data', seen)
  })
  ctx = await chromium.launchPersistentContext(`${tmp}/profile`, { executablePath: CHROMIUM, headless: true, args: ARGS, viewport: { width: 1100, height: 900 } })
}, 240_000)

afterAll(async () => {
  await ctx?.close()
  server?.close()
  if (proc && proc.exitCode === null) {
    proc.kill('SIGTERM')
    await new Promise((r) => proc.once('exit', r))
  }
  if (tmp) rmSync(tmp, { recursive: true, force: true })
})

/** A worker (in the page) that writes the N files into the origin private file system, under folder/. */
const OPFS_WRITER = `${GEN}
onmessage = async (e) => {
  try {
    const n = e.data
    const top = await (await navigator.storage.getDirectory()).getDirectoryHandle('folder', { create: true })
    const subs = { a: await top.getDirectoryHandle('a', { create: true }), b: await top.getDirectoryHandle('b', { create: true }) }
    // One file at a time (8 at once hung twice in 3 runs at 10,000 files on the loaded machine).
    for (let i = 0; i < n; i++) {
      const h = await subs[i % 2 ? 'a' : 'b'].getFileHandle('f' + String(i).padStart(5, '0') + '.bin', { create: true })
      const a = await h.createSyncAccessHandle()
      a.truncate(0)
      a.write(gen(i), { at: 0 })
      a.close()
      if (i % 100 === 99) postMessage(i + 1)
    }
    postMessage('ok')
  } catch (err) {
    postMessage(String(err))
  }
}`

/**
 * Drops the directory `dir` on the page's drop zone as a user would from a file manager: CDP
 * drag events carrying its path (Chromium grants the page the dropped folder; its entries are
 * read through directory readers, nothing is made up in the page).
 */
async function dropFolder(page: Page, dir: string): Promise<void> {
  const box = (await page.locator('#drop').boundingBox())!
  const cdp = await ctx.newCDPSession(page)
  const at = { x: box.x + box.width / 2, y: box.y + box.height / 2 }
  const data = { items: [], files: [dir], dragOperationsMask: 1 }
  for (const type of ['dragEnter', 'dragOver', 'drop'] as const) await cdp.send('Input.dispatchDragEvent', { type, ...at, data })
  await cdp.detach()
}

describe.each(SOURCES)('the page pushes a folder as one pipeline (%s)', (source) => {
  it(`${N} files: a row per file, each committed; the DOM holds only the rows in view`, async () => {
    const page = await ctx.newPage()
    const errors: string[] = []
    page.on('pageerror', (e) => errors.push(String(e)))
    page.on('console', (m) => m.text().startsWith('cutpoint-test') && console.log(m.text()))
    await page.goto(`${pageUrl}/index.html?store=${encodeURIComponent(storeUrl)}&ns=${source}`)
    await page.waitForFunction(() => document.body.dataset.ready, null, { timeout: 30_000 })
    expect(await page.evaluate(() => document.body.dataset.ready), errors.join('; ')).toBe('1')
    await page.fill('#workers', '2')
    await page.click('#check-store')
    await page.waitForFunction(() => /connected/.test(document.getElementById('store-status')!.textContent!))
    const tw = Date.now()
    if (source === 'picker') {
      // The folder the "picker" gives: the same files, in the origin private file system
      // (written before the frames are measured).
      const wrote = await page.evaluate(async ({ src, n }) => {
        const w = new Worker(URL.createObjectURL(new Blob([src], { type: 'text/javascript' })))
        // An answer, or what it says when no file was written for 60 s (not a silent hang).
        const r = await new Promise((res) => {
          let done = 0
          const watch = () => setTimeout(() => res(`the writer stalled after ${done} files`), 60_000)
          let t = watch()
          w.onmessage = (e) => {
            clearTimeout(t)
            if (typeof e.data !== 'number') return res(e.data)
            done = e.data
            t = watch()
            if (done % 1000 === 0) console.log(`cutpoint-test: ${done} files written`)
          }
          w.postMessage(n)
        })
        w.terminate()
        const top = await (await navigator.storage.getDirectory()).getDirectoryHandle('folder')
        ;(window as any).showDirectoryPicker = async () => top
        return r
      }, { src: OPFS_WRITER, n: N })
      expect(wrote).toBe('ok')
      console.log(`folder-frames (${source}): ${N} files written to the origin private file system in ${((Date.now() - tw) / 1000).toFixed(1)} s`)
    }
    // Frame gaps from here on (requestAnimationFrame deltas).
    await page.evaluate(() => {
      const w = window as any
      w.__gaps = { max: 0, n: 0, last: 0, on: true }
      w.__gaps.long = []
      // Long tasks (≥ 50 ms of the page's thread busy): a gap without one is the machine, not the page's code.
      w.__gaps.tasks = []
      new PerformanceObserver((l) => {
        for (const e of l.getEntries()) if (w.__gaps.on) w.__gaps.tasks.push(Math.round(e.duration))
      }).observe({ type: 'longtask' })
      // Long animation frames (Chromium's LoAF): what held the frame (scripts by invoker, style and layout, the rest).
      w.__gaps.frames = []
      new PerformanceObserver((l) => {
        for (const e of l.getEntries() as any[]) {
          if (!w.__gaps.on) continue
          const scripts = (e.scripts ?? []).map((x: any) => ({ ms: Math.round(x.duration), what: `${x.invoker ?? x.name}${x.sourceFunctionName ? ` (${x.sourceFunctionName})` : ''}` }))
          const script = scripts.reduce((a: number, x: any) => a + x.ms, 0)
          const layout = e.styleAndLayoutStart ? Math.round(e.startTime + e.duration - e.styleAndLayoutStart) : 0
          const render = e.renderStart ? Math.round(e.startTime + e.duration - e.renderStart) : 0
          w.__gaps.frames.push({ ms: Math.round(e.duration), blocking: Math.round(e.blockingDuration ?? 0), script, render, layout, top: scripts.sort((a: any, b: any) => b.ms - a.ms).slice(0, 2).map((x: any) => `${x.what} ${x.ms} ms`).join(', ') })
        }
      }).observe({ type: 'long-animation-frame' })
      const tick = (t: number) => {
        const g = w.__gaps
        const st = (document.querySelector('li.folder') as HTMLElement | null)?.dataset
        const now = `${st?.state ?? 'no folder row'} ${st?.done ?? ''}/${st?.bytes ?? ''}`
        if (g.last && t - g.last > 50) g.long.push(`${Math.round(t - g.last)} ms (${g.prev} → ${now})`)
        g.prev = now
        if (g.last) g.max = Math.max(g.max, t - g.last)
        g.last = t
        g.n++
        // Until the push has ended and the page's listing of the store (built after it) too.
        const listed = !/loading/.test(document.getElementById('list-status')!.textContent!)
        if (g.on && !((st?.state === 'done' || st?.state === 'error') && listed)) requestAnimationFrame(tick)
      }
      requestAnimationFrame(tick)
    })
    const cdp = PROFILE ? await ctx.newCDPSession(page) : undefined
    if (cdp) {
      await cdp.send('Profiler.enable')
      await cdp.send('Profiler.setSamplingInterval', { interval: 500 })
      await cdp.send('Profiler.start')
    }
    const t0 = Date.now()
    if (source === 'picker') await page.click('#pick-folder')
    else if (source === 'drop') await dropFolder(page, `${tmp}/folder`)
    else await page.setInputFiles('#folder', `${tmp}/folder`)
    await page.waitForFunction(() => ['done', 'error', 'stopped'].includes((document.querySelector('li.folder') as HTMLElement)?.dataset.state ?? ''), null, { timeout: 300_000 })
    const secs = (Date.now() - t0) / 1000
    // The frames are measured until the page's listing of the store is built too.
    await page.waitForFunction(() => !/loading/.test(document.getElementById('list-status')!.textContent!), null, { timeout: 300_000 })
    if (cdp) writeFileSync(PROFILE!, JSON.stringify((await cdp.send('Profiler.stop')).profile))
    const gaps = await page.evaluate(() => {
      const g = (window as any).__gaps
      g.on = false
      const loaf = (g.frames as { ms: number; blocking: number; script: number; render: number; layout: number; top: string }[]).sort((a, b) => b.ms - a.ms).slice(0, 3)
      return {
        max: g.max,
        frames: g.n,
        long: g.long.slice(0, 20),
        tasks: g.tasks as number[],
        loaf: loaf.map((f) => `${f.ms} ms (blocking ${f.blocking}; script ${f.script}, rendering ${f.render} of which style and layout ${f.layout}${f.top ? `; ${f.top}` : ''})`),
      }
    })
    const folder = page.locator('li.folder')
    const d = await folder.evaluate((el) => ({ ...(el as HTMLElement).dataset, head: `${el.querySelector('.job-head')!.textContent} (first row: ${el.querySelector('.row-state')?.textContent})` }))
    expect(d.state, d.head ?? '').toBe('done')
    expect(Number(d.files)).toBe(N)
    expect(Number(d.done), d.head ?? "").toBe(N)
    expect(Number(d.failed)).toBe(0)
    // Batch commits: a few requests, not one per file.
    expect(Number(d.commitRequests)).toBeLessThanOrEqual(Math.ceil(N / 4096))
    // Virtualized: the DOM holds the rows in view, not N.
    const rows = await folder.locator('li.folder-row').count()
    expect(rows).toBeGreaterThan(0)
    expect(rows).toBeLessThan(100)
    expect(await folder.locator('li.folder-row').first().getAttribute('data-stage')).toBe('done')
    // The last row, scrolled to: committed as version 1 under its path in the folder.
    await folder.locator('.folder-rows').evaluate((el) => (el.scrollTop = el.scrollHeight))
    await page.waitForFunction((n) => !!document.querySelector(`li.folder-row[data-index="${n - 1}"]`), N)
    const last = folder.locator(`li.folder-row[data-index="${N - 1}"]`)
    expect(await last.getAttribute('data-version')).toBe('1')
    expect(await last.getAttribute('data-name')).toMatch(/^folder\/[ab]\/f\d{5}\.bin$/)
    // The chunks the page's workers made are the native chunker's (boundaries and ids, in order).
    for (const i of [0, 1, 2, 3, 17, N - 1]) {
      const name = fileName(i)
      const native = execFileSync(cutpointBin, ['chunk', '--format', 'jsonl', `${tmp}/folder/${name}`], { encoding: 'utf8' })
        .trim()
        .split('\n')
        .filter(Boolean)
        .map((l) => JSON.parse(l).hash as string)
      if (i < 4) expect(native.length).toBeGreaterThan(3)
      const recipe = await (await fetch(`${storeUrl}/v1/ns/${source}/recipes/${encodeURIComponent(`folder/${name}`)}`)).text()
      const known = new Set(native)
      expect([...recipe.matchAll(/\b[0-9a-f]{64}\b/g)].map((m) => m[0]).filter((id) => known.has(id)), name).toEqual(native)
    }
    // The store lists every file.
    const listed = await (await fetch(`${storeUrl}/v1/ns/${source}/files`)).json()
    expect(listed.files.length).toBe(N)
    // The bench row (not asserted: timing on a shared machine).
    console.log(`folder-frames (${source}): ${N} files pushed from the page in ${secs.toFixed(1)} s; max frame gap ${gaps.max.toFixed(0)} ms over ${gaps.frames} frames (goal ≤ 50 ms); gaps over 50 ms: ${gaps.long.join(', ') || 'none'}; long tasks (ms): ${gaps.tasks.length} (${[...gaps.tasks].sort((a, b) => b - a).slice(0, 10).join(', ')}); longest animation frames: ${gaps.loaf.join('; ') || 'none'}`)
    // `npm run bench` (step page-folder) reads this row.
    console.log(
      JSON.stringify({ section: 'store', runtime: 'chromium', name: `page-folder/${N}/${source}/max-frame-gap`, value: gaps.max, unit: 'ms', goal: 50, frames: gaps.frames, long_tasks: gaps.tasks.length, max_long_task: Math.max(0, ...gaps.tasks), seconds: secs, files: N, commit_requests: Number(d.commitRequests) }),
    )
    expect(errors).toEqual([])
    // The goal, for the page's own ways of reading a folder (the input's File list is Chromium's).
    if (source !== 'input') expect(gaps.max, `frame gaps over ${GAP_LIMIT} ms: ${gaps.long.join(', ')}; long tasks ${gaps.tasks.join(', ')}`).toBeLessThanOrEqual(GAP_LIMIT)
    await page.close()
  }, 900_000)
})
