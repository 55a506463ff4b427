// The cutpoint page: pick or drop files (or a folder), push them to a store through the library's
// client (chunked and fingerprinted in Web Workers; only the chunks the store lacks are sent),
// watch the numbers and a chunk map per file, list the store and download back.
//
// State lives in plain objects; the DOM shows it. Each file row carries its exact numbers as
// data-* attributes (bytes, chunks, novel/sent bytes, version), which the Playwright test reads.
import { init, createClient, type Client, type FileVersion, type PushProgress, type PushResult, type ChunkInfo, type PendingPush, type RetryEvent } from '@cutpoint/web'
import { ChunkMap } from './chunkmap'
import { FolderPush } from './folder'
import * as fmt from './format'
import { loadSettings, saveSettings, storeBase, type Settings } from './settings'
import { canPickDirectory, filesOfDrop, filesOfHandle, pickDirectory, type FolderFile } from './sources'

const $ = <T extends HTMLElement = HTMLElement>(id: string) => document.getElementById(id) as T

type State = 'queued' | 'running' | 'done' | 'error' | 'stopped'
interface Job {
  file: File
  name: string
  state: State
  progress: PushProgress | null
  result: PushResult | null
  error: string
  /** ms spent pushing (for the total throughput). */
  elapsed: number
  el: HTMLLIElement
  map: ChunkMap
  /** While the store does not answer: what the row says instead of its stage. */
  stall: string
}

const jobs: Job[] = []
/** Folders waiting for their push (each one `pushMany`, after the single files queued before). */
const folders: FolderPush[] = []
let settings: Settings = loadSettings(location)
let client: Client | null = null
let clientKey = ''
let running = false
let current: AbortController | null = null
/** The push running now (a stalled store is said on its row). */
let currentJob: Job | null = null

/** The idle timeout of the page's requests, seconds: 30, or `?timeout=SECS`. */
const TIMEOUT_S = (() => {
  const t = Number(new URLSearchParams(location.search).get('timeout'))
  return t > 0 && t <= 3600 ? t : 30
})()

/**
 * A request failed and is retried (the library's `onRetry`): the store's status and the running
 * push's row say so — "the store has not answered for 30 s — retrying" — rather than leave a
 * progress bar frozen. The next progress clears it.
 */
function onRetry(e: RetryEvent): void {
  const why = e.timedOut ? `the store has not answered for ${e.waited / 1000} s` : `the store failed (${e.error.message.replace(/^cutpoint: /, '')})`
  const msg = `${why} — retrying (try ${e.attempt} of ${e.attempts})`
  const status = $('store-status')
  status.textContent = msg
  status.className = 'status bad'
  status.dataset.stalled = 'true'
  if (currentJob) {
    currentJob.stall = msg
    render(currentJob)
  }
}

/** The store answered again after `onRetry`. */
function answered(): void {
  const status = $('store-status')
  if (status.dataset.stalled !== 'true') return
  delete status.dataset.stalled
  status.textContent = 'the store answers again'
  status.className = 'status ok'
}

// ---- settings --------------------------------------------------------------------------------

const fields = ['store', 'namespace', 'token', 'profile', 'workers', 'rapid', 'compression'] as const
function showSettings(): void {
  for (const k of fields) ($(k) as HTMLInputElement).value = settings[k]
}
function readSettings(): Settings {
  const s = { ...settings }
  for (const k of fields) s[k] = ($(k) as HTMLInputElement).value.trim()
  return s
}

/** The client for the current settings (a new one when they changed). */
async function getClient(): Promise<Client> {
  const s = settings
  const key = JSON.stringify(s)
  if (client && key === clientKey) return client
  const old = client
  // Swapped before anything is awaited: a second call meanwhile finds the new client, so none is
  // left behind with its workers running. The old one stops in the background.
  client = null
  if (old) void old.close().catch(() => {})
  const workers = s.workers === '' ? undefined : Number(s.workers)
  client = createClient({
    store: storeBase(s.store),
    namespace: s.namespace || undefined,
    token: s.token || undefined,
    profile: s.profile || undefined,
    workers,
    compression: (s.compression || 'auto') as 'auto' | 'off' | 'max',
    timeout: TIMEOUT_S * 1000,
    onRetry,
  })
  clientKey = key
  return client
}

