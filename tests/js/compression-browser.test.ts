// Compression in the library in headless Chromium (Debian's, through playwright-core) against a
// real `cutpoint serve`: a picked File goes up heads first, its compressed frames as memory and
// its raw chunks as slices of the file (those the sampler did not try are never read); the
// frames equal the native `cutpoint push` ones (same rule, sampler and zstd), the pull is
// byte-identical and the store's `check` is clean.
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { chromium, type BrowserContext, type Page } from 'playwright-core'
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { randomBytes } from 'node:crypto'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import type { Server } from 'node:http'
import { root } from './helpers'
import { serve } from './server'
import { cutpoint, haveCutpoint, nativePush, startStore, type Store } from './store'
import { textData } from './text-data'

const CHROMIUM = process.env.CUTPOINT_CHROMIUM ?? '/usr/bin/chromium'
const ARGS = ['--headless', '--no-sandbox', '--disable-gpu', '--no-first-run', '--disable-background-networking', '--disable-component-update', '--disable-sync']

let ctx: BrowserContext
let profileDir: string
let pageServer: { url: string; server: Server }
let store: Store
let ref: Store
const dir = mkdtempSync(join(tmpdir(), 'cutpoint-compression-browser-'))

beforeAll(async () => {
  if (!haveCutpoint()) throw new Error('build native/target/release/cutpoint first')
  pageServer = await serve(root, false)
  // Codec 1 both sides: the page sends one frame per chunk (groups are native only this
  // revision), and these tests compare its frames with the native push's.
  store = await startStore({ origins: [pageServer.url], args: ['--groups', 'off'] })
  ref = await startStore({ args: ['--groups', 'off'] })
  profileDir = mkdtempSync(`${tmpdir()}/cutpoint-chromium-`)
  ctx = await chromium.launchPersistentContext(profileDir, { executablePath: CHROMIUM, headless: true, args: ARGS })
})

afterAll(async () => {
  await ctx?.close()
  pageServer?.server.close()
  await store?.stop()
  await ref?.stop()
  if (profileDir) rmSync(profileDir, { recursive: true, force: true })
  rmSync(dir, { recursive: true, force: true })
})

/** Pushes `file` picked in `page` with `compression`, pulls it back and compares. */
async function pushPicked(page: Page, file: string, namespace: string, compression: string) {
  await page.setInputFiles('#file', file)
  return page.evaluate(
    async ({ storeUrl, namespace, compression }) => {
      const cp: any = await (window as any).eval("import('/web/dist/web/src/index.js')")
      await cp.init()
      const c = cp.createClient({ store: storeUrl, namespace, workers: 2, compression })
      const f = (document.getElementById('file') as HTMLInputElement).files![0]
      try {
        const r = await c.push(f, { name: 'f' })
        const back = new Uint8Array(await new Response(await c.pull('f')).arrayBuffer())
        const b = new Uint8Array(await f.arrayBuffer())
        let equal = back.length === b.length
        for (let i = 0; equal && i < back.length; i++) if (back[i] !== b[i]) equal = false
        return { ok: true, r: { ...r, dedupRatio: String(r.dedupRatio) }, equal }
      } catch (e: any) {
        return { ok: false, error: String(e?.message ?? e) }
      } finally {
        await c.close()
      }
    },
    { storeUrl: store.url, namespace, compression },
  )
}

const wireOf = (r: Record<string, any>) => ({
  novel_bytes: r.novel_bytes ?? r.novelBytes,
  compressed_bytes: r.compressed_bytes ?? r.compressedBytes,
  compressed_chunks: r.compressed_chunks ?? r.compressedChunks,
  sent_bytes: r.sent_bytes ?? r.sentBytes,
  pack_bytes: r.pack_bytes ?? r.packBytes,
  packs: r.packs,
  digest: r.digest,
})

describe('library compression in Chromium', () => {
  it('a picked File: compressible text sends far fewer bytes; mixed data the native frames; pulled back identical; check clean', async () => {
    const page = await ctx.newPage()
    await page.goto(`${pageServer.url}/tests/browser/index.html`)
    await page.evaluate(() => (window as any).ready)
    const text = join(dir, 'text.txt')
    writeFileSync(text, textData(6 << 20, 71))
    const mixed = join(dir, 'mixed.bin')
    writeFileSync(mixed, Buffer.concat([textData(1 << 20, 72), randomBytes(5 << 20), textData(3 << 20, 73), randomBytes(3 << 20)]))
    const off: any = await pushPicked(page, text, 'b-off', 'off')
    expect(off.ok, off.error).toBe(true)
    expect(off.equal).toBe(true)
    expect(off.r.compressedChunks).toBe(0)
    for (const [file, ns] of [
      [text, 'b-text'],
      [mixed, 'b-mixed'],
    ]) {
      const got: any = await pushPicked(page, file, ns, 'auto')
      expect(got.ok, got.error).toBe(true)
      expect(got.equal).toBe(true)
      expect(got.r.compressedChunks).toBeGreaterThan(0)
      // A File goes up in 32 MiB packs from a browser: the native push at that size sends the same bytes.
      expect(wireOf(got.r)).toEqual(wireOf(nativePush(ref, file, 'f', ['--ns', ns, '--pack-size', '32m'])))
      const ck = cutpoint(['check', '--ns', ns], store)
      expect(ck.status, ck.stderr + ck.stdout).toBe(0)
      if (file === text) expect(got.r.sentBytes).toBeLessThan(0.5 * off.r.sentBytes)
    }
    await page.close()
  })
})
