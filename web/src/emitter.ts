// The emitter: chunks in file order, in batches, fingerprinted by hash jobs in the pool; and the
// iterable `chunk()` returns over them.
import type { HashRes } from '../../common/protocol.js'
import { isDeno, isNode } from '../../common/wasm.js'
import { hexDigests } from './hex.js'
import type { Resolved } from './options.js'
import type { Pool } from './pool.js'
import type { RapidResult } from './rapid.js'

/** What `chunk()` returns: the chunks, and with `rapid` its result once the input is done (statistics so far before). */
export interface ChunkIterable extends AsyncIterable<Chunk> {
  readonly rapid?: RapidResult
  /**
   * The same chunks in arrays, in order, as they are decided: one await per batch instead of
   * per chunk. Iterate either this or the chunks, once.
   */
  batches(): AsyncIterable<Chunk[]>
}

/** A ChunkIterable over a generator of batches (the empty ones skipped here, once for all). */
export function iterable(gen: AsyncGenerator<Chunk[]>, rapid?: () => RapidResult | undefined): ChunkIterable {
  let used = false
  const once = () => {
    if (used) throw new Error('cutpoint: a chunk() result can be iterated once')
    used = true
  }
  const it: ChunkIterable = {
    get rapid() {
      return rapid?.()
    },
    batches() {
      once()
      return (async function* () {
        for await (const b of gen) if (b.length) yield b
      })()
    },
    [Symbol.asyncIterator]() {
      once()
      let buf: Chunk[] = []
      let i = 0
      const flat: AsyncIterableIterator<Chunk> = {
        next(): Promise<IteratorResult<Chunk>> {
          if (i < buf.length) return Promise.resolve({ value: buf[i++], done: false })
          return gen.next().then((r) => {
            if (r.done) return { value: undefined, done: true }
            buf = r.value
            i = 0
            return flat.next()
          })
        },
        async return(v?: any): Promise<IteratorResult<Chunk>> {
          buf = []
          await gen.return(undefined as any)
          return { value: v, done: true }
        },
        [Symbol.asyncIterator]() {
          return flat
        },
      }
      return flat
    },
  }
  return it
}

export interface Chunk {
  offset: number
  length: number
  /** Lower-case hex digest; absent with `hash: 'none'`. */
  hash?: string
  /** With `rapid.hinted`: whether its end came from a hint (else the boundary rule). */
  hinted?: boolean
  /**
   * With `trial` (push()'s option): this chunk compressed at the trial's level, as a compression
   * job answers for one chunk (a u32 LE stored length, bit 31: compressed, then the frame's data).
   */
  trial?: Uint8Array
}

/** A macrotask: lets the event loop run (rendering, input) between batches of chunks. */
let port: MessagePort | undefined
const waiting: (() => void)[] = []
function macrotask(): Promise<void> {
  const g = globalThis as any
  if (isNode && typeof g.setImmediate === 'function') return new Promise((r) => g.setImmediate(r))
  if (isDeno || typeof MessageChannel === 'undefined') return new Promise((r) => setTimeout(r, 0))
  if (!port) {
    const ch = new MessageChannel()
    ch.port1.onmessage = () => waiting.shift()?.()
    port = ch.port2
  }
  return new Promise((r) => {
    waiting.push(r)
    port!.postMessage(0)
  })
}

/**
 * Yields to the event loop when the coordinator (and the consumer's loop body, which runs
 * between our resumptions) has held the thread for more than ~8 ms: results that arrived
 * together would otherwise be processed in one long task and stall the page.
 */
export class Breather {
  private last = performance.now()
  async maybe() {
    if (performance.now() - this.last > 8) {
      await macrotask()
      this.last = performance.now()
    }
  }
}

/** Chunks decided but not yet fingerprinted, batched into hash jobs; emitted in order. */
export class Emitter {
  private lastCut = 0
  private batchStart = 0
  private lens: number[] = []
  private batchBytes = 0
  private queue: { start: number; lens: number[]; idx?: Uint32Array; p: Promise<HashRes>; done: boolean }[] = []
  /** Chunks sent to hash jobs so far (their indices in the input: `trial`'s positions). */
  private count = 0
  private plain: Chunk[] = []
  private breather = new Breather()

  constructor(
    private pool: Pool,
    private r: Resolved,
    private bytesFor: (start: number, end: number) => Uint8Array | undefined,
  ) {}

  /** Earliest byte offset a future hash job needs. */
  get needFrom(): number {
    return this.lens.length ? this.batchStart : this.lastCut
  }

  /** Adds cuts; with `auto`, flushes a batch whenever it reaches the batch size. */
  add(cuts: Float64Array, auto = true) {
    for (const c of cuts) {
      const len = c - this.lastCut
      if (this.r.hash === 'none') {
        this.plain.push({ offset: this.lastCut, length: len })
      } else {
        if (!this.lens.length) this.batchStart = this.lastCut
        this.lens.push(len)
        this.batchBytes += len
        if (auto && this.batchBytes >= this.r.hashBatch) this.flush()
      }
      this.lastCut = c
    }
  }

