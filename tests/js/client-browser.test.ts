// The library's store client in headless Chromium (Debian's, through playwright-core) against a
// real `cutpoint serve` on another origin (CORS): a picked File pushed with the same numbers as
// `cutpoint push --json`, its 1%-modified version as a delta, pulled back verified, listed, an
// abort, and a "store" without CORS that fails with a clear message. (The web page itself and its
// tests are the Vite app's; this checks the library under it.)
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { chromium, type BrowserContext, type Page } from 'playwright-core'
import { copyFileSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { randomBytes } from 'node:crypto'
import { join } from 'node:path'
import { createServer, request, type Server } from 'node:http'
import type { AddressInfo } from 'node:net'
import { root } from './helpers'
import { serve } from './server'
import { cutpoint, haveCutpoint, nativePush, startStore, type Store } from './store'
import { resumed, startFaultProxy } from './fault-proxy'
import * as cp from '@cutpoint/web'

const CHROMIUM = process.env.CUTPOINT_CHROMIUM ?? '/usr/bin/chromium'
const ARGS = ['--headless', '--no-sandbox', '--disable-gpu', '--no-first-run', '--disable-background-networking', '--disable-component-update', '--disable-sync']

let ctx: BrowserContext
let profileDir: string
let pageServer: { url: string; server: Server }
let isoServer: { url: string; server: Server }
let store: Store
let ref: Store
const dir = mkdtempSync(join(tmpdir(), 'cutpoint-client-browser-'))
const v = (i: number) => join(dir, `v${i}.bin`)

beforeAll(async () => {
  if (!haveCutpoint()) throw new Error('build native/target/release/cutpoint first')
  const g = cutpoint(['gen', '--out', dir, '--size', '12m', '--versions', '1', '--mods', '20', '--mod-size', '100', '--seed', '5'])
  expect(g.status, g.stderr).toBe(0)
  pageServer = await serve(root, false)
  isoServer = await serve(root, true)
  // The test pages' origins are the only web pages these open stores answer.
  const origins = [pageServer.url, isoServer.url]
  store = await startStore({ origins })
  ref = await startStore({ origins })
  profileDir = mkdtempSync(`${tmpdir()}/cutpoint-chromium-`)
  ctx = await chromium.launchPersistentContext(profileDir, { executablePath: CHROMIUM, headless: true, args: ARGS })
})

afterAll(async () => {
  await ctx?.close()
  pageServer?.server.close()
  isoServer?.server.close()
  await store?.stop()
  await ref?.stop()
  if (profileDir) rmSync(profileDir, { recursive: true, force: true })
  rmSync(dir, { recursive: true, force: true })
})

async function open(base: string): Promise<Page> {
  const page = await ctx.newPage()
  await page.goto(`${base}/tests/browser/index.html`)
  await page.evaluate(() => (window as any).ready)
  return page
}

/** Pushes the picked file from the page; returns the result and what onChunks/onProgress saw. */
async function pushPicked(page: Page, storeUrl: string, file: string, name: string, namespace = 'default', extra: Record<string, unknown> = {}) {
  await page.setInputFiles('#file', file)
  return page.evaluate(
    async ({ storeUrl, name, namespace, extra }) => {
      const cp: any = await (window as any).eval("import('/web/dist/web/src/index.js')")
      await cp.init()
      const c = cp.createClient({ store: storeUrl, namespace, workers: 2 })
      const f = (document.getElementById('file') as HTMLInputElement).files![0]
      let chunks = 0
      let novel = 0
      let lastProgress: any
      try {
        const r = await c.push(f, {
          name,
          ...extra,
          onChunks: (cs: any[]) => {
            chunks += cs.length
            novel += cs.filter((x) => x.novel).length
          },
          onProgress: (p: any) => (lastProgress = p),
        })
        const s = await c.pull(name)
        const parts: Uint8Array[] = []
        const rd = s.getReader()
        for (;;) {
          const { done, value } = await rd.read()
          if (done) break
          parts.push(value)
        }
        const back = new Blob(parts)
        const a = new Uint8Array(await back.arrayBuffer())
        const b = new Uint8Array(await f.arrayBuffer())
        let equal = a.length === b.length
        for (let i = 0; equal && i < a.length; i++) if (a[i] !== b[i]) equal = false
        const list = await c.list()
        return { ok: true, r: { ...r, dedupRatio: String(r.dedupRatio) }, chunks, novel, equal, list, stage: lastProgress?.stage }
      } catch (e: any) {
        return { ok: false, error: String(e?.message ?? e), name: e?.name, code: e?.code }
      } finally {
        await c.close()
      }
    },
    { storeUrl, name, namespace, extra },
  )
}

describe('the store client in Chromium', () => {
  for (const isolated of [false, true]) {
    it(`a picked File: the native numbers, a delta version, pulled back verified (${isolated ? 'cross-origin isolated' : 'not isolated'} page, store on another origin)`, async () => {
      const page = await open(isolated ? isoServer.url : pageServer.url)
      const ns = isolated ? 'iso' : 'plain'
      const url = `${store.url}`
      for (const i of [0, 1]) {
        const got: any = await pushPicked(page, url, v(i), `${ns}.bin`, ns)
        expect(got.ok, got.error).toBe(true)
        // A File goes up in packs of 32 MiB (heads first) from a browser: the native push
        // aims at the same size, so that the pack framing, and so the bytes sent, are equal.
        const n = nativePush(ref, v(i), `${ns}.bin`, ['--ns', ns, '--pack-size', '32m'])
        expect(got.r.packs).toBe(n.packs)
        expect([got.r.chunks, got.r.novelChunks, got.r.novelBytes, got.r.sentBytes, got.r.version, got.r.digest]).toEqual([
          n.chunks,
          n.novel_chunks,
          n.novel_bytes,
          n.sent_bytes,
          n.version,
          n.digest,
        ])
        expect(got.equal).toBe(true)
        expect(got.chunks).toBe(n.chunks)
        expect(got.novel).toBe(n.novel_chunks)
        expect(got.stage).toBe('done')
        if (i === 1) {
          expect(got.r.novelBytes).toBeGreaterThan(0)
          expect(got.r.sentBytes).toBeLessThanOrEqual(1.05 * got.r.novelBytes)
        }
      }
      await page.close()
    })
  }

  it('a store without CORS (another origin that does not allow the page) fails with a clear message', async () => {
    const page = await open(pageServer.url)
    // The isolated static server is a plain HTTP server on another origin: no CORS headers.
    const got: any = await pushPicked(page, isoServer.url, v(0), 'x.bin')
    expect(got.ok).toBe(false)
    expect(got.code).toBe('network')
    expect(got.error).toMatch(/cannot reach the store.*CORS/)
    await page.close()
  })

  it('a picked File goes up heads first, straight from the file; a file changed while it uploads fails clearly and commits nothing', async () => {
    const page = await open(pageServer.url)
    const f = join(dir, 'changing.bin')
    copyFileSync(v(0), f)
    await page.setInputFiles('#file', f)
    // Between the page and the store, a proxy on 127.0.0.1 that keeps each pack body's header
    // as Chromium sends it, and holds the second pack until the file on disk has changed.
    const heads: string[] = []
    let posts = 0
    let release!: () => void
    const held = new Promise<void>((r) => (release = r))
    let reached!: () => void
    const atSecond = new Promise<void>((r) => (reached = r))
    const target = new URL(store.url)
    const proxy = createServer(async (req, res) => {
      const pack = req.method === 'POST' && /\/packs$/.test(req.url ?? '')
      if (pack && ++posts === 2) {
        reached()
        await held
      }
      const up = request({ host: target.hostname, port: target.port, method: req.method, path: req.url, headers: req.headers }, (r) => {
        res.writeHead(r.statusCode ?? 502, r.headers)
        r.pipe(res)
      })
      up.on('error', () => res.destroy())
      let first = true
      req.on('data', (d: Buffer) => {
        if (pack && first) heads.push(d.subarray(0, 16).toString('hex'))
        first = false
      })
      req.pipe(up)
    })
    await new Promise<void>((r) => proxy.listen(0, '127.0.0.1', r))
    const proxyUrl = `http://127.0.0.1:${(proxy.address() as AddressInfo).port}`
    const run = page.evaluate(async (storeUrl) => {
      const cp: any = await (window as any).eval("import('/web/dist/web/src/index.js')")
      await cp.init()
      const c = cp.createClient({ store: storeUrl, namespace: 'hf', packSize: 256 << 10, concurrency: 1 })
      const f = (document.getElementById('file') as HTMLInputElement).files![0]
      let err: any
      try {
        await c.push(f, { name: 'changing.bin' })
      } catch (e: any) {
        err = e
      }
      const list = await c.list()
      await c.close()
      return { message: String(err?.message ?? err), code: err?.code, list }
    }, proxyUrl)
    await atSecond
    writeFileSync(f, readFileSync(v(1)).subarray(0, 1 << 20))
    release()
    const got = await run
    expect(got.code, got.message).toBe('io')
    expect(got.message).toMatch(/cannot read the file while uploading it \(was it changed or removed\?\).*nothing was committed/)
    expect(got.list).toEqual([])
    // Heads first: "CPPACK\0\x01", blake3 (1), layout 1, codec 1 (zstd: compression 'auto', the default), zeros.
    expect(heads.length).toBeGreaterThanOrEqual(2)
    for (const h of heads) expect(h).toBe('43505041434b0001' + '0101' + '01' + '0'.repeat(10))
    await page.close()
    proxy.close()
  })

  it("a picked File's push holds few spans of it in the workers: 8 MiB ones, at most 2 × workers + 1 at once (the page's memory); the native numbers", async () => {
    const f = join(dir, 'spans.bin')
    writeFileSync(f, randomBytes(72 << 20))
    const page = await open(pageServer.url)
    await page.setInputFiles('#file', f)
    const got = await page.evaluate(async (storeUrl) => {
      // Every job the page sends its workers: a stage-1 job's slice is held by its worker from
      // the job's sending until its hash job (or its release) is answered. The workers are of a
      // subclass whose listener runs before the library's (which may send the next job at once).
      const spans: number[] = []
      const ends = new Map<number, { slices: Set<number>; key: number }>()
      let held = 0
      let most = 0
      const Base = Worker
      ;(window as any).Worker = class extends Base {
        slices = new Set<number>()
        constructor(url: string | URL, o?: WorkerOptions) {
          super(url, o)
          this.addEventListener('message', (e: MessageEvent) => {
            const end = ends.get(e.data?.id)
            ends.delete(e.data?.id)
            if (end?.slices.delete(end.key)) held--
          })
        }
        postMessage(m: any, t?: any) {
          if (m?.type === 'cutpoint:stage1' && m.retain !== undefined) {
            spans.push(m.b - m.a)
            this.slices.add(m.retain)
            most = Math.max(most, ++held)
          }
          if ((m?.type === 'cutpoint:hash' || m?.type === 'cutpoint:release') && m.slice !== undefined) ends.set(m.id, { slices: this.slices, key: m.slice })
          super.postMessage(m, t)
        }
      }
      const cp: any = await (window as any).eval("import('/web/dist/web/src/index.js')")
      await cp.init()
      const c = cp.createClient({ store: storeUrl, namespace: 'spans', workers: 2 })
      try {
        const r = await c.push((document.getElementById('file') as HTMLInputElement).files![0], { name: 'spans.bin' })
        return { ok: true, chunks: r.chunks, digest: r.digest, spans, most, held }
      } catch (e: any) {
        return { ok: false, error: String(e?.message ?? e) }
      } finally {
        ;(window as any).Worker = Base
        await c.close()
      }
    }, store.url)
    expect(got.ok, got.error).toBe(true)
    const n = nativePush(ref, f, 'spans.bin', ['--ns', 'spans'])
    expect([got.chunks, got.digest]).toEqual([n.chunks, n.digest])
    // 9 spans of 8 MiB (16 MiB ones before: 5), each read once by a worker.
    expect(got.spans!.length).toBe(9)
    expect(Math.max(...got.spans!)).toBe(8 << 20)
    // One stage-1 job ahead per worker: the one stage 2 waits for, 2 ahead, 2 hash jobs pending
    // (with 2 ahead per worker: 6 in this test, 3 runs).
    expect(got.most).toBeGreaterThan(1)
    expect(got.most).toBeLessThanOrEqual(5)
    expect(got.held).toBe(0)
    await page.close()
  })

  it('an abort in the page commits nothing', async () => {
    const page = await open(pageServer.url)
    await page.setInputFiles('#file', v(0))
    const got: any = await page.evaluate(async (storeUrl) => {
      const cp: any = await (window as any).eval("import('/web/dist/web/src/index.js')")
      await cp.init()
      const c = cp.createClient({ store: storeUrl, namespace: 'browser-abort', packSize: 256 << 10, concurrency: 1 })
      const f = (document.getElementById('file') as HTMLInputElement).files![0]
      const ac = new AbortController()
      let err: any
      try {
        await c.push(f, { name: 'a.bin', signal: ac.signal, onProgress: (p: any) => p.sentBytes > 1 << 20 && ac.abort() })
      } catch (e: any) {
        err = e
      }
      const list = await c.list()
      const again = await c.push(f, { name: 'a.bin' })
      await c.close()
      return { name: err?.name, list, again: { novelBytes: again.novelBytes, bytes: again.bytes, version: again.version } }
    }, store.url)
    expect(got.name).toBe('AbortError')
    expect(got.list).toEqual([])
    expect(got.again.version).toBe(1)
    expect(got.again.novelBytes).toBeLessThan(got.again.bytes)
    expect(readFileSync(v(0)).length).toBe(got.again.bytes)
    await page.close()
  })

  it('a store that stalls (tests/js/fault-proxy.ts): list and pull give up with the message; a pull resumes after one stall from its verified bytes; a push completes after an upload stall', async () => {
    const proxy = await startFaultProxy(store.url)
    const page = await open(pageServer.url)
    const inPage = (what: string, extra: Record<string, unknown> = {}) =>
      page.evaluate(
        async ({ url, what, extra }) => {
          const cp: any = await (window as any).eval("import('/web/dist/web/src/index.js')")
          await cp.init()
          const c = cp.createClient({ store: url, namespace: 'stall', timeout: 1000, retries: 2, workers: 2, ...extra })
          const t0 = performance.now()
          try {
            if (what === 'list') return { ok: true, files: (await c.list()).map((f: any) => f.name) }
            if (what === 'pull') {
              // Read as a consumer does (a reader; `new Response(stream)` would replace the stream's error with its own).
              const reader = (await c.pull('s.bin')).getReader()
              const parts: Uint8Array[] = []
              for (let r = await reader.read(); !r.done; r = await reader.read()) parts.push(r.value)
              const b = new Uint8Array(parts.reduce((a, p) => a + p.length, 0))
              parts.reduce((at, p) => (b.set(p, at), at + p.length), 0)
              return { ok: true, bytes: b.length, digest: cp.digest('blake3', b) }
            }
            const f = (document.getElementById('file') as HTMLInputElement).files![0]
            const r = await c.push(f, { name: 's.bin' })
            return { ok: true, version: r.version }
          } catch (e: any) {
            return { ok: false, code: e?.code, error: String(e?.message ?? e), ms: performance.now() - t0 }
          } finally {
            await c.close()
          }
        },
        { url: proxy.url, what, extra },
      )
    try {
      await proxy.stall('silent')
      const none: any = await inPage('list')
      expect(none.ok).toBe(false)
      expect(none.code).toBe('network')
      expect(none.error).toContain(`${proxy.url}: GET /v1/ns/stall/files: no answer for 1 s (gave up after 3 tries)`)
      expect(none.ms).toBeLessThan(30_000)
      // A push whose uploads stall once (packs of 256 KiB: their answers awaited 1 s + 4 s).
      await proxy.stallOnce({ upload: 100 << 10 })
      await page.setInputFiles('#file', v(0))
      const pushed: any = await inPage('push', { packSize: 256 << 10 })
      expect(pushed.ok, pushed.error).toBe(true)
      expect(pushed.version).toBe(1)
      expect(proxy.conns.some((c) => c.stalled)).toBe(true)
      // A pull whose answers all stall after 1 MiB: resumed twice, then given up.
      await proxy.stall({ answer: 1 << 20 })
      const stuck: any = await inPage('pull')
      expect(stuck.ok).toBe(false)
      expect(stuck.code).toBe('network')
      expect(stuck.error).toContain(`${proxy.url}: GET /v1/ns/stall/files/s.bin?version=1: no answer for 1 s at byte`)
      expect(stuck.error).toContain('(gave up after 3 tries)')
      // A pull whose answer stalls once after 3 MiB: resumed with one Range request.
      const file = readFileSync(v(0))
      await proxy.stallOnce({ answer: 3 << 20 })
      const since = proxy.seq()
      const pulled: any = await inPage('pull')
      expect(pulled.ok, pulled.error).toBe(true)
      expect(pulled.bytes).toBe(file.length)
      await cp.init()
      expect(pulled.digest).toBe(cp.digest('blake3', file))
      const { ranges, stalled, last, from, after } = resumed(proxy.conns, since)
      expect([ranges, stalled, last]).toEqual([1, true, true])
      expect(from).toBeGreaterThan(0)
      expect(after).toBeGreaterThanOrEqual(file.length - from)
      expect(after).toBeLessThan(file.length - from + 8192)
    } finally {
      await page.close()
      await proxy.close()
    }
  })
})