function message(e: unknown): string {
  const m = e instanceof Error ? e.message : String(e)
  if (/Failed to fetch|NetworkError|Load failed/i.test(m) && !m.startsWith('cutpoint:'))
    return `cannot reach the store at ${settings.store}: is \`cutpoint serve\` running, and does it allow this page? (\`cutpoint serve --cors-origin ${location.origin}\`)`
  return m
}

async function connect(): Promise<void> {
  const status = $('store-status')
  status.textContent = 'connecting…'
  status.className = 'status'
  try {
    // The library's request: under its timeout and retries (a store that does not answer is said
    // as such by `onRetry`, then as an error), not a bare fetch that could wait for ever.
    const v = await (await getClient()).info()
    status.textContent = `connected: cutpoint ${v.version}, protocol ${v.protocol}, ${v.auth === 'open' ? 'open store' : 'tokens required'}`
    status.className = 'status ok'
  } catch (e) {
    status.textContent = message(e)
    status.className = 'status bad'
  }
  await refreshPending()
  await refreshList()
  warmClient()
}

/** Starts the workers for the current settings, so that a drop does not wait for them. */
function warmClient(): void {
  if (running) return // not while pushes run: a new client would stop the workers of the one in use
  void getClient()
    .then((c) => c.warm())
    .catch(() => {}) // a push says what is wrong (a bad profile, no workers)
}

// ---- file rows ---------------------------------------------------------------------------------

function el<K extends keyof HTMLElementTagNameMap>(tag: K, cls?: string, text?: string): HTMLElementTagNameMap[K] {
  const e = document.createElement(tag)
  if (cls) e.className = cls
  if (text !== undefined) e.textContent = text
  return e
}

function statList(dl: HTMLElement, items: [string, string][]): void {
  dl.replaceChildren()
  for (const [k, v] of items) {
    const d = el('div')
    d.append(el('dt', '', k), el('dd', '', v))
    dl.append(d)
  }
}

function addJob(file: File, name: string): void {
  const li = el('li', 'job')
  li.dataset.name = name
  const head = el('div', 'job-head')
  const title = el('span', 'job-name', name)
  title.title = name
  const size = el('span', 'job-size', fmt.bytes(file.size))
  const state = el('span', 'job-state', 'queued')
  state.setAttribute('role', 'status')
  const retry = el('button', 'retry', 'Retry')
  retry.type = 'button'
  retry.hidden = true
  retry.setAttribute('aria-label', `Retry ${name}`)
  head.append(title, size, state, retry)
  const bar = el('progress')
  bar.max = 1
  bar.value = 0
  bar.setAttribute('aria-label', `Progress of ${name}`)
  const canvas = el('canvas', 'map')
  canvas.setAttribute('role', 'img')
  canvas.setAttribute('aria-label', `Chunk map of ${name}`)
  const dl = el('dl', 'stats')
  li.append(head, bar, canvas, dl)
  $('queue').append(li)
  const job: Job = { file, name, state: 'queued', progress: null, result: null, error: '', elapsed: 0, el: li, map: new ChunkMap(canvas, file.size), stall: '' }
  retry.addEventListener('click', () => {
    job.state = 'queued'
    job.error = ''
    render(job)
    void runQueue()
  })
  jobs.push(job)
  render(job)
}