  /**
   * Sends the batch as a hash job; with `at`, to that worker, which retained the slice `slice`
   * (its stage-1 bytes) and reads only what lies before it: each byte is read once.
   */
  flush(at?: number, slice?: number) {
    if (!this.lens.length) {
      if (at !== undefined && slice !== undefined && this.r.hash !== 'none') {
        this.pool.runAt({ type: 'cutpoint:release', slice }, [], at).catch(() => {})
      }
      return
    }
    const start = this.batchStart
    const lens = this.lens
    const lengths = Uint32Array.from(lens)
    const bytes = at === undefined ? this.bytesFor(start, start + this.batchBytes) : undefined
    const transfer = [lengths.buffer as ArrayBuffer]
    if (bytes) transfer.push(bytes.buffer as ArrayBuffer)
    const idx = this.trialIdx(lens.length)
    const trial = idx && { level: this.r.trial!.level, idx }
    const p = this.pool.runAt<HashRes>({ type: 'cutpoint:hash', start, lengths, bytes, slice, ...(trial ? { trial } : {}) }, transfer, at).then((r) => r.res)
    const item = { start, lens, idx, p, done: false }
    item.p.then(
      () => (item.done = true),
      () => (item.done = true),
    )
    this.queue.push(item)
    this.lens = []
    this.batchBytes = 0
  }

  /**
   * The next `n` chunks' indices (within their job) that `trial` picks: the first `first` of
   * every `every` chunks of the input; undefined when none (or no trial).
   */
  private trialIdx(n: number): Uint32Array | undefined {
    const t = this.r.trial
    const from = this.count
    this.count += n
    if (!t || this.r.hash === 'none') return undefined
    const idx: number[] = []
    for (let i = 0; i < n; i++) if ((from + i) % t.every < t.first) idx.push(i)
    return idx.length ? Uint32Array.from(idx) : undefined
  }

  /** Chunks ready in order; waits for the oldest hash job while more than `maxPending` are out. */
  async take(maxPending: number): Promise<Chunk[]> {
    await this.breather.maybe()
    const out = this.plain
    this.plain = []
    while (this.queue.length && (this.queue[0].done || this.queue.length > maxPending)) {
      const item = this.queue.shift()!
      const res = await item.p
      const hashes = hexDigests(res.digests, item.lens.length)
      const trials = item.idx && res.trial ? splitTrial(res.trial, item.idx.length) : undefined
      let off = item.start
      let k = 0
      item.lens.forEach((len, i) => {
        const c: Chunk = { offset: off, length: len, hash: hashes[i] }
        if (trials && item.idx![k] === i) c.trial = trials[k++]
        out.push(c)
        off += len
      })
    }
    return out
  }
}

/**
 * The frames of a compression answer for chunks of raw lengths `lens` (per chunk a u32 LE stored
 * length, bit 31: compressed, else the raw length; then the compressed frames' data, in order):
 * each chunk's compressed data (a view into `out`), or `compressed: false`; undefined for an
 * answer that does not fit those chunks.
 */
export function readFrames(out: Uint8Array, lens: ArrayLike<number>): ({ data: Uint8Array; compressed: true } | { data?: undefined; compressed: false })[] | undefined {
  const n = lens.length
  if (out.length < 4 * n) return undefined
  const view = new DataView(out.buffer, out.byteOffset, out.byteLength)
  const frames: ({ data: Uint8Array; compressed: true } | { data?: undefined; compressed: false })[] = []
  let at = 4 * n
  for (let k = 0; k < n; k++) {
    const h = view.getUint32(4 * k, true)
    const len = h & 0x7fffffff
    if (h >>> 31 && len < lens[k] && at + len <= out.length) {
      frames.push({ data: out.subarray(at, at + len), compressed: true })
      at += len
    } else if (h === lens[k]) frames.push({ compressed: false })
    else return undefined
  }
  return at === out.length ? frames : undefined
}

/**
 * A compression answer of `n` chunks (as [`readFrames`] reads it) split into one such answer per
 * chunk. A malformed answer: none.
 */
export function splitTrial(out: Uint8Array, n: number): Uint8Array[] | undefined {
  if (out.length < 4 * n) return undefined
  const view = new DataView(out.buffer, out.byteOffset, out.byteLength)
  const parts: Uint8Array[] = []
  let at = 4 * n
  for (let k = 0; k < n; k++) {
    const h = view.getUint32(4 * k, true)
    const len = h >>> 31 ? h & 0x7fffffff : 0
    if (at + len > out.length) return undefined
    const one = new Uint8Array(4 + len)
    one.set(out.subarray(4 * k, 4 * k + 4))
    one.set(out.subarray(at, at + len), 4)
    parts.push(one)
    at += len
  }
  return at === out.length ? parts : undefined
}
