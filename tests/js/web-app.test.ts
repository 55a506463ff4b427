// The web page (web/app, built by Vite) in headless Debian Chromium (playwright-core) against a
// real `cutpoint serve` started here on 127.0.0.1: files set on the page's input are pushed, and
// the page's numbers (chunks, novel bytes, bytes sent) must equal `cutpoint push --json` for the
// same file on a second, separate store; a modified version sends about its novel bytes only;
// RapidCDC's hinted chunks show on the chunk map;
// the store's download link gives the bytes back; a push whose pack uploads are cut off mid-way
// is retried and sends only what the store still lacks. Screenshots of the finished page (desktop
// and phone) are written to tests/artifacts/ (not committed).
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { chromium, type BrowserContext, type Page, type Route } from 'playwright-core'
import { execFileSync, spawn, spawnSync, type ChildProcess } from 'node:child_process'
import { copyFileSync, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import type { Server } from 'node:http'
import { root } from './helpers'
import { textData } from './text-data'
import { serve } from './server'
import { startFaultProxy } from './fault-proxy'

const CHROMIUM = process.env.CUTPOINT_CHROMIUM ?? '/usr/bin/chromium'
const ARGS = ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking', '--disable-component-update', '--disable-sync']
const ARTIFACTS = `${root}tests/artifacts`
const APP = `${root}web/app`

function nativeCli(): string {
  const bin = `${root}native/target/release/cutpoint`
  if (!existsSync(bin)) execFileSync('cargo', ['build', '--release', '-p', 'cutpoint-cli'], { cwd: `${root}native`, stdio: 'inherit' })
  return bin
}

interface Store {
  url: string
  proc: ChildProcess
  dir: string
}

/** `cutpoint serve` on a fresh directory, 127.0.0.1, a free port; resolves once it listens. */
function startStore(bin: string, dir: string, extra: string[] = []): Promise<Store> {
  return new Promise((resolve, reject) => {
    const proc = spawn(bin, ['serve', '--data', dir, '--listen', '127.0.0.1:0', ...extra], { stdio: ['ignore', 'pipe', 'pipe'] })
    let out = ''
    const timer = setTimeout(() => reject(new Error(`cutpoint serve did not start: ${out}`)), 20_000)
    const seen = (d: Buffer) => {
      out += d
      const m = /cutpoint serve: listening on (http:\/\/\S+)/.exec(out)
      if (m) {
        clearTimeout(timer)
        resolve({ url: m[1], proc, dir })
      }
    }
    proc.stdout!.on('data', seen)
    proc.stderr!.on('data', seen)
    proc.on('exit', (c) => reject(new Error(`cutpoint serve exited (${c}): ${out}`)))
  })
}

interface NativePush {
  name: string
  bytes: number
  chunks: number
  novel_chunks: number
  novel_bytes: number
  sent_bytes: number
  hinted_chunks: number
  version: number
}

let bin: string
let tmp: string
let ctx: BrowserContext
const servers: Server[] = []
const stores: Store[] = []
let store: Store // the page's
let ref: Store // `cutpoint push` of the same files, for reference numbers
let tokened: Store // started with --tokens
let token = ''
let pageUrl = ''
let plainUrl = ''
const files: Record<string, string> = {}

const nativePush = (file: string, name: string, ...extra: string[]): NativePush =>
  JSON.parse(execFileSync(bin, ['push', file, '--name', name, '--store', ref.url, '--json', ...extra], { encoding: 'utf8' }).trim().split('\n').pop()!)

/** The page at `url` with the store and settings given; waits for the wasm module and the store's listing. */
async function openPage(url: string, settings: Record<string, string>, storeUrl = store.url, init?: () => void): Promise<Page> {
  const page = await ctx.newPage()
  const errors: string[] = []
  page.on('pageerror', (e) => errors.push(String(e)))
  if (init) await page.addInitScript(init)
  await page.goto(`${url}/index.html?store=${encodeURIComponent(storeUrl)}`)
  await page.waitForFunction(() => document.body.dataset.ready, null, { timeout: 30_000 })
  expect(await page.evaluate(() => document.body.dataset.ready), `page errors: ${errors.join('; ')}`).toBe('1')
  for (const [k, v] of Object.entries(settings)) {
    if (k === 'rapid' || k === 'compression') await page.selectOption(`#${k}`, v)
    else await page.fill(`#${k}`, v)
  }
  await page.click('#check-store')
  await page.waitForFunction(() => /connected/.test(document.getElementById('store-status')!.textContent!))
  await page.waitForFunction(() => !/loading/.test(document.getElementById('list-status')!.textContent!))
  return page
}

/** Sets `file` on the page's input and waits for its row to finish; returns the row's numbers. */
async function pushOnPage(page: Page, file: string, name: string, want: 'done' | 'error' = 'done'): Promise<Record<string, string>> {
  await page.setInputFiles('#files', file)
  return rowWhen(page, name, want)
}

async function rowWhen(page: Page, name: string, want: 'done' | 'error' | 'stopped'): Promise<Record<string, string>> {
  const sel = `li.job[data-name="${name}"]:last-of-type`
  await page.waitForFunction((s) => ['done', 'error', 'stopped'].includes(document.querySelector<HTMLElement>(s)?.dataset.state ?? ''), sel, { timeout: 90_000 })
  const row = await page.$eval(sel, (li) => ({ ...(li as HTMLElement).dataset, text: (li.querySelector('.job-state') as HTMLElement).textContent ?? '' }))
  expect(row.state, `${name}: ${row.text}`).toBe(want)
  return row as Record<string, string>
}

const num = (row: Record<string, string>, k: string) => Number(row[k])

beforeAll(async () => {
  bin = nativeCli()
  tmp = mkdtempSync(`${tmpdir()}/cutpoint-web-app-`)
  // Data: a 24 MiB base and a version of it with 48 edits of 4 KiB (`cutpoint gen`), both named
  // data.bin (two directories) so that the second is the next version of the first; a 32 MiB
  // random file for the resume test; 1 MiB for the page without cross-origin isolation.
  execFileSync(bin, ['gen', '--out', `${tmp}/gen`, '--size', '24m', '--versions', '1', '--mods', '48', '--mod-size', '4096', '--seed', '21'])
  for (const [k, v] of [['base', 'v0'], ['mod', 'v1']]) {
    mkdirSync(`${tmp}/${k}`)
    copyFileSync(`${tmp}/gen/${v}.bin`, `${tmp}/${k}/data.bin`)
    files[k] = `${tmp}/${k}/data.bin`
  }
  for (const [k, size, seed] of [['resume', '32m', 22], ['small', '1m', 23], ['stop', '16m', 24]] as const) {
    files[k] = `${tmp}/${k}.bin`
    expect(spawnSync('sh', ['-c', `"${bin}" gen --stream --size ${size} --seed ${seed} > "${files[k]}"`]).status).toBe(0)
  }
  // The page, as `npm run build:app` builds it (a static site).
  execFileSync(`${root}node_modules/.bin/vite`, ['build', '-c', `${APP}/vite.config.ts`], { cwd: root, stdio: 'pipe' })
  for (const isolated of [true, false]) {
    const s = await serve(`${APP}/dist`, isolated)
    servers.push(s.server)
    if (isolated) pageUrl = s.url
    else plainUrl = s.url
  }
  for (const d of ['store', 'ref', 'tokened']) mkdirSync(`${tmp}/${d}`)
  // Stores that take packs of at most 8 MiB: the page aims at 32 MiB ones (heads first) and
  // must keep within the store's limit, and the cut-off test needs several packs of its 32 MiB
  // file. The native pushes of the reference store fit theirs to the same limit, so the page's
  // bytes sent (pack framing included) equal theirs.
  // The page's two origins are the only web pages these open stores answer (--cors-origin);
  // the store with tokens answers any origin (each request needs a token).
  const origins = ['--cors-origin', pageUrl, '--cors-origin', plainUrl]
  store = await startStore(bin, `${tmp}/store`, ['--max-pack', '8m', ...origins])
  // The page sends one frame per chunk (codec 1); the reference store takes the same frames
  // from `cutpoint push` (--groups off), so their bytes sent can be compared.
  ref = await startStore(bin, `${tmp}/ref`, ['--max-pack', '8m', '--groups', 'off', ...origins])
  stores.push(store, ref)
  // A store that wants tokens: one read-write grant on namespace `team`.
  const grant = spawnSync(bin, ['token', '--ns', 'team', '--tokens', `${tmp}/tokens`], { encoding: 'utf8' })
  expect(grant.status, grant.stderr).toBe(0)
  token = grant.stdout.trim()
  tokened = await startStore(bin, `${tmp}/tokened`, ['--tokens', `${tmp}/tokens`])
  stores.push(tokened)
  ctx = await chromium.launchPersistentContext(`${tmp}/profile`, { executablePath: CHROMIUM, headless: true, args: ARGS, acceptDownloads: true, viewport: { width: 1100, height: 900 } })
  mkdirSync(ARTIFACTS, { recursive: true })
}, 240_000)

afterAll(async () => {
  await ctx?.close()
  for (const s of servers) s.close()
  for (const s of stores) s.proc.kill('SIGTERM')
  await Promise.all(stores.map((s) => new Promise((r) => (s.proc.exitCode !== null ? r(null) : s.proc.once('exit', r)))))
  if (tmp) rmSync(tmp, { recursive: true, force: true })
})

describe('web page (Vite build) against cutpoint serve', () => {
  let page: Page

  it('a pushed file: the page shows the numbers of `cutpoint push --json`', async () => {
    page = await openPage(pageUrl, { workers: '2', rapid: 'off', namespace: 'default', profile: 'gear:2k:8k:64k' })
    expect(await page.textContent('#engine')).toMatch(/cross-origin isolated/)
    expect(await page.evaluate(() => crossOriginIsolated)).toBe(true)
    const row = await pushOnPage(page, files.base, 'data.bin')
    const want = nativePush(files.base, 'data.bin')
    console.log('base push: page', JSON.stringify(row), '\n native', JSON.stringify(want))
    expect(num(row, 'bytes')).toBe(want.bytes)
    expect(num(row, 'chunks')).toBe(want.chunks)
    expect(num(row, 'novelChunks')).toBe(want.novel_chunks)
    expect(num(row, 'novelBytes')).toBe(want.novel_bytes)
    expect(num(row, 'sentBytes')).toBe(want.sent_bytes)
    expect(num(row, 'version')).toBe(want.version)
    // The chunk map saw every chunk, with the same novel ones.
    expect(num(row, 'mapChunks')).toBe(want.chunks)
    expect(num(row, 'mapNovel')).toBe(want.novel_chunks)
    expect(num(row, 'mapBytes')).toBe(want.bytes)
  })

  it('a modified version sends its novel bytes only (within 1.05×), as `cutpoint push` does', async () => {
    const row = await pushOnPage(page, files.mod, 'data.bin')
    const want = nativePush(files.mod, 'data.bin')
    console.log('modified push: page', JSON.stringify(row), '\n native', JSON.stringify(want))
    expect(num(row, 'version')).toBe(2)
    expect(num(row, 'chunks')).toBe(want.chunks)
    expect(num(row, 'novelChunks')).toBe(want.novel_chunks)
    expect(num(row, 'novelBytes')).toBe(want.novel_bytes)
    expect(num(row, 'sentBytes')).toBe(want.sent_bytes)
    expect(num(row, 'novelBytes')).toBeGreaterThan(0)
    expect(num(row, 'novelBytes')).toBeLessThan(num(row, 'bytes') / 10)
    expect(num(row, 'sentBytes')).toBeLessThanOrEqual(1.05 * num(row, 'novelBytes'))
    expect(num(row, 'mapChunks')).toBe(want.chunks)
    expect(num(row, 'mapNovel')).toBe(want.novel_chunks)
  })

  it('RapidCDC (ff+rwt+fpt) from the previous version: hinted chunks on the map, as `cutpoint push --rapid`', async () => {
    await page.selectOption('#rapid', 'ff+rwt+fpt')
    const row = await pushOnPage(page, files.mod, 'data.bin')
    const want = nativePush(files.mod, 'data.bin', '--rapid', 'ff+rwt+fpt')
    console.log('rapid push: page', JSON.stringify(row), '\n native', JSON.stringify(want))
    expect(num(row, 'version')).toBe(3)
    expect(num(row, 'chunks')).toBe(want.chunks)
    expect(num(row, 'novelBytes')).toBe(0)
    expect(num(row, 'sentBytes')).toBe(want.sent_bytes)
    expect(num(row, 'mapChunks')).toBe(want.chunks)
    expect(num(row, 'mapHinted')).toBe(want.hinted_chunks)
    expect(num(row, 'mapHinted')).toBeGreaterThan(want.chunks / 2)
  })

  it('the listing shows the versions; the download link gives the bytes back', async () => {
    await page.click('#refresh')
    await page.waitForSelector('#listing tr[data-name="data.bin"][data-version="3"]')
    const rows = await page.$$eval('#listing tbody tr', (trs) => trs.map((t) => ({ ...(t as HTMLElement).dataset })))
    expect(rows.filter((r) => r.name === 'data.bin').map((r) => [Number(r.version), Number(r.bytes)])).toEqual([
      [1, statSync(files.base).size],
      [2, statSync(files.mod).size],
      [3, statSync(files.mod).size],
    ])
    for (const [v, file] of [[2, files.mod], [1, files.base]] as const) {
      const link = page.locator(`#listing tr[data-name="data.bin"][data-version="${v}"] a.download`)
      expect(await link.getAttribute('href')).toBe(`${store.url}/v1/ns/default/files/data.bin?version=${v}`)
      const [dl] = await Promise.all([page.waitForEvent('download'), link.click()])
      const out = `${tmp}/download-v${v}.bin`
      await dl.saveAs(out)
      expect(dl.suggestedFilename()).toBe('data.bin')
      expect(readFileSync(out).equals(readFileSync(file)), `version ${v} byte-identical`).toBe(true)
    }
  })

  it('pack uploads cut off mid-push: the retried push sends only what the store still lacks', async () => {
    await page.selectOption('#rapid', 'off')
    let packs = 0
    let storedBytes = 0
    const stored: Promise<void>[] = []
    const onResponse = (r: import('playwright-core').Response) => {
      if (r.request().method() === 'POST' && r.url().endsWith('/packs') && r.status() === 200)
        stored.push(r.json().then((j) => void (storedBytes += j.stored_bytes)))
    }
    page.on('response', onResponse)
    // The first pack goes through; every later pack upload fails as a dropped connection.
    const cut = (route: Route) => {
      if (route.request().method() !== 'POST') return route.continue()
      return ++packs <= 1 ? route.continue() : route.abort('connectionreset')
    }
    await page.route(`${store.url}/v1/ns/*/packs`, cut)
    const failed = await pushOnPage(page, files.resume, 'resume.bin', 'error')
    await page.unroute(`${store.url}/v1/ns/*/packs`, cut)
    await Promise.all(stored)
    page.off('response', onResponse)
    console.log('cut-off push:', JSON.stringify(failed), 'stored before the cut', storedBytes, 'pack requests', packs)
    expect(packs).toBeGreaterThan(1)
    expect(storedBytes).toBeGreaterThan(0)
    // Nothing was committed.
    const listed = JSON.parse(execFileSync(bin, ['ls', '--store', store.url, '--json'], { encoding: 'utf8' })) as { name: string }[]
    expect(listed.map((f) => f.name)).toEqual(['data.bin', 'data.bin', 'data.bin'])
    // Retry on the page (the same File).
    await page.click('li.job[data-name="resume.bin"] button.retry')
    const row = await rowWhen(page, 'resume.bin', 'done')
    const fresh = nativePush(files.resume, 'resume.bin')
    console.log('resumed push:', JSON.stringify(row), '\n native on a fresh store', JSON.stringify(fresh))
    expect(num(row, 'version')).toBe(1)
    expect(num(row, 'chunks')).toBe(fresh.chunks)
    // What the store lacked: everything but what the first attempt stored.
    expect(num(row, 'novelBytes')).toBe(fresh.novel_bytes - storedBytes)
    expect(num(row, 'sentBytes')).toBeLessThanOrEqual(1.05 * num(row, 'novelBytes'))
    expect(num(row, 'sentBytes')).toBeLessThan(fresh.sent_bytes - storedBytes / 2)
    // And the store holds the file, byte for byte.
    const out = `${tmp}/resume-pulled.bin`
    execFileSync(bin, ['pull', 'resume.bin', '-o', out, '--store', store.url])
    expect(readFileSync(out).equals(readFileSync(files.resume))).toBe(true)
  })

  it('screenshots; phone-sized viewport; keyboard: the drop zone opens the picker; every field has a label', async () => {
    await page.click('#refresh')
    await page.waitForSelector('#listing tr[data-name="resume.bin"]')
    await page.screenshot({ path: `${ARTIFACTS}/web-app.png`, fullPage: true })
    // Labels.
    const unlabelled = await page.$$eval('input:not([hidden]), select', (els) => els.filter((e) => (e as HTMLInputElement).labels?.length === 0).map((e) => e.id))
    expect(unlabelled).toEqual([])
    // Keyboard: focus the drop zone and press Enter.
    await page.focus('#drop')
    expect(await page.evaluate(() => document.activeElement?.tagName)).toBe('BUTTON')
    // Playwright turns on file-chooser interception when the listener is added, but does not wait
    // for it: a key sent at once can reach Chromium first, and the chooser then opens unseen (8 to
    // 14 of 60 tries here). A round trip to the page after subscribing orders the two (0 of 180).
    const chosen = page.waitForEvent('filechooser')
    await page.evaluate(() => 0)
    await page.keyboard.press('Enter')
    const chooser = await chosen
    expect(chooser.isMultiple()).toBe(true)
    // Phone: nothing wider than the screen.
    await page.setViewportSize({ width: 375, height: 740 })
    await page.waitForTimeout(200)
    const overflow = await page.evaluate(() => document.documentElement.scrollWidth - document.documentElement.clientWidth)
    expect(overflow).toBeLessThanOrEqual(0)
    await page.screenshot({ path: `${ARTIFACTS}/web-app-phone.png`, fullPage: true })
    expect(statSync(`${ARTIFACTS}/web-app.png`).size).toBeGreaterThan(10_000)
    await page.close()
  })

  it('without cross-origin isolation it works too; Stop commits nothing; an unreachable store is a clear error', async () => {
    const p = await openPage(plainUrl, { workers: '1', rapid: 'off' })
    expect(await p.evaluate(() => crossOriginIsolated)).toBe(false)
    expect(await p.textContent('#engine')).toMatch(/not cross-origin isolated/)
    const row = await pushOnPage(p, files.small, 'small.bin')
    const want = nativePush(files.small, 'small.bin')
    expect([num(row, 'chunks'), num(row, 'novelBytes'), num(row, 'sentBytes')]).toEqual([want.chunks, want.novel_bytes, want.sent_bytes])
    // Stop while a pack is on its way (the upload held back until then): nothing is committed.
    let release!: () => void
    const held = new Promise<void>((r) => (release = r))
    let seen!: () => void
    const started = new Promise<void>((r) => (seen = r))
    const hold = async (route: Route) => {
      if (route.request().method() === 'POST') {
        seen()
        await held
      }
      await route.continue().catch(() => {})
    }
    await p.route(`${store.url}/v1/ns/*/packs`, hold)
    await p.setInputFiles('#files', files.stop)
    await started
    await p.click('#stop')
    release()
    const stopped = await rowWhen(p, 'stop.bin', 'stopped')
    expect(stopped.version).toBe('')
    await p.unroute(`${store.url}/v1/ns/*/packs`, hold)
    const listed = JSON.parse(execFileSync(bin, ['ls', '--store', store.url, '--json'], { encoding: 'utf8' })) as { name: string }[]
    expect(listed.some((f) => f.name === 'stop.bin')).toBe(false)
    // A store that is not there: port 9 on 127.0.0.1 (discard; nothing listens).
    await p.fill('#store', 'http://127.0.0.1:9')
    await p.click('#check-store')
    await p.waitForFunction(() => /cannot reach/.test(document.getElementById('store-status')!.textContent!))
    const bad = await pushOnPage(p, files.small, 'small.bin', 'error')
    expect(bad.text).toMatch(/error: .+/)
    await p.close()
  })

  it('a store that stops answering: the page says so and retries, gives up with the message, pushes once the store answers', async () => {
    // The fault proxy (tests/js/fault-proxy.ts) in front of the store; the page's timeout 1 s.
    const proxy = await startFaultProxy(store.url)
    const p = await ctx.newPage()
    try {
      await proxy.stall('silent')
      await p.goto(`${plainUrl}/index.html?store=${encodeURIComponent(proxy.url)}&timeout=1`)
      await p.waitForFunction(() => document.body.dataset.ready, null, { timeout: 30_000 })
      await p.waitForFunction(() => /the store has not answered for 1 s — retrying \(try \d of 5\)/.test(document.getElementById('store-status')!.textContent!), null, { timeout: 30_000 })
      await p.waitForFunction(() => /GET \/v1: no answer for 1 s \(gave up after 5 tries\)/.test(document.getElementById('store-status')!.textContent!), null, { timeout: 60_000 })
      await p.waitForFunction(() => /cannot list the store/.test(document.getElementById('list-status')!.textContent!), null, { timeout: 60_000 })
      // The store's answers stop once, at the push's first request: the row says so, then the push completes.
      await proxy.stallOnce({ answer: 0 })
      await p.setInputFiles('#files', files.small)
      const sel = 'li.job[data-name="small.bin"]:last-of-type'
      await p.waitForFunction((s) => document.querySelector<HTMLElement>(s)?.dataset.stalled === 'true', sel, { timeout: 30_000 })
      expect(await p.textContent(`${sel} .job-state`)).toMatch(/the store has not answered for 1 s — retrying \(try 2 of 5\)/)
      const row = await rowWhen(p, 'small.bin', 'done')
      expect(row.stalled).toBe('false')
      expect(proxy.conns.some((c) => c.stalled)).toBe(true)
    } finally {
      await p.close()
      await proxy.close()
    }
  })

  it('a store with tokens: push with the token, download through the library; a wrong token is a clear error', async () => {
    // No File System Access save dialog in a test: the page saves through a Blob (a download).
    const p = await openPage(plainUrl, { namespace: 'team', token, workers: '2', rapid: 'off' }, tokened.url, () => {
      delete (window as any).showSaveFilePicker
    })
    const row = await pushOnPage(p, files.small, 'small.bin')
    expect(num(row, 'version')).toBe(1)
    expect(num(row, 'novelBytes')).toBe(statSync(files.small).size)
    await p.click('#refresh')
    const button = p.locator('#listing tr[data-name="small.bin"] button.download')
    const [dl] = await Promise.all([p.waitForEvent('download'), button.click()])
    const out = `${tmp}/small-pulled.bin`
    await dl.saveAs(out)
    expect(readFileSync(out).equals(readFileSync(files.small))).toBe(true)
    // A wrong token: the listing and the push say so.
    await p.fill('#token', 'not-a-token')
    await p.click('#check-store')
    await p.waitForFunction(() => /cannot list/.test(document.getElementById('list-status')!.textContent!))
    const bad = await pushOnPage(p, files.small, 'small.bin', 'error')
    console.log('wrong token:', bad.text, '| listing:', await p.textContent('#list-status'))
    expect(bad.text).toMatch(/401|token|unauthori[sz]ed/i)
    // Settings are remembered (localStorage); `?store=` wins over the saved store.
    await p.goto(`${plainUrl}/index.html?store=${encodeURIComponent(store.url)}`)
    await p.waitForFunction(() => document.body.dataset.ready)
    expect(await p.inputValue('#namespace')).toBe('team')
    expect(await p.inputValue('#token')).toBe('not-a-token')
    expect(await p.inputValue('#workers')).toBe('2')
    expect(await p.inputValue('#store')).toBe(store.url)
    await p.close()
  })

  it('Compression (a setting): auto sends the compressed frames of `cutpoint push`, off none; the row says how many bytes travelled compressed', async () => {
    mkdirSync(`${tmp}/text`)
    const data = textData(4 << 20, 25)
    writeFileSync(`${tmp}/text/text.txt`, data)
    writeFileSync(`${tmp}/text/text-off.txt`, textData(4 << 20, 26)) // like it, not a copy (nothing to dedup)
    const p = await openPage(pageUrl, { namespace: 'comp', workers: '2', rapid: 'off', compression: 'auto' })
    const row = await pushOnPage(p, `${tmp}/text/text.txt`, 'text.txt')
    const want: any = nativePush(`${tmp}/text/text.txt`, 'text.txt', '--ns', 'comp')
    expect(want.compressed_chunks).toBeGreaterThan(0)
    expect([num(row, 'compressedBytes'), num(row, 'compressedChunks'), num(row, 'sentBytes')]).toEqual([want.compressed_bytes, want.compressed_chunks, want.sent_bytes])
    expect(await p.textContent(`li.job[data-name="text.txt"] .stats`)).toMatch(/compressed/)
    await p.selectOption('#compression', 'off')
    await p.click('#check-store')
    await p.waitForFunction(() => /connected/.test(document.getElementById('store-status')!.textContent!))
    const off = await pushOnPage(p, `${tmp}/text/text-off.txt`, 'text-off.txt')
    expect(num(off, 'compressedChunks')).toBe(0)
    expect(num(off, 'compressedBytes')).toBe(num(off, 'novelBytes'))
    expect(num(off, 'sentBytes')).toBeGreaterThan(2 * num(row, 'sentBytes'))
    await p.selectOption('#compression', 'auto')
    await p.click('#check-store')
    await p.close()
  })
})
