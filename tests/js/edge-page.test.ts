// The web page (web/app, built by Vite) in headless Chromium (playwright-core) pushing to and
// pulling from the edge store (edge/: the Worker in workerd through miniflare) on 127.0.0.1: a
// file set on the page's input is pushed through the edge, its row shows the numbers of
// `cutpoint push --json` of the same file to a second edge store, the page's download link gives
// the bytes back, and the native CLI restores byte-identical what the page pushed; a modified
// version sends about its novel bytes only.
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { chromium, type BrowserContext, type Page } from 'playwright-core'
import { execFileSync } from 'node:child_process'
import { copyFileSync, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import type { Server } from 'node:http'
import { root } from './helpers'
import { serve } from './server'
import { cutpoint, cutpointBin, haveCutpoint, nativePush, type Store } from './store'
import { haveEdge, startEdge } from './edge-store'

const CHROMIUM = process.env.CUTPOINT_CHROMIUM ?? '/usr/bin/chromium'
const ARGS = ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking', '--disable-component-update', '--disable-sync']

let tmp: string
let ctx: BrowserContext
let server: Server
let pageUrl = ''
let edge: Store
let ref: Store // `cutpoint push` of the same files to a second edge store, for reference numbers
const files: Record<string, string> = {}

beforeAll(async () => {
  if (!haveCutpoint()) throw new Error('build native/target/release/cutpoint first (cargo build --release -p cutpoint-cli)')
  if (!haveEdge()) throw new Error('the edge store is not built: run `bash scripts/build-edge.sh`')
  if (!existsSync(CHROMIUM)) throw new Error(`no Chromium at ${CHROMIUM} (CUTPOINT_CHROMIUM)`)
  tmp = mkdtempSync(`${tmpdir()}/cutpoint-edge-page-`)
  // A 6 MiB base and a version with 12 edits of 4 KiB, both named data.bin.
  execFileSync(cutpointBin, ['gen', '--out', `${tmp}/gen`, '--size', '6m', '--versions', '1', '--mods', '12', '--mod-size', '4096', '--seed', '31'])
  for (const [k, v] of [['base', 'v0'], ['mod', 'v1']]) {
    mkdirSync(`${tmp}/${k}`)
    copyFileSync(`${tmp}/gen/${v}.bin`, `${tmp}/${k}/data.bin`)
    files[k] = `${tmp}/${k}/data.bin`
  }
  execFileSync(`${root}node_modules/.bin/vite`, ['build', '-c', `${root}web/app/vite.config.ts`, '--outDir', `${tmp}/app`, '--emptyOutDir'], { cwd: root, stdio: 'pipe' })
  const s = await serve(`${tmp}/app`, true)
  server = s.server
  pageUrl = s.url
  edge = await startEdge({ origins: [pageUrl] })
  ref = await startEdge()
  ctx = await chromium.launchPersistentContext(`${tmp}/profile`, { executablePath: CHROMIUM, headless: true, args: ARGS, acceptDownloads: true })
}, 240_000)

afterAll(async () => {
  await ctx?.close()
  server?.close()
  await edge?.stop()
  await ref?.stop()
  if (tmp) rmSync(tmp, { recursive: true, force: true })
})

async function openPage(): Promise<Page> {
  const page = await ctx.newPage()
  const errors: string[] = []
  page.on('pageerror', (e) => errors.push(String(e)))
  await page.goto(`${pageUrl}/index.html?store=${encodeURIComponent(edge.url)}`)
  await page.waitForFunction(() => document.body.dataset.ready, null, { timeout: 30_000 })
  expect(await page.evaluate(() => document.body.dataset.ready), `page errors: ${errors.join('; ')}`).toBe('1')
  await page.selectOption('#rapid', 'off')
  await page.click('#check-store')
  await page.waitForFunction(() => /connected/.test(document.getElementById('store-status')!.textContent!))
  await page.waitForFunction(() => !/loading/.test(document.getElementById('list-status')!.textContent!))
  return page
}

async function pushOnPage(page: Page, file: string, name: string): Promise<Record<string, string>> {
  await page.setInputFiles('#files', file)
  const sel = `li.job[data-name="${name}"]:last-of-type`
  await page.waitForFunction((s) => ['done', 'error', 'stopped'].includes(document.querySelector<HTMLElement>(s)?.dataset.state ?? ''), sel, { timeout: 120_000 })
  const row = await page.$eval(sel, (li) => ({ ...(li as HTMLElement).dataset, text: (li.querySelector('.job-state') as HTMLElement).textContent ?? '' }))
  expect(row.state, `${name}: ${row.text}`).toBe('done')
  return row as Record<string, string>
}

const num = (row: Record<string, string>, k: string) => Number(row[k])

describe('web page (Vite build) against the edge store (workerd)', () => {
  it('pushes through the edge with the numbers of `cutpoint push`; the download link and the native CLI give the bytes back', async () => {
    const page = await openPage()
    const row = await pushOnPage(page, files.base, 'data.bin')
    const want = nativePush(ref, files.base, 'data.bin')
    expect(num(row, 'version')).toBe(1)
    expect(num(row, 'bytes')).toBe(want.bytes)
    expect(num(row, 'chunks')).toBe(want.chunks)
    expect(num(row, 'novelBytes')).toBe(want.novel_bytes)
    // A modified version: about its novel bytes only.
    const row2 = await pushOnPage(page, files.mod, 'data.bin')
    const want2 = nativePush(ref, files.mod, 'data.bin')
    expect(num(row2, 'version')).toBe(2)
    expect(num(row2, 'novelBytes')).toBe(want2.novel_bytes)
    expect(num(row2, 'novelBytes')).toBeLessThan(num(row2, 'bytes') / 10)
    expect(num(row2, 'sentBytes')).toBeLessThanOrEqual(1.05 * num(row2, 'novelBytes') + 4096)
    // The native CLI restores what the page pushed.
    for (const [v, file] of [[1, files.base], [2, files.mod]] as const) {
      const out = `${tmp}/native-v${v}.bin`
      const r = cutpoint(['pull', 'data.bin', '--version', String(v), '-o', out], edge)
      expect(r.status, r.stderr).toBe(0)
      expect(readFileSync(out).equals(readFileSync(file)), `version ${v} byte-identical`).toBe(true)
    }
    // The page's listing and download link (a GET of the edge store's restore).
    await page.click('#refresh')
    await page.waitForSelector('#listing tr[data-name="data.bin"][data-version="2"]')
    const link = page.locator('#listing tr[data-name="data.bin"][data-version="1"] a.download')
    expect(await link.getAttribute('href')).toBe(`${edge.url}/v1/ns/default/files/data.bin?version=1`)
    const [dl] = await Promise.all([page.waitForEvent('download'), link.click()])
    const out = `${tmp}/download-v1.bin`
    await dl.saveAs(out)
    expect(readFileSync(out).equals(readFileSync(files.base))).toBe(true)
    // What the native CLI pushed to the edge, the page lists and its download link gives back.
    const n = cutpoint(['push', files.base, '--name', 'native.bin'], edge)
    expect(n.status, n.stderr).toBe(0)
    await page.click('#refresh')
    const nl = page.locator('#listing tr[data-name="native.bin"][data-version="1"] a.download')
    await nl.waitFor()
    const [dl2] = await Promise.all([page.waitForEvent('download'), nl.click()])
    await dl2.saveAs(`${tmp}/native-dl.bin`)
    expect(readFileSync(`${tmp}/native-dl.bin`).equals(readFileSync(files.base))).toBe(true)
    await page.close()
  })
})
