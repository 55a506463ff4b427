// A folder (chosen or dropped) pushed as one pipeline (the library's `pushMany`: shared queries
// and packs, batch commits), with a row per file. For a folder of 10,000 files the page must not
// freeze: the list is virtualized (only the rows in view are in the DOM, each a fixed height, the
// scroll height from a spacer) and progress is coalesced into one render per animation frame.
import type { Client, PushManyProgress, PushManyResult } from '@cutpoint/web'
import * as fmt from './format'

/** What each row element shows now (its index, size and state text): unchanged rows are not written again. */
const shown = new WeakMap<HTMLElement, string>()

/** A row's height, px (style.css `.folder-row`). */
const ROW = 24

interface Row {
  name: string
  /** Known once the pipeline opens the file (a File's size is a synchronous look-up in Chromium). */
  size?: number
  stage: PushManyProgress['stage'] | 'waiting'
  bytes: number
  version?: number
  error?: string
}

export class FolderPush {
  readonly el: HTMLLIElement
  state: 'running' | 'done' | 'error' | 'stopped' = 'running'
  error = ''
  result?: PushManyResult
  private readonly rows: Row[]
  private readonly files: { file: File; name: string }[]
  private readonly head: HTMLElement
  private readonly bar: HTMLProgressElement
  private readonly viewport: HTMLElement
  private readonly list: HTMLElement
  private readonly spacer: HTMLElement
  private last?: PushManyProgress
  private frame = 0
  /** Renders so far (the Playwright test reads it: far fewer than progress events). */
  renders = 0

  constructor(files: { file: File; name: string }[], parent: HTMLElement) {
    this.files = files
    // Not `file.size` here: 10,000 of them at once would freeze the page (see `Row.size`).
    this.rows = files.map((f) => ({ name: f.name, stage: 'waiting', bytes: 0 }))
    const li = (this.el = document.createElement('li'))
    li.className = 'job folder'
    this.head = document.createElement('div')
    this.head.className = 'job-head'
    this.head.setAttribute('role', 'status')
    this.bar = document.createElement('progress')
    this.bar.max = 1
    this.bar.value = 0
    this.bar.setAttribute('aria-label', 'Progress of the folder')
    this.viewport = document.createElement('div')
    this.viewport.className = 'folder-rows'
    this.viewport.tabIndex = 0
    this.viewport.setAttribute('aria-label', `${files.length} files`)
    this.spacer = document.createElement('div')
    this.spacer.style.height = `${files.length * ROW}px`
    this.spacer.style.position = 'relative'
    this.list = document.createElement('ol')
    this.list.className = 'folder-list'
    this.spacer.append(this.list)
    this.viewport.append(this.spacer)
    this.viewport.addEventListener('scroll', () => this.schedule(), { passive: true })
    li.append(this.head, this.bar, this.viewport)
    parent.append(li)
    this.render()
  }

  /** Pushes the files as one `pushMany`; per-file rows as it goes. */
  async run(client: Client, signal: AbortSignal): Promise<void> {
    try {
      this.result = await client.pushMany(
        this.files.map((f) => ({ input: f.file, name: f.name })),
        { signal, onProgress: (p) => this.progress(p) },
      )
      this.result.results.forEach((r, i) => {
        const row = this.rows[i]
        if ('error' in r) {
          row.stage = 'failed'
          row.error = r.error.message
        } else {
          row.stage = 'done'
          row.version = r.version
          row.bytes = r.bytes
        }
      })
      this.state = 'done'
    } catch (e: any) {
      this.state = signal.aborted ? 'stopped' : 'error'
      this.error = String(e?.message ?? e)
    }
    cancelAnimationFrame(this.frame)
    this.frame = 0
    this.render()
  }

  private progress(p: PushManyProgress): void {
    const row = this.rows[p.index]
    if (row) {
      row.stage = p.stage
      row.bytes = p.bytes
      if (p.total !== undefined) row.size = p.total
      if (p.result) row.version = p.result.version
      if (p.error) row.error = p.error.message
    }
    this.last = p
    this.schedule()
  }