function render(job: Job): void {
  const li = job.el
  const p = job.progress
  const r = job.result
  li.dataset.state = job.state
  const stage = job.state === 'running' ? (p?.stage ?? 'starting') : job.state
  const state = li.querySelector('.job-state')!
  const resumed = r?.resumed ?? p?.resumed
  const again = resumed ? ` (resumed: ${fmt.count(resumed.packs)} pack${resumed.packs === 1 ? '' : 's'} already stored)` : ''
  state.textContent = (job.state === 'error' ? `error: ${job.error}` : job.state === 'done' && r ? `done: version ${r.version}` : job.state === 'running' && job.stall ? job.stall : stage) + again
  li.dataset.stalled = String(job.state === 'running' && !!job.stall)
  ;(li.querySelector('.retry') as HTMLButtonElement).hidden = !(job.state === 'error' || job.state === 'stopped')
  const bytes = r?.bytes ?? p?.bytes ?? 0
  const novel = r?.novelBytes ?? p?.novelBytes ?? 0
  const sent = r?.sentBytes ?? p?.sentBytes ?? 0
  const chunks = r?.chunks ?? p?.chunks ?? 0
  const novelChunks = r?.novelChunks ?? p?.novelChunks ?? 0
  const bar = li.querySelector('progress')!
  bar.value = job.state === 'done' ? 1 : job.file.size > 0 ? Math.min(1, bytes / job.file.size) : 0
  const ratio = r ? (r.novelBytes > 0 ? r.bytes / r.novelBytes : Infinity) : (p?.dedupRatio ?? NaN)
  const thr = r && job.elapsed > 0 ? (r.bytes * 1000) / job.elapsed : (p?.throughput ?? NaN)
  statList(li.querySelector('.stats')!, [
    ['processed', `${fmt.bytes(bytes)} of ${fmt.bytes(job.file.size)}`],
    ['novel', fmt.bytes(novel)],
    ['sent', fmt.bytes(sent)],
    ...(r ? [['compressed', `${fmt.bytes(r.compressedBytes)} (${fmt.count(r.compressedChunks)} chunks compressed)`] as [string, string]] : []),
    ['chunks', `${fmt.count(chunks)} (${fmt.count(novelChunks)} novel, ${fmt.count(job.map.hintedChunks)} hinted)`],
    ['dedup ratio', fmt.ratio(ratio)],
    ['throughput', fmt.rate(thr)],
    ...(resumed ? [['resumed', `${fmt.count(resumed.packs)} packs, ${fmt.bytes(resumed.bytes)} stored before`] as [string, string]] : []),
  ])
  Object.assign(li.dataset, {
    resumedPacks: resumed ? String(resumed.packs) : '',
    resumedChunks: resumed ? String(resumed.chunks) : '',
    resumedBytes: resumed ? String(resumed.bytes) : '',
    size: String(job.file.size),
    bytes: String(bytes),
    novelBytes: String(novel),
    sentBytes: String(sent),
    compressedBytes: r ? String(r.compressedBytes) : '',
    compressedChunks: r ? String(r.compressedChunks) : '',
    chunks: String(chunks),
    novelChunks: String(novelChunks),
    mapChunks: String(job.map.chunks),
    mapNovel: String(job.map.novelChunks),
    mapHinted: String(job.map.hintedChunks),
    mapBytes: String(job.map.mappedBytes),
    version: r ? String(r.version) : '',
    packs: r ? String(r.packs) : '',
    elapsedMs: String(Math.round(job.elapsed)),
  })
  job.el.querySelector('canvas')!.setAttribute(
    'aria-label',
    `Chunk map of ${job.name}: ${fmt.count(job.map.chunks)} chunks, ${fmt.count(job.map.novelChunks)} novel, ${fmt.count(job.map.hintedChunks)} hinted`,
  )
  renderTotal()
}

