// RapidCDC in headless Chromium: picked Files (the data, the native base recipe and hint
// caches) give the native CLI's chunks and statistics for every criterion; ff+rwt+fpt gives the
// regular chunks; a native cache loads into a table and one of another profile is rejected; the
// IndexedDB cache persists across a page reload (hits on the second input) and is bounded.
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { chromium, type BrowserContext, type Page } from 'playwright-core'
import { mkdtempSync, readdirSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import type { Server } from 'node:http'
import { root } from './helpers'
import { serve } from './server'
import { CRITERIA, THREADS, copy, makeDataset, nativeChunks, type Dataset, type NativeStats } from './rapid-data'

const CHROMIUM = process.env.CUTPOINT_CHROMIUM ?? '/usr/bin/chromium'
const ARGS = ['--headless', '--no-sandbox', '--disable-gpu', '--no-first-run', '--disable-background-networking', '--disable-component-update', '--disable-sync']

let ctx: BrowserContext
let server: Server
let url = ''
let profileDir: string
let d: Dataset

beforeAll(async () => {
  d = makeDataset()
  const s = await serve(root, false)
  server = s.server
  url = s.url
  profileDir = mkdtempSync(`${tmpdir()}/cutpoint-chromium-rapid-`)
  ctx = await chromium.launchPersistentContext(profileDir, { executablePath: CHROMIUM, headless: true, args: ARGS })
}, 900_000) // the native build may wait for other cargo runs on a shared machine

afterAll(async () => {
  await ctx?.close()
  server?.close()
  if (profileDir) rmSync(profileDir, { recursive: true, force: true })
  if (d) rmSync(d.dir, { recursive: true, force: true })
})

/** Opens the test page with every file of the data set picked into `#rapidfiles`. */
async function open(page?: Page): Promise<Page> {
  if (!page) {
    page = await ctx.newPage()
    await page.goto(`${url}/tests/browser/index.html`)
  } else {
    await page.reload()
  }
  await page.evaluate(() => (window as any).ready)
  await page.evaluate(() => {
    const input = document.createElement('input')
    input.type = 'file'
    input.multiple = true
    input.id = 'rapidfiles'
    document.body.append(input)
    /** Chunks the picked file `input` with `rapid` options; names of picked files stand for them. */
    ;(window as any).rapidChunk = async (input: string, rapid: any, extra: any = {}) => {
      // (Through Function: Vitest would rewrite an import() written in this test file.)
      const cp: any = await new Function('u', 'return import(u)')('/web/dist/web/src/index.js')
      const picked = (document.getElementById('rapidfiles') as HTMLInputElement).files!
      const files: Record<string, File> = {}
      for (const f of Array.from(picked)) files[f.name] = f
      const o = { ...rapid }
      if (o.base) o.base = files[o.base]
      let table: any
      try {
        if (o.tableFromCache) {
          table = cp.createHintTable()
          table.loadCache(new Uint8Array(await files[o.tableFromCache].arrayBuffer()))
          o.table = table
          delete o.tableFromCache
        }
        const it = cp.chunk(files[input], { workers: 2, ...extra, rapid: rapid ? o : undefined })
        const rows: any[] = []
        for await (const c of it) rows.push(c)
        const r = it.rapid && { ...it.rapid, recipe: undefined }
        return { rows, rapid: r }
      } catch (e: any) {
        return { error: String(e?.message ?? e) }
      } finally {
        table?.free()
      }
    }
  })
  await page.setInputFiles('#rapidfiles', readdirSync(d.dir).map((f) => `${d.dir}/${f}`))
  return page
}

function sameStats(got: any, want: NativeStats, what: string) {
  expect({ chunks: got.chunks, hinted: got.hintedChunks, rolled: got.rolledBytes, hits: got.hits, misses: got.misses, fallbacks: got.fallbacks }, what).toEqual({
    chunks: want.chunks,
    hinted: want.hinted,
    rolled: want.rolled,
    hits: want.hits,
    misses: want.misses,
    fallbacks: want.fallbacks,
  })
}

const chunkIn = (page: Page, input: string, rapid: any, extra: any = {}) =>
  page.evaluate(([input, rapid, extra]) => (window as any).rapidChunk(input, rapid, extra), [input, rapid, extra] as const)

describe('chromium: RapidCDC', () => {
  it('every criterion with the native base recipe (a picked File): the native chunks and statistics', async () => {
    const page = await open()
    for (const criterion of CRITERIA) {
      const want = nativeChunks(d.v1, ['--rapid', criterion, '--base', d.recipe])
      const got = await chunkIn(page, 'v1.bin', { criterion, base: 'v0.recipe' }, { workers: THREADS })
      expect(got.error).toBeUndefined()
      expect(got.rows, criterion).toEqual(want.rows)
      sameStats(got.rapid.stats, want.stats!, criterion)
      // Every fallback block's stage 1 shared with the Web Workers, in 256 KiB jobs: the same.
      for (const workers of [1, 2]) {
        const w = await chunkIn(page, 'v1.bin', { criterion, base: 'v0.recipe', workerBlock: 1, blockSize: 8 << 20 /* nativeBlockSize(THREADS) */ }, { workers, segmentSize: 256 << 10 })
        expect(w.error).toBeUndefined()
        expect(w.rows, `${criterion}, ${workers} worker(s)`).toEqual(want.rows)
        sameStats(w.rapid.stats, want.stats!, `${criterion}, ${workers} worker(s)`)
      }
    }
    // ff+rwt+fpt: the regular chunks.
    const regular = nativeChunks(d.v1).rows
    expect((await chunkIn(page, 'v1.bin', undefined)).rows).toEqual(regular)
    expect((await chunkIn(page, 'v1.bin', { criterion: 'ff+rwt+fpt', base: 'v0.recipe', blockSize: 1 << 16 })).rows).toEqual(regular)
    await page.close()
  })

  it('a native hint cache loads into a table; one of another profile is rejected with a clear error', async () => {
    const page = await open()
    const want = nativeChunks(d.v1, ['--rapid', 'ff+rwt', '--hints', copy(d.cache['ff+rwt'], `${d.dir}/b.hints`)])
    const got = await chunkIn(page, 'v1.bin', { criterion: 'ff+rwt', tableFromCache: 'v0.ff+rwt.hints' }, { workers: THREADS })
    expect(got.error).toBeUndefined()
    expect(got.rows).toEqual(want.rows)
    sameStats(got.rapid.stats, want.stats!, 'table from a native cache')
    const bad = await chunkIn(page, 'v1.bin', { criterion: 'ff', tableFromCache: 'rabin.hints' })
    expect(bad.error).toMatch(/made with profile rabin:4k:8k:12k; this run uses gear:2k:8k:64k .*not used/)
    await page.close()
  })

  it('IndexedDB: the cache persists across a reload (hits on the second input, the native chunks) and is bounded', async () => {
    let page = await open()
    const db = { criterion: 'ff+rwt', cache: 'cutpoint-rapid-test' }
    const first = await chunkIn(page, 'v0.bin', db, { workers: THREADS })
    expect(first.error).toBeUndefined()
    expect(first.rows).toEqual(nativeChunks(d.v0).rows)
    expect(first.rapid.hintsLoaded).toBe(0)
    expect(first.rapid.stats.hits[0]).toBe(0)
    expect(first.rapid.cacheBytes).toBeGreaterThan(1000)
    page = await open(page)
    const second = await chunkIn(page, 'v1.bin', db, { workers: THREADS })
    expect(second.error).toBeUndefined()
    const want = nativeChunks(d.v1, ['--rapid', 'ff+rwt', '--hints', copy(d.cache['ff+rwt'], `${d.dir}/i.hints`)])
    expect(second.rapid.hintsLoaded).toBe(want.stats!.fromCache)
    expect(second.rapid.stats.hits[0]).toBeGreaterThan(10)
    expect(second.rows).toEqual(want.rows)
    sameStats(second.rapid.stats, want.stats!, 'IndexedDB')
    // Another profile's cache in the same database, with a bound that fits only one: the older
    // (gear) one is evicted, so a gear run then finds nothing.
    const bound = Math.floor(second.rapid.cacheBytes * 1.5)
    const rabin = await chunkIn(page, 'v0.bin', { ...db, cacheMaxBytes: bound }, { profile: 'rabin:4k:8k:12k' })
    expect(rabin.error).toBeUndefined()
    expect(rabin.rapid.hintsLoaded).toBe(0)
    expect(rabin.rapid.cacheBytes).toBeLessThanOrEqual(bound)
    const rabin2 = await chunkIn(page, 'v1.bin', db, { profile: 'rabin:4k:8k:12k' })
    expect(rabin2.rapid.hintsLoaded).toBeGreaterThan(0)
    const gear = await chunkIn(page, 'v1.bin', db)
    expect(gear.rapid.hintsLoaded).toBe(0)
    await page.close()
  })
})