  /** One render per animation frame, however many events came. */
  private schedule(): void {
    if (!this.frame) {
      this.frame = requestAnimationFrame(() => {
        this.frame = 0
        this.render()
      })
    }
  }

  private render(): void {
    this.renders++
    // Read before anything is written: reading the viewport after the head's text changed made
    // the browser lay the page out again at once, in every frame.
    const top = this.viewport.scrollTop
    const height = this.viewport.clientHeight || 10 * ROW
    const p = this.last
    const n = this.rows.length
    const done = this.state === 'done' ? (this.result?.committed ?? 0) : (p?.filesDone ?? 0)
    const failed = this.state === 'done' ? (this.result?.failed ?? 0) : (p?.filesFailed ?? 0)
    const bytes = this.result?.bytes ?? p?.allBytes ?? 0
    const sent = this.result?.sentBytes ?? p?.sentBytes ?? 0
    const what =
      this.state === 'running'
        ? `pushing ${fmt.count(n)} files: ${fmt.count(done)} committed${failed ? `, ${fmt.count(failed)} failed` : ''}, ${fmt.bytes(bytes)} processed, ${fmt.bytes(sent)} sent`
        : this.state === 'done'
          ? `${fmt.count(n)} files: ${fmt.count(done)} committed${failed ? `, ${fmt.count(failed)} failed` : ''}, ${fmt.bytes(this.result!.bytes)} processed, ${fmt.bytes(this.result!.novelBytes)} novel, ${fmt.bytes(sent)} sent in ${fmt.count(this.result!.packs)} packs and ${fmt.count(this.result!.commitRequests)} commit requests`
          : `${this.state}: ${this.error}`
    this.head.textContent = what
    // Files chunked (then committed) of all: sizes are not known ahead.
    const chunked = p ? p.index + (p.stage === 'chunking' ? 0 : 1) : 0
    this.bar.value = this.state === 'done' ? 1 : n > 0 ? Math.min(1, (chunked + done + failed) / (2 * n)) : 0
    Object.assign(this.el.dataset, {
      state: this.state,
      files: String(n),
      done: String(done),
      failed: String(failed),
      bytes: String(bytes),
      sentBytes: String(sent),
      commitRequests: String(this.result?.commitRequests ?? ''),
      renders: String(this.renders),
    })
    this.renderRows(top, height)
  }

  /** The rows in view (`top` and `height`: the viewport's, px; and a few around them): the only ones in the DOM. */
  private renderRows(top: number, height: number): void {
    const first = Math.max(0, Math.floor(top / ROW) - 5)
    const last = Math.min(this.rows.length, Math.ceil((top + height) / ROW) + 5)
    const items = this.list.children
    let k = 0
    for (let i = first; i < last; i++, k++) {
      let li = items[k] as HTMLLIElement | undefined
      if (!li) {
        li = document.createElement('li')
        li.className = 'folder-row'
        li.append(document.createElement('span'), document.createElement('span'), document.createElement('span'))
        ;(li.children[0] as HTMLElement).className = 'row-name'
        ;(li.children[2] as HTMLElement).className = 'row-state'
        this.list.append(li)
      }
      const r = this.rows[i]
      // The DOM is touched only where the row (or the row shown in this element) changed.
      const size = r.size !== undefined ? `${fmt.bytes(r.bytes)} of ${fmt.bytes(r.size)}` : ''
      const state = r.stage === 'done' ? `done: version ${r.version}` : r.stage === 'failed' ? `error: ${r.error}` : r.stage
      const key = `${i}\n${size}\n${state}`
      if (shown.get(li) === key) continue
      shown.set(li, key)
      li.style.top = `${i * ROW}px`
      ;(li.children[0] as HTMLElement).textContent = r.name
      ;(li.children[1] as HTMLElement).textContent = size
      ;(li.children[2] as HTMLElement).textContent = state
      li.dataset.index = String(i)
      li.dataset.name = r.name
      li.dataset.stage = r.stage
      li.dataset.version = r.version !== undefined ? String(r.version) : ''
    }
    while (items.length > k) items[items.length - 1].remove()
  }
}