function renderTotal(): void {
  let size = 0, bytes = 0, novel = 0, sent = 0, chunks = 0, novelChunks = 0, ms = 0
  const counts: Record<State, number> = { queued: 0, running: 0, done: 0, error: 0, stopped: 0 }
  for (const j of jobs) {
    const v = j.result ?? j.progress
    size += j.file.size
    bytes += v?.bytes ?? 0
    novel += v?.novelBytes ?? 0
    sent += v?.sentBytes ?? 0
    chunks += v?.chunks ?? 0
    novelChunks += v?.novelChunks ?? 0
    ms += j.elapsed
    counts[j.state]++
  }
  const total = $('total')
  total.hidden = jobs.length === 0
  ;($('total-bar') as HTMLProgressElement).value = size > 0 ? bytes / size : 0
  $('total-state').textContent = Object.entries(counts).filter(([, n]) => n > 0).map(([s, n]) => `${n} ${s}`).join(', ')
  statList($('total-stats'), [
    ['files', fmt.count(jobs.length)],
    ['processed', `${fmt.bytes(bytes)} of ${fmt.bytes(size)}`],
    ['novel', fmt.bytes(novel)],
    ['sent', fmt.bytes(sent)],
    ['chunks', `${fmt.count(chunks)} (${fmt.count(novelChunks)} novel)`],
    ['dedup ratio', fmt.ratio(novel > 0 ? bytes / novel : bytes > 0 ? Infinity : NaN)],
    ['throughput', fmt.rate(ms > 0 ? (bytes * 1000) / ms : NaN)],
  ])
  Object.assign(total.dataset, { bytes: String(bytes), novelBytes: String(novel), sentBytes: String(sent), chunks: String(chunks), done: String(counts.done), errors: String(counts.error) })
  ;($('stop') as HTMLButtonElement).disabled = !running
}

// ---- pushing -----------------------------------------------------------------------------------

async function runQueue(): Promise<void> {
  if (running) return
  running = true
  renderTotal()
  try {
    for (;;) {
      const job = jobs.find((j) => j.state === 'queued')
      if (job) await pushOne(job)
      else if (folders.length) await pushFolder(folders.shift()!)
      else break
    }
  } finally {
    running = false
    current = null
    renderTotal()
    void refreshList()
  }
}

async function pushOne(job: Job): Promise<void> {
  job.state = 'running'
  job.progress = null
  job.result = null
  job.stall = ''
  currentJob = job
  job.map.reset()
  render(job)
  const ac = new AbortController()
  current = ac
  const t0 = performance.now()
  // The row is rendered at most about ten times a second while the push runs.
  let frame = 0
  let timer: ReturnType<typeof setTimeout> | undefined
  const later = () => {
    if (frame || timer) return
    timer = setTimeout(() => {
      timer = undefined
      frame = requestAnimationFrame(() => {
        frame = 0
        render(job)
      })
    }, 100)
  }
  try {
    const c = await getClient()
    const rapid = settings.rapid && settings.rapid !== 'off' ? settings.rapid : undefined
    job.result = await c.push(job.file, {
      name: job.name,
      rapid,
      signal: ac.signal,
      onProgress: (p) => {
        job.progress = p
        if (job.stall) {
          job.stall = ''
          answered()
        }
        job.elapsed = performance.now() - t0
        later()
      },
      onChunks: (list: ChunkInfo[]) => {
        job.map.add(list)
        later()
      },
    })
    job.state = 'done'
  } catch (e) {
    job.state = ac.signal.aborted ? 'stopped' : 'error'
    job.error = message(e)
  } finally {
    job.elapsed = performance.now() - t0
    job.stall = ''
    currentJob = null
    if (frame) cancelAnimationFrame(frame)
    clearTimeout(timer)
    frame = 0
    render(job)
    await refreshPending()
  }
}

/** A folder's files as one pipeline (`pushMany`), a row per file. */
async function pushFolder(f: FolderPush): Promise<void> {
  const ac = new AbortController()
  current = ac
  try {
    await f.run(await getClient(), ac.signal)
  } catch (e) {
    f.state = 'error'
    f.error = message(e)
  }
}

/** A folder (several files with their paths): one push of them all. */
function enqueueFolder(files: { file: File; name: string }[]): void {
  if (files.length < 2) return enqueue(files)
  folders.push(new FolderPush(files, $('queue')))
  void runQueue()
}

// ---- unfinished pushes (the library's journal in IndexedDB) ------------------------------------

