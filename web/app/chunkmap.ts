// A chunk map: one canvas strip per file. The file is cut into a fixed number of columns; each
// column keeps how many of its bytes were in duplicate vs novel chunks (upper band) and in chunks
// cut at a RapidCDC hint vs rolled over (lower band). Memory is fixed (a few KiB per file),
// whatever the number of chunks; drawing is batched to one frame.

export interface MapChunk {
  offset: number
  length: number
  novel: boolean
  hinted: boolean
}

const COLUMNS = 1024
export const COLORS = { empty: '#e9ecef', dup: '#2f9e44', novel: '#e8590c', hint: '#7048e8', roll: '#adb5bd' }

export class ChunkMap {
  readonly canvas: HTMLCanvasElement
  private readonly size: number
  private readonly novel = new Float64Array(COLUMNS)
  private readonly dup = new Float64Array(COLUMNS)
  private readonly hinted = new Float64Array(COLUMNS)
  private readonly rolled = new Float64Array(COLUMNS)
  private pending = false
  /** Counts of what `add` was given (the page shows them; the tests read them). */
  chunks = 0
  novelChunks = 0
  hintedChunks = 0
  mappedBytes = 0

  constructor(canvas: HTMLCanvasElement, size: number) {
    this.canvas = canvas
    this.size = size
    this.draw()
  }

  add(list: readonly MapChunk[]): void {
    const size = this.size
    const bw = size / COLUMNS
    for (const c of list) {
      this.chunks++
      if (c.novel) this.novelChunks++
      if (c.hinted) this.hintedChunks++
      this.mappedBytes += c.length
      if (size <= 0 || c.length <= 0) continue
      const end = Math.min(c.offset + c.length, size)
      let a = c.offset
      let col = Math.min(COLUMNS - 1, Math.floor(a / bw))
      while (a < end && col < COLUMNS) {
        const colEnd = Math.min(end, (col + 1) * bw)
        const n = Math.max(0, colEnd - a)
        ;(c.novel ? this.novel : this.dup)[col] += n
        ;(c.hinted ? this.hinted : this.rolled)[col] += n
        a = colEnd
        col++
      }
    }
    this.schedule()
  }

  /** Forgets what was mapped (a retried push maps the file again). */
  reset(): void {
    for (const a of [this.novel, this.dup, this.hinted, this.rolled]) a.fill(0)
    this.chunks = this.novelChunks = this.hintedChunks = this.mappedBytes = 0
    this.schedule()
  }

  private schedule(): void {
    if (this.pending) return
    this.pending = true
    // At most about ten frames a second: a push's page thread is busy enough (on 2 cores,
    // drawing at every frame took 0.5 s of a 1 GiB push).
    setTimeout(() =>
      requestAnimationFrame(() => {
        this.pending = false
        this.draw()
      }), 100)
  }

  draw(): void {
    const cv = this.canvas
    const dpr = Math.max(1, Math.min(3, globalThis.devicePixelRatio || 1))
    const w = Math.max(1, Math.round((cv.clientWidth || 300) * dpr))
    const h = Math.max(1, Math.round((cv.clientHeight || 28) * dpr))
    if (cv.width !== w) cv.width = w
    if (cv.height !== h) cv.height = h
    const g = cv.getContext('2d')
    if (!g) return
    g.fillStyle = COLORS.empty
    g.fillRect(0, 0, w, h)
    const top = Math.round(h * 0.68)
    const colWidth = w / COLUMNS
    const cap = this.size / COLUMNS // the bytes of a full column
    for (let i = 0; i < COLUMNS; i++) {
      const n = this.novel[i]
      const d = this.dup[i]
      if (n + d <= 0) continue
      const x = i * colWidth
      const fill = Math.min(1, (n + d) / cap)
      // Upper band: novel from the top, duplicate below it, scaled by how much of the column is done.
      const hn = (top * fill * n) / (n + d)
      g.fillStyle = COLORS.novel
      g.fillRect(x, 0, colWidth + 0.5, hn)
      g.fillStyle = COLORS.dup
      g.fillRect(x, hn, colWidth + 0.5, top * fill - hn)
      const hh = this.hinted[i]
      const r = this.rolled[i]
      const lower = h - top - 1
      const wh = (lower * hh) / (hh + r)
      g.fillStyle = COLORS.hint
      g.fillRect(x, top + 1, colWidth + 0.5, wh)
      g.fillStyle = COLORS.roll
      g.fillRect(x, top + 1 + wh, colWidth + 0.5, lower - wh)
    }
  }
}
