// The push journal (web/src/client/journal.ts) through the web page (web/app, Vite build) in
// headless Debian Chromium against a real `cutpoint serve` on 127.0.0.1: a push whose pack
// uploads are held after the first ones are acknowledged (page.route, no timing) is cut off by a
// page reload; the reloaded page lists it as unfinished (IndexedDB); the same file pushed again
// reports the packs already stored, does not query or send their chunks again, commits what
// `cutpoint push` commits and pulls back byte for byte; its journal record is gone afterwards.
// A record whose chunks the store no longer has (collected by `cutpoint gc --grace 0`) still
// commits correctly (the commit's 409 sends them again). A push stopped on the page keeps its
// record ('interrupted'), which the keyboard can forget. The unfinished list after the reload is
// saved as tests/artifacts/web-journal-pending.png (not committed).
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { chromium, type BrowserContext, type Page, type Route } from 'playwright-core'
import { execFileSync, spawnSync } from 'node:child_process'
import { mkdirSync, mkdtempSync, readFileSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import type { Server } from 'node:http'
import { root } from './helpers'
import { serve } from './server'
import { cutpoint, cutpointBin, haveCutpoint, nativePush, startStore, type Store } from './store'

const CHROMIUM = process.env.CUTPOINT_CHROMIUM ?? '/usr/bin/chromium'
const ARGS = ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking', '--disable-component-update', '--disable-sync']
const APP = `${root}web/app`

let tmp: string
let ctx: BrowserContext
let server: Server
let pageUrl = ''
let store: Store // the page's
let ref: Store // `cutpoint push --json` of the same files on fresh stores, for reference numbers
const files: Record<string, string> = {}

beforeAll(async () => {
  if (!haveCutpoint()) execFileSync('cargo', ['build', '--release', '-p', 'cutpoint-cli'], { cwd: `${root}native`, stdio: 'inherit' })
  tmp = mkdtempSync(`${tmpdir()}/cutpoint-web-journal-`)
  for (const [k, size, seed] of [['resume', '32m', 31], ['gc', '16m', 32], ['stop', '12m', 33]] as const) {
    files[k] = `${tmp}/${k}.bin`
    expect(spawnSync('sh', ['-c', `"${cutpointBin}" gen --stream --size ${size} --seed ${seed} > "${files[k]}"`]).status).toBe(0)
  }
  // The page, as `npm run build:app` builds it (a static site).
  execFileSync(`${root}node_modules/.bin/vite`, ['build', '-c', `${APP}/vite.config.ts`], { cwd: root, stdio: 'pipe' })
  const s = await serve(`${APP}/dist`, true)
  server = s.server
  pageUrl = s.url
  // Packs of at most 8 MiB (the page aims at 32 MiB, kept within the store's limit): the
  // journal's tests stop pushes after a given number of packs of 16-32 MiB files.
  store = await startStore({ args: ['--max-pack', '8m'], origins: [pageUrl] })
  ref = await startStore({ args: ['--max-pack', '8m'], origins: [pageUrl] })
  ctx = await chromium.launchPersistentContext(`${tmp}/profile`, { executablePath: CHROMIUM, headless: true, args: ARGS, viewport: { width: 1100, height: 900 } })
}, 240_000)

afterAll(async () => {
  await ctx?.close()
  server?.close()
  await store?.stop()
  await ref?.stop()
  if (tmp) rmSync(tmp, { recursive: true, force: true })
})

async function ready(page: Page): Promise<void> {
  await page.waitForFunction(() => document.body.dataset.ready, null, { timeout: 30_000 })
  expect(await page.evaluate(() => document.body.dataset.ready)).toBe('1')
  // connect() lists the unfinished pushes, then the store.
  await page.waitForFunction(() => document.body.dataset.pending === '1' && !/loading/.test(document.getElementById('list-status')!.textContent!), null, { timeout: 30_000 })
}

async function openPage(): Promise<Page> {
  const page = await ctx.newPage()
  await page.goto(`${pageUrl}/index.html?store=${encodeURIComponent(store.url)}`)
  await ready(page)
  await page.fill('#workers', '2')
  await page.selectOption('#rapid', 'off')
  await page.click('#check-store')
  await page.waitForFunction(() => /connected/.test(document.getElementById('store-status')!.textContent!))
  await ready(page)
  return page
}

interface JournalRecord {
  id: string
  name: string
  fileName: string
  size: number
  state: string
  packs: number
  sentBytes: number
  storedChunks: number
  error?: string
  /** Chunk ids stored with it (segments' bytes / 32). */
  ids: number
}

/** The journal's records as IndexedDB holds them (read directly, not through the library). */
function journal(page: Page): Promise<JournalRecord[]> {
  return page.evaluate(
    () =>
      new Promise<JournalRecord[]>((resolve, reject) => {
        const r = indexedDB.open('cutpoint-push', 1)
        r.onupgradeneeded = () => {
          r.result.createObjectStore('pushes')
          r.result.createObjectStore('ids')
        }
        r.onerror = () => reject(r.error)
        r.onsuccess = () => {
          const db = r.result
          const tx = db.transaction(['pushes', 'ids'])
          const recs = tx.objectStore('pushes').getAll()
          const segs = tx.objectStore('ids').openCursor()
          const ids = new Map<string, number>()
          segs.onsuccess = () => {
            const c = segs.result
            if (!c) return
            const k = (c.key as [string, number])[0]
            ids.set(k, (ids.get(k) ?? 0) + (c.value as Uint8Array).length / 32)
            c.continue()
          }
          tx.oncomplete = () => {
            db.close()
            resolve((recs.result as any[]).map((x) => ({ ...x, ids: ids.get(x.id) ?? 0 })))
          }
          tx.onerror = () => reject(tx.error)
        }
      }),
  )
}

async function until<T>(what: string, f: () => Promise<T | undefined>, ms = 60_000): Promise<T> {
  const end = Date.now() + ms
  for (;;) {
    const v = await f()
    if (v !== undefined) return v
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`)
    await new Promise((r) => setTimeout(r, 100))
  }
}

/**
 * Lets the first `n` pack uploads through, holds every later one until `release()` (then aborts
 * it). Counts the store's answers to the packs let through.
 */
async function holdPacks(page: Page, n: number) {
  let count = 0
  let release!: () => void
  const gate = new Promise<void>((r) => (release = r))
  const handler = async (route: Route) => {
    if (route.request().method() !== 'POST') return route.continue()
    if (++count <= n) return route.continue()
    await gate
    await route.abort('connectionreset').catch(() => {})
  }
  const pattern = `${store.url}/v1/ns/*/packs`
  await page.route(pattern, handler)
  return {
    get requests() {
      return count
    },
    release,
    async unroute() {
      release()
      await page.unroute(pattern, handler)
    },
  }
}

/** Sums of the store's pack answers and the ids asked in queries, seen from `page` until `stop()`. */
function watch(page: Page) {
  const acc = { packs: 0, stored: 0, duplicates: 0, storedBytes: 0, queries: 0, queried: 0 }
  const waits: Promise<void>[] = []
  const onResponse = (r: import('playwright-core').Response) => {
    if (r.request().method() !== 'POST' || r.status() !== 200) return
    if (r.url().endsWith('/packs'))
      waits.push(
        r.json().then((j) => {
          acc.packs++
          acc.stored += j.stored
          acc.duplicates += j.duplicates
          acc.storedBytes += j.stored_bytes
        }),
      )
    // Bodies of 64 KiB or more go as Blobs, whose bytes Playwright does not always show (postData
    // or sizes() may say nothing): the largest of the three views of the body's length.
    if (r.url().endsWith('/query'))
      waits.push(
        Promise.all([r.request().sizes(), r.request().allHeaders()]).then(([z, h]) => {
          const len = Math.max(z.requestBodySize, Number(h['content-length'] ?? 0), r.request().postDataBuffer()?.length ?? 0)
          expect(len % 32, 'a query body is whole ids').toBe(0)
          acc.queries++
          acc.queried += len / 32
        }),
      )
  }
  page.on('response', onResponse)
  return {
    acc,
    async stop() {
      page.off('response', onResponse)
      await Promise.all(waits)
      return acc
    },
  }
}

async function rowWhen(page: Page, name: string, want: 'done' | 'error' | 'stopped'): Promise<Record<string, string>> {
  const sel = `li.job[data-name="${name}"]:last-of-type`
  await page.waitForFunction((s) => ['done', 'error', 'stopped'].includes(document.querySelector<HTMLElement>(s)?.dataset.state ?? ''), sel, { timeout: 120_000 })
  const row = await page.$eval(sel, (li) => ({ ...(li as HTMLElement).dataset, text: (li.querySelector('.job-state') as HTMLElement).textContent ?? '' }))
  expect(row.state, `${name}: ${row.text}`).toBe(want)
  return row as Record<string, string>
}

const num = (row: Record<string, string>, k: string) => Number(row[k])

/** Starts a push of `file` on the page, lets `n` packs through and reloads the page once the journal has them. */
async function cutByReload(page: Page, file: string, name: string, n: number) {
  const hold = await holdPacks(page, n)
  const w = watch(page)
  await page.setInputFiles('#files', file)
  const rec = await until(`the journal of ${name} with ${n} packs`, async () => (await journal(page)).find((r) => r.name === name && r.packs >= n && r.ids === r.storedChunks))
  // The next pack has reached the held route: the pipeline is stalled on it, and nothing else
  // can be acknowledged. (Waited for, not asserted at once: the journal can record pack n
  // before the next pack is sent, e.g. when that is the last, partial one.)
  await until(`pack ${n + 1} of ${name} held`, async () => (hold.requests > n ? true : undefined))
  await page.reload()
  await hold.unroute()
  const before = await w.stop()
  await ready(page)
  return { rec, before }
}

describe('the push journal (IndexedDB) across a page reload', () => {
  let page: Page

  it('a push cut off by a reload is listed, resumed without querying or sending the stored chunks, and committed', async () => {
    page = await openPage()
    const { rec, before } = await cutByReload(page, files.resume, 'resume.bin', 2)
    console.log('journal record before the reload:', JSON.stringify(rec), '| store answers:', JSON.stringify(before))
    expect(rec.packs).toBe(2)
    expect(before.packs).toBe(2)
    expect(rec.storedChunks).toBe(before.stored)
    expect(rec.sentBytes).toBe(before.storedBytes)
    expect(rec.sentBytes).toBeGreaterThan(0)
    expect(rec.fileName).toBe('resume.bin')
    expect(rec.size).toBe(readFileSync(files.resume).length)

    // The reloaded page lists it.
    const item = page.locator('#pending li[data-name="resume.bin"]')
    await item.waitFor()
    const listed = await item.evaluate((li) => ({ ...(li as HTMLElement).dataset, text: li.textContent ?? '' }))
    console.log('listed after the reload:', JSON.stringify(listed))
    expect(listed.state).toBe('interrupted')
    expect(Number(listed.sent)).toBe(rec.sentBytes)
    expect(Number(listed.packs)).toBe(2)
    expect(listed.text).toMatch(/resume\.bin — \d+% sent .*interrupted .*pick or drop the same file to resume/)
    expect(await page.isVisible('#pending-box')).toBe(true)
    mkdirSync(`${root}tests/artifacts`, { recursive: true })
    await page.locator('#pending-box').screenshot({ path: `${root}tests/artifacts/web-journal-pending.png` })
    // Nothing committed.
    expect(JSON.parse(cutpoint(['ls', '--json'], store).stdout)).toEqual([])

    // The same file again.
    const w = watch(page)
    await page.setInputFiles('#files', files.resume)
    const row = await rowWhen(page, 'resume.bin', 'done')
    const after = await w.stop()
    const fresh = nativePush(ref, files.resume, 'resume.bin')
    console.log('resumed push:', JSON.stringify(row), '| store answers:', JSON.stringify(after), '\n native on a fresh store:', JSON.stringify(fresh))
    expect(row.text).toMatch(/done: version 1 \(resumed: 2 packs already stored\)/)
    expect(num(row, 'resumedPacks')).toBe(2)
    expect(num(row, 'resumedChunks')).toBe(rec.storedChunks)
    expect(num(row, 'resumedBytes')).toBe(rec.sentBytes)
    expect(num(row, 'version')).toBe(1)
    expect(num(row, 'bytes')).toBe(fresh.bytes)
    expect(num(row, 'chunks')).toBe(fresh.chunks)
    // The journaled chunks were neither queried nor sent again; the rest was, once.
    expect(after.queried).toBe(fresh.novel_chunks - rec.storedChunks)
    expect(num(row, 'novelChunks')).toBe(fresh.novel_chunks - rec.storedChunks)
    expect(num(row, 'novelBytes')).toBe(fresh.novel_bytes - rec.sentBytes)
    expect(after.duplicates).toBe(0)
    expect(after.stored).toBe(fresh.novel_chunks - rec.storedChunks)
    expect(after.storedBytes + before.storedBytes).toBe(fresh.novel_bytes)
    expect(num(row, 'sentBytes')).toBeLessThan(fresh.sent_bytes - rec.sentBytes / 2)
    // The store holds the file, byte for byte.
    const out = `${tmp}/resume-pulled.bin`
    const p = cutpoint(['pull', 'resume.bin', '-o', out], store)
    expect(p.status, p.stderr).toBe(0)
    expect(readFileSync(out).equals(readFileSync(files.resume))).toBe(true)
    // The journal record is gone, and so is the page's entry.
    expect((await journal(page)).filter((r) => r.name === 'resume.bin')).toEqual([])
    await page.waitForFunction(() => !document.querySelector('#pending li[data-name="resume.bin"]'))
    expect(await page.isHidden('#pending-box')).toBe(true)
  })

  it('a journal whose chunks the store no longer has (gc) still commits the right file', async () => {
    const { rec, before } = await cutByReload(page, files.gc, 'gc.bin', 1)
    expect(rec.packs).toBe(1)
    expect(before.storedBytes).toBe(rec.sentBytes)
    // Nothing references the uploaded packs: gc with no grace collects them.
    const gc = cutpoint(['gc', '--grace', '0', '--json'], store)
    expect(gc.status, gc.stderr).toBe(0)
    const collected = JSON.parse(gc.stdout)
    console.log('gc:', gc.stdout.trim())
    expect(collected.chunks_removed).toBeGreaterThanOrEqual(rec.storedChunks)
    await page.locator('#pending li[data-name="gc.bin"]').waitFor()

    const w = watch(page)
    await page.setInputFiles('#files', files.gc)
    const row = await rowWhen(page, 'gc.bin', 'done')
    const after = await w.stop()
    const fresh = nativePush(ref, files.gc, 'gc.bin')
    console.log('resumed push after gc:', JSON.stringify(row), '| store answers:', JSON.stringify(after), '\n native on a fresh store:', JSON.stringify(fresh))
    expect(num(row, 'resumedPacks')).toBe(1)
    // Not queried (the journal said stored), answered missing by the commit and sent then: the
    // store got every chunk of the file in this push.
    expect(after.queried).toBe(fresh.novel_chunks - rec.storedChunks)
    expect(after.stored).toBe(fresh.novel_chunks)
    expect(after.storedBytes).toBe(fresh.novel_bytes)
    const out = `${tmp}/gc-pulled.bin`
    const p = cutpoint(['pull', 'gc.bin', '-o', out], store)
    expect(p.status, p.stderr).toBe(0)
    expect(readFileSync(out).equals(readFileSync(files.gc))).toBe(true)
    const chk = cutpoint(['ls', 'gc.bin', '--json'], store)
    expect(JSON.parse(chk.stdout).map((f: any) => f.version)).toEqual([1])
    expect((await journal(page)).filter((r) => r.name === 'gc.bin')).toEqual([])
  })

  it('a push stopped on the page keeps its record (interrupted); Forget (keyboard) drops it', async () => {
    const hold = await holdPacks(page, 1)
    await page.setInputFiles('#files', files.stop)
    await until('the journal of stop.bin', async () => (await journal(page)).find((r) => r.name === 'stop.bin' && r.packs >= 1))
    await page.click('#stop')
    await rowWhen(page, 'stop.bin', 'stopped')
    await hold.unroute()
    const rec = (await journal(page)).find((r) => r.name === 'stop.bin')!
    expect(rec.state).toBe('interrupted')
    expect(rec.error).toMatch(/abort/i)
    const item = page.locator('#pending li[data-name="stop.bin"]')
    await item.waitFor()
    expect(await item.getAttribute('data-state')).toBe('interrupted')
    await page.focus('#pending li[data-name="stop.bin"] button.forget')
    await page.keyboard.press('Enter')
    await page.waitForFunction(() => !document.querySelector('#pending li[data-name="stop.bin"]'))
    expect((await journal(page)).filter((r) => r.name === 'stop.bin')).toEqual([])
    expect(await page.isHidden('#pending-box')).toBe(true)
    // Focus stays on the page (the drop zone), not lost to the body.
    expect(await page.evaluate(() => document.activeElement?.id)).toBe('drop')
    await page.close()
  })
})