/** Lists the pushes of this store and namespace that a reload, a closed tab or an error cut off. */
async function refreshPending(): Promise<void> {
  const box = $('pending-box')
  const list = $('pending')
  let entries: PendingPush[] = []
  try {
    entries = (await (await getClient()).pending()).filter((e) => e.state !== 'running')
  } catch {
    entries = []
  }
  list.replaceChildren()
  for (const e of entries) {
    const li = el('li')
    Object.assign(li.dataset, { name: e.name, file: e.fileName, size: String(e.size), sent: String(e.sentBytes), packs: String(e.packs), state: e.state })
    const pct = e.size > 0 ? Math.min(100, Math.floor((100 * e.sentBytes) / e.size)) : 0
    const when = new Date(e.updatedAt).toLocaleTimeString([], { hour: '2-digit', minute: '2-digit', hour12: false })
    const file = e.fileName && e.fileName !== e.name.split('/').pop() ? ` (${e.fileName})` : ''
    const why = e.state === 'failed' && e.error ? `: ${e.error}` : ''
    const what = el('span', 'what', `${e.name}${file} — ${pct}% sent (${fmt.bytes(e.sentBytes)} of ${fmt.bytes(e.size)}), ${e.state} ${when}${why} — pick or drop the same file to resume`)
    const forget = el('button', 'forget', 'Forget')
    forget.type = 'button'
    forget.setAttribute('aria-label', `Forget the unfinished push of ${e.name}`)
    forget.addEventListener('click', async () => {
      forget.disabled = true
      try {
        await (await getClient()).forget(e)
      } finally {
        await refreshPending()
        // Keep the keyboard somewhere sensible: the next Forget, else the drop zone.
        ;(list.querySelector<HTMLButtonElement>('button.forget') ?? $('drop')).focus()
      }
    })
    li.append(what, forget)
    list.append(li)
  }
  box.hidden = entries.length === 0
  list.dataset.count = String(entries.length)
  document.body.dataset.pending = '1'
}

function enqueue(files: { file: File; name: string }[]): void {
  for (const f of files) addJob(f.file, f.name)
  void runQueue()
}

/**
 * A folder being read (picked or dropped), said in the drop zone's small line as it goes; then
 * its files are pushed. A folder that cannot be read is said there too.
 */
async function readFolder(read: (onCount: (n: number) => void) => Promise<{ files: FolderFile[]; folder: boolean } | undefined>): Promise<void> {
  const line = $('drop').querySelector<HTMLElement>('.drop-small')!
  const was = line.textContent
  const zone = $('drop')
  zone.dataset.reading = '1'
  line.textContent = 'reading the folder…'
  let shown = 0
  try {
    const got = await read((n) => {
      // At most one update a frame's worth of files (the text is cheap; the layout is not).
      if (n - shown < 100) return
      shown = n
      line.textContent = `reading the folder: ${fmt.count(n)} files…`
    })
    line.textContent = was
    if (got) (got.folder ? enqueueFolder : enqueue)(got.files)
  } catch (e) {
    line.textContent = `cannot read the folder: ${message(e)}`
  } finally {
    delete zone.dataset.reading
  }
}

// ---- the store's listing and downloads -----------------------------------------------------------

function restoreUrl(name: string, version: number): string {
  return `${storeBase(settings.store)}/v1/ns/${encodeURIComponent(settings.namespace)}/files/${encodeURIComponent(name)}?version=${version}`
}

