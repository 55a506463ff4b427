// An open store and the web pages a user visits (issue #31): a page of an origin the store was not
// told about can neither list, download, push nor delete (headless Chromium, a page served by a
// second local server), and the store is left as it was; the same page does all four once its
// origin is given with `cutpoint serve --cors-origin`.
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { chromium, type BrowserContext, type Page } from 'playwright-core'
import { mkdtempSync, readdirSync, rmSync, statSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import type { Server } from 'node:http'
import { root } from './helpers'
import { serve } from './server'
import { cutpoint, haveCutpoint, startStore, type Store } from './store'

const CHROMIUM = process.env.CUTPOINT_CHROMIUM ?? '/usr/bin/chromium'
const ARGS = ['--headless', '--no-sandbox', '--disable-gpu', '--no-first-run', '--disable-background-networking', '--disable-component-update', '--disable-sync']

let ctx: BrowserContext
let page: { url: string; server: Server }
let closed: Store // open store, no --cors-origin
let allowed: Store // open store, --cors-origin <the page's origin>
const dir = mkdtempSync(join(tmpdir(), 'cutpoint-access-'))
const file = join(dir, 'kept.bin')

/** Every file under the store's directory with its size: what a refused request must not change. */
function tree(d: string): string[] {
  const out: string[] = []
  for (const e of readdirSync(d, { recursive: true }) as string[]) {
    const p = join(d, e)
    if (statSync(p).isFile() && !/index\.sqlite/.test(e)) out.push(`${e} ${statSync(p).size}`)
  }
  return out.sort()
}

const names = (s: Store) => JSON.parse(cutpoint(['ls', '--store', s.url, '--json']).stdout).map((f: any) => `${f.name}@${f.version}`)

beforeAll(async () => {
  if (!haveCutpoint()) throw new Error('build native/target/release/cutpoint first')
  writeFileSync(file, Buffer.alloc(300_000, 7).map((_, i) => (i * 2654435761) >>> 24))
  page = await serve(root, false)
  closed = await startStore()
  allowed = await startStore({ origins: [page.url] })
  for (const s of [closed, allowed]) {
    const r = cutpoint(['push', file, '--name', 'kept.bin', '--store', s.url])
    expect(r.status, r.stderr).toBe(0)
  }
  ctx = await chromium.launchPersistentContext(mkdtempSync(join(dir, 'profile-')), { executablePath: CHROMIUM, headless: true, args: ARGS })
})

afterAll(async () => {
  await ctx?.close()
  page?.server.close()
  await closed?.stop()
  await allowed?.stop()
  rmSync(dir, { recursive: true, force: true })
})

/** From a page of `page.url`: list, download, push (the library), delete; what each gave. */
async function attempt(p: Page, storeUrl: string) {
  return p.evaluate(async (storeUrl) => {
    const out: Record<string, string> = {}
    const tryIt = async (k: string, f: () => Promise<string>) => {
      try {
        out[k] = await f()
      } catch (e: any) {
        out[k] = `failed: ${e?.message ?? e}`
      }
    }
    const base = `${storeUrl}/v1/ns/default`
    await tryIt('list', async () => {
      const r = await fetch(`${base}/files`)
      return `${r.status} ${(await r.json()).files?.map((f: any) => f.name).join(',')}`
    })
    await tryIt('download', async () => {
      const r = await fetch(`${base}/files/kept.bin`)
      return `${r.status} ${(await r.arrayBuffer()).byteLength}`
    })
    await tryIt('push', async () => {
      const cp: any = await (window as any).eval("import('/web/dist/web/src/index.js')")
      await cp.init()
      const c = cp.createClient({ store: storeUrl, workers: 0 })
      try {
        const r = await c.push(new Blob([new Uint8Array(100_000).map((_, i) => (i * 7919) % 251)]), { name: 'from-page.bin' })
        return `pushed v${r.version}`
      } finally {
        await c.close()
      }
    })
    await tryIt('delete', async () => {
      const r = await fetch(`${base}/files/kept.bin`, { method: 'DELETE' })
      return `${r.status}`
    })
    return out
  }, storeUrl)
}

describe('an open store and the web pages the user visits', () => {
  it('a page of an origin not given with --cors-origin lists, downloads, pushes and deletes nothing', async () => {
    const before = tree(closed.data)
    const p = await ctx.newPage()
    await p.goto(`${page.url}/tests/browser/index.html`)
    const got = await attempt(p, closed.url)
    for (const k of ['list', 'download', 'push', 'delete']) expect(got[k], `${k}: ${got[k]}`).toMatch(/^failed/)
    // The library's message names the flag that would allow this page.
    expect(got.push).toContain(`cutpoint serve --cors-origin ${page.url}`)
    expect(tree(closed.data)).toEqual(before)
    expect(names(closed)).toEqual(['kept.bin@1'])
    await p.close()
  }, 120_000)

  it('the same page does all four once its origin is allowed', async () => {
    const p = await ctx.newPage()
    await p.goto(`${page.url}/tests/browser/index.html`)
    const got = await attempt(p, allowed.url)
    expect(got.list).toBe('200 kept.bin')
    expect(got.download).toBe('200 300000')
    expect(got.push).toBe('pushed v1')
    expect(got.delete).toBe('200')
    expect(names(allowed)).toEqual(['from-page.bin@1'])
    await p.close()
  }, 120_000)
})