/** With a token: the library's verified pull, saved with the File System Access API where there is one, else as a Blob. */
async function download(name: string, version: number, button: HTMLButtonElement): Promise<void> {
  const label = button.textContent
  button.disabled = true
  button.textContent = 'downloading…'
  try {
    const c = await getClient()
    const base = name.split('/').pop() || 'download'
    const picker = (window as any).showSaveFilePicker as undefined | ((o: object) => Promise<any>)
    if (picker) {
      const handle = await picker({ suggestedName: base })
      const stream = await c.pull(name, { version })
      await stream.pipeTo(await handle.createWritable())
    } else {
      // No streaming save in this browser: the file is held as a Blob until it is saved.
      const blob = await new Response(await c.pull(name, { version })).blob()
      const url = URL.createObjectURL(blob)
      const a = el('a')
      a.href = url
      a.download = base
      document.body.append(a)
      a.click()
      a.remove()
      setTimeout(() => URL.revokeObjectURL(url), 60_000)
    }
  } catch (e) {
    if (!(e instanceof DOMException && e.name === 'AbortError')) $('list-status').textContent = `download of ${name} failed: ${message(e)}`
  } finally {
    button.disabled = false
    button.textContent = label
  }
}

/** The listing being built (a newer refresh stops an older one's slices). */
let listing = 0
/**
 * Rows of the listing shown at a time ("Show more" adds the next ones): the rows of a namespace
 * of 10,000 files, in one table, took the page's thread seconds at a time to lay out.
 */
const LIST_PAGE = 500
/** Rows of the listing put in the table per frame. */
const LIST_SLICE = 50

async function refreshList(): Promise<void> {
  const status = $('list-status')
  const body = ($('listing') as HTMLTableElement).tBodies[0]
  status.textContent = 'loading…'
  const mine = ++listing
  try {
    const c = await getClient()
    const files: FileVersion[] = await c.list()
    answered()
    if (mine !== listing) return
    body.replaceChildren()
    document.getElementById('list-more')?.remove()
    if (!(await showRows(files, 0, mine))) return
    status.textContent = files.length === 0 ? `nothing in namespace ${settings.namespace} yet` : `${files.length} version${files.length === 1 ? '' : 's'} in namespace ${settings.namespace}`
    status.className = 'status'
  } catch (e) {
    if (mine !== listing) return
    body.replaceChildren()
    document.getElementById('list-more')?.remove()
    status.textContent = `cannot list the store: ${message(e)}`
    status.className = 'status bad'
  }
}

/**
 * The listing's rows `from` on, LIST_PAGE of them, put in the table a slice at a time: at most
 * LIST_SLICE rows or 8 ms of making them, then the table is laid out in the next frame before the
 * next slice (500 rows put in at once were one task of about 300 ms of layout on a loaded
 * machine); a "Show more" button while some are left. False: a newer refresh took over.
 */
async function showRows(files: FileVersion[], from: number, mine: number): Promise<boolean> {
  const body = ($('listing') as HTMLTableElement).tBodies[0]
  const to = Math.min(files.length, from + LIST_PAGE)
  for (let i = from; i < to; ) {
    const rows = document.createDocumentFragment()
    const since = performance.now()
    for (let k = 0; i < to && k < LIST_SLICE && performance.now() - since < 8; k++, i++) rows.append(listRow(files[i]))
    body.append(rows)
    if (i < to) {
      // After the next frame (or 100 ms: a hidden tab has no frames).
      await new Promise((r) => {
        requestAnimationFrame(() => setTimeout(r, 0))
        setTimeout(r, 100)
      })
      if (mine !== listing) return false
    }
  }
  if (to < files.length) {
    const left = files.length - to
    const more = el('button', 'more', `Show ${fmt.count(Math.min(LIST_PAGE, left))} more (${fmt.count(left)} not shown)`)
    more.id = 'list-more'
    more.type = 'button'
    more.addEventListener('click', () => {
      more.remove()
      void showRows(files, to, listing)
    })
    $('listing').parentElement!.after(more)
  }
  return true
}

/** A row of the listing: the name, version, size, chunks, when, and a download link (or button, with a token). */
function listRow(f: FileVersion): HTMLTableRowElement {
  const tr = el('tr')
  tr.dataset.name = f.name
  tr.dataset.version = String(f.version)
  tr.dataset.bytes = String(f.bytes)
  const name = el('td', 'name', f.name)
  name.title = f.name
  const dl = el('td')
  const what = `Download ${f.name} version ${f.version}`
  if (settings.token) {
    const b = el('button', 'download', 'Download')
    b.type = 'button'
    b.setAttribute('aria-label', what)
    b.addEventListener('click', () => void download(f.name, f.version, b))
    dl.append(b)
  } else {
    // An open store: a plain link; the store streams the file (ranges, verified chunks).
    const a = el('a', 'download', 'Download')
    a.href = restoreUrl(f.name, f.version)
    a.download = f.name.split('/').pop() || 'download'
    a.setAttribute('aria-label', what)
    dl.append(a)
  }
  tr.append(name, el('td', 'num', String(f.version)), el('td', 'num', fmt.bytes(f.bytes)), el('td', 'num', fmt.count(f.chunks)), el('td', '', fmt.when(f.created)), dl)
  return tr
}

// ---- wiring --------------------------------------------------------------------------------------

function wire(): void {
  showSettings()
  const form = $('settings') as HTMLFormElement
  const apply = () => {
    settings = readSettings()
    saveSettings(settings)
    warmClient()
  }
  form.addEventListener('change', apply)
  form.addEventListener('submit', (e) => {
    e.preventDefault()
    apply()
    void connect()
  })
  const files = $('files') as HTMLInputElement
  const folder = $('folder') as HTMLInputElement
  $('drop').addEventListener('click', () => files.click())
  // showDirectoryPicker where the browser has it: the `webkitdirectory` input makes the whole
  // File list on the page's thread in one task (about 5 s at 10,000 files in Chromium).
  $('pick-folder').addEventListener('click', () => {
    if (!canPickDirectory()) return folder.click()
    void readFolder(async (onCount) => {
      const dir = await pickDirectory()
      return dir && { files: await filesOfHandle(dir, onCount), folder: true }
    })
  })
  files.addEventListener('change', () => {
    enqueue(Array.from(files.files ?? []).map((file) => ({ file, name: file.name })))
    files.value = ''
  })
  folder.addEventListener('change', () => {
    enqueueFolder(Array.from(folder.files ?? []).map((file) => ({ file, name: file.webkitRelativePath || file.name })))
    folder.value = ''
  })
  const zone = $('drop')
  // The whole page accepts drops (a file dropped beside the zone must not navigate away).
  document.addEventListener('dragover', (e) => {
    e.preventDefault()
    zone.classList.add('over')
  })
  document.addEventListener('dragleave', (e) => {
    if (e.relatedTarget === null) zone.classList.remove('over')
  })
  document.addEventListener('drop', (e) => {
    e.preventDefault()
    zone.classList.remove('over')
    // readFolder calls filesOfDrop at once, in the drop's task: it takes the entries before the
    // DataTransfer is emptied.
    const dt = e.dataTransfer
    if (dt) void readFolder((onCount) => filesOfDrop(dt, onCount))
  })
  $('stop').addEventListener('click', () => {
    for (const j of jobs) if (j.state === 'queued') (j.state = 'stopped'), render(j)
    current?.abort()
  })
  $('clear').addEventListener('click', () => {
    for (let i = jobs.length - 1; i >= 0; i--)
      if (jobs[i].state === 'done') {
        jobs[i].el.remove()
        jobs.splice(i, 1)
      }
    for (const f of document.querySelectorAll('li.folder[data-state="done"]')) f.remove()
    renderTotal()
  })
  $('refresh').addEventListener('click', () => void refreshList())
  window.addEventListener('resize', () => jobs.forEach((j) => j.map.draw()))
  renderTotal()
}

wire()
init()
  .then((info) => {
    $('engine').textContent = `WebAssembly ${info.flavor} · ${navigator.hardwareConcurrency || '?'} cores · ${crossOriginIsolated ? 'cross-origin isolated' : 'not cross-origin isolated'}`
    document.body.dataset.ready = '1'
    return connect()
  })
  .catch((e) => {
    $('engine').textContent = `cannot load the WebAssembly module: ${message(e)}`
    document.body.dataset.ready = 'error'
  })
