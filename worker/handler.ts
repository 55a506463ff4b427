// What a worker does: loads the wasm once, reads its own slices of the source straight into
// wasm memory, runs the core's stage 1 or fingerprints, and answers with compact typed arrays;
// compresses a push's novel chunks (zstd, the core's per-chunk rule).
// Also runs in the coordinator's thread when `workers: 0` is asked for.
import { loadWasm, isDeno, type Wasm, type WasmHasher, type WasmStage1 } from '../common/wasm.js'
import type { Answer, HashRes, InitMsg, ManyMsg, ManyRes, Request, RequestHandler, SourceDesc } from '../common/protocol.js'

type Reader = (start: number, end: number, into: () => Uint8Array) => Promise<void>
/** Bytes [start, end) in a buffer of `Buffers` (given back with `give` once used). */
type Fetcher = (start: number, end: number) => Promise<Uint8Array>

/**
 * Bytes of the input that one stage-1 scan covers in wasm memory where the job's bytes are in a
 * JavaScript buffer (read from a Blob, or sent with the job): a 16 MiB span is scanned in pieces
 * of this many positions, each copied in with the window before it, so the worker's stage-1
 * buffer is this size instead of the span's (a wasm memory never shrinks). A position's
 * candidacy depends on its window only: the same candidates whatever the pieces.
 */
export const SCAN_PIECE = 4 << 20
/**
 * Bytes of chunks a hash job copies into wasm memory at once (a longer chunk alone): the
 * hasher's buffer stays this size instead of a hash job's (16 MiB and more of a Blob's span,
 * where the buffer's growth by doubling left 32 MiB, plus the 16 it replaced, in each worker's
 * wasm memory).
 */
export const HASH_PIECE = 1 << 20
/** Slices kept for hash jobs beyond which a worker reads no job's bytes ahead (`prefetch`). */
const MAX_KEPT = 2
/** The largest slice a worker sizes every read buffer to (`Buffers.min`; larger spans: each read's own size). */
const MAX_BUFFER_MIN = 64 << 20

/**
 * Read buffers used again and again: a Blob slice is read into one (a BYOB read of its stream)
 * instead of into a fresh ArrayBuffer per slice, whose pages the system had to map and zero
 * each time (`Blob.arrayBuffer()`). A worker holds a few at once: the slice being scanned, the
 * one read ahead, those kept for their hash jobs. At most `KEEP` idle ones are kept.
 */
export class Buffers {
  private free: ArrayBuffer[] = []
  private idle?: ReturnType<typeof setTimeout>
  static readonly KEEP = 4
  /** Idle buffers are let go after this long without a read (a kept pool between calls). */
  static readonly IDLE_MS = 2000
  /** Buffers made (for tests and measurements). */
  made = 0
  /**
   * The least size of a buffer made: a worker that reads a Blob sets it to its largest slice, so
   * that every buffer fits every slice (the first slice, without the lead of the others, made a
   * buffer 64 KiB short that no later read could use, and that stayed idle: 16 MiB of a worker's
   * memory). Pages never written cost no memory.
   */
  min = 0

  /** A buffer of at least `len` bytes (an idle one, or a new one). */
  take(len: number): ArrayBuffer {
    this.touch()
    let best = -1
    for (let i = 0; i < this.free.length; i++) if (this.free[i].byteLength >= len && (best < 0 || this.free[i].byteLength < this.free[best].byteLength)) best = i
    if (best >= 0) return this.free.splice(best, 1)[0]
    this.made++
    return new ArrayBuffer(Math.max(len, this.min))
  }

  /** Gives back the buffer under `bytes` (it must no longer be used). */
  give(bytes: Uint8Array | undefined): void {
    const b = bytes?.buffer as ArrayBuffer | undefined
    if (!b || b.byteLength === 0 || (typeof SharedArrayBuffer !== 'undefined' && b instanceof SharedArrayBuffer) || this.free.includes(b)) return
    if (this.free.length >= Buffers.KEEP) this.free.splice(this.free.reduce((m, x, i) => (x.byteLength < this.free[m].byteLength ? i : m), 0), 1)
    this.free.push(b)
    this.touch()
  }

  /** (Re)starts the idle timer: a call's last buffers given back are let go this long after. */
  private touch(): void {
    clearTimeout(this.idle)
    this.idle = setTimeout(() => this.clear(), Buffers.IDLE_MS)
    // Not a reason to keep a process running (Node; Deno, where `workers: 0` runs this in its thread).
    if (isDeno) (globalThis as any).Deno.unrefTimer?.(this.idle)
    else (this.idle as any)?.unref?.()
  }

  clear(): void {
    clearTimeout(this.idle)
    this.free.length = 0
  }
}

/**
 * A compression job's chunks read from a Blob (`offsets[i]`, `lengths[i]`), one after another:
 * consecutive chunks in one read (a push's novel chunks mostly are).
 */
export async function readChunks(blob: Blob, offsets: Float64Array, lengths: Uint32Array): Promise<Uint8Array> {
  let total = 0
  for (const l of lengths) total += l
  const ends: number[] = []
  for (let i = 0; i < lengths.length; i++) if (i + 1 === lengths.length || offsets[i] + lengths[i] !== offsets[i + 1]) ends.push(i)
  const out = ends.length === 1 ? undefined : new Uint8Array(total)
  let at = 0
  let i = 0
  for (const j of ends) {
    const a = offsets[i]
    const b = offsets[j] + lengths[j]
    const cannot = (why: string) => new Error(`cannot read bytes ${a}..${b} of the file (was it changed or removed?): ${why}`)
    let got: Uint8Array
    try {
      got = new Uint8Array(await blob.slice(a, b).arrayBuffer())
    } catch (e: any) {
      throw cannot(e?.message ?? String(e))
    }
    if (got.length !== b - a) throw cannot(`got ${got.length} bytes`)
    if (!out) return got
    out.set(got, at)
    at += got.length
    i = j + 1
  }
  return out ?? new Uint8Array(0)
}

/** Chunks `idx` (ascending indices into `lengths`) of a job's `bytes`, copied end to end. */
export function pick(bytes: Uint8Array, lengths: Uint32Array, idx: Uint32Array): { bytes: Uint8Array; lengths: Uint32Array } {
  const starts = new Float64Array(lengths.length)
  for (let i = 1; i < lengths.length; i++) starts[i] = starts[i - 1] + lengths[i - 1]
  const lens = new Uint32Array(idx.length)
  let total = 0
  idx.forEach((i, k) => {
    if (i >= lengths.length) throw new Error(`trial chunk ${i} of a job of ${lengths.length}`)
    total += lens[k] = lengths[i]
  })
  const out = new Uint8Array(total)
  let at = 0
  for (const i of idx) {
    out.set(bytes.subarray(starts[i], starts[i] + lengths[i]), at)
    at += lengths[i]
  }
  return { bytes: out, lengths: lens }
}

export class Handler implements RequestHandler {
  private wasm?: Wasm
  private profile = ''
  private st1?: WasmStage1
  /** The profile's window (bytes before a position that decide whether it is a candidate). */
  private window = 0
  /** Whether every job's bytes pass through JavaScript (a Blob source, or bytes sent with jobs): scanned in pieces. */
  private pieces = false
  private hasher?: WasmHasher
  private read?: Reader
  private fetch?: Fetcher
  /** The buffers `fetch` reads into (blob sources). */
  private buffers = new Buffers()
  /** Reads started ahead for queued jobs (see `prefetch`), by job id. */
  private ahead = new Map<number, Promise<Uint8Array>>()
  private closeSource?: () => Promise<void>
  private subtle?: SubtleCrypto
  /** Compression jobs' chunks read ahead (see `prefetch`), by job id. */
  private compressAhead = new Map<number, Promise<Uint8Array>>()
  /** Slices kept after stage 1 for their hash job: key -> bytes [start, start + length). */
  private retained = new Map<number, { start: number; bytes: Uint8Array }>()

  /**
   * Starts reading the bytes of a job that waits behind another one, so that the read (the
   * browser's blob system, the disk) overlaps the job before it. Only jobs that read the
   * source themselves; at most the pool's depth - 1 slices are held at once.
   */
  prefetch(msg: Request) {
    // A compression job's chunks (read from its Blob): while the job before it runs, so that
    // the read does not hold up the chunking jobs behind it. At most a group's sample or one
    // group (COMPRESS_GROUP chunks), which the page held before these jobs read for themselves.
    if (msg.type === 'cutpoint:compress' && msg.blob && !this.compressAhead.has(msg.id)) {
      const p = readChunks(msg.blob, msg.offsets!, msg.lengths)
      p.catch(() => {})
      this.compressAhead.set(msg.id, p)
      return
    }
    // Not while this worker keeps MAX_KEPT slices for their hash jobs: it is ahead of the
    // coordinator, and a slice read ahead now would be one more span of memory held.
    if (!this.fetch || this.ahead.has(msg.id) || this.retained.size >= MAX_KEPT) return
    let range: [number, number] | undefined
    if (msg.type === 'cutpoint:stage1' && !msg.bytes) range = [msg.start, msg.b]
    if (msg.type === 'cutpoint:hash' && !msg.bytes && msg.slice === undefined) {
      let total = 0
      for (const l of msg.lengths) total += l
      range = [msg.start, msg.start + total]
    }
    if (!range || range[1] <= range[0]) return
    const p = this.fetch(range[0], range[1])
    p.catch(() => {})
    this.ahead.set(msg.id, p)
  }

  /** The prefetched bytes of job `id`, if any (checked against the expected length). */
  private async early(id: number, len: number): Promise<Uint8Array | undefined> {
    const p = this.ahead.get(id)
    if (!p) return undefined
    this.ahead.delete(id)
    const bytes = await p
    if (bytes.length !== len) throw new Error(`read ${bytes.length} bytes ahead, expected ${len}`)
    return bytes
  }

  async handle(msg: Request): Promise<Answer> {
    switch (msg.type) {
      case 'cutpoint:init':
        return this.init(msg)
      case 'cutpoint:stage1': {
        const st1 = this.need(this.st1)
        const len = msg.b - msg.start
        // A slice kept for its hash job is the buffer it was read into (read ahead or now), not
        // a copy out of wasm memory: a copy of each segment fewer, and fewer fresh pages.
        let read = await this.early(msg.id, len)
        if (!read && !msg.bytes && (msg.retain !== undefined || this.pieces) && this.fetch) read = await this.fetch(msg.start, msg.b)
        const bytes = msg.bytes ?? read
        let strict: Uint32Array
        let loose: Uint32Array
        if (bytes && this.pieces) {
          if (bytes.length !== len) throw new Error(`job carries ${bytes.length} bytes, expected ${len}`)
          ;({ strict, loose } = this.scanPieces(bytes, msg.a - msg.start, msg.lane))
          if (msg.retain !== undefined) this.retained.set(msg.retain, { start: msg.start, bytes: read ?? bytes.slice() })
          else this.buffers.give(read)
        } else {
          if (len > st1.capacity) throw new Error(`slice of ${len} bytes exceeds the worker buffer (${st1.capacity})`)
          await this.fill(msg.start, msg.b, bytes, () => this.wasm!.view(st1.inputPtr(), len))
          if (msg.retain !== undefined) this.retained.set(msg.retain, { start: msg.start, bytes: read ?? this.wasm!.view(st1.inputPtr(), len).slice() })
          else this.buffers.give(read)
          st1.scan(len, msg.a - msg.start, msg.b - msg.start, msg.lane)
          strict = st1.strictOffsets()
          loose = st1.looseOffsets()
        }
        return { res: { type: 'cutpoint:stage1', id: msg.id, strict, loose }, transfer: [strict.buffer as ArrayBuffer, loose.buffer as ArrayBuffer] }
      }
      case 'cutpoint:hash': {
        let total = 0
        for (const l of msg.lengths) total += l
        // Bytes of this worker's buffers (a kept slice, or read ahead): given back once hashed.
        let own: Uint8Array | undefined
        if (msg.slice !== undefined && !msg.bytes) {
          own = await this.fromRetained(msg.slice, msg.start, msg.start + total)
          msg = { ...msg, bytes: own }
        } else if (!msg.bytes) {
          own = await this.early(msg.id, total)
          // A Blob's bytes come through a buffer of this worker anyway: hashed piece by piece.
          if (!own && !this.subtle && this.fetch) own = await this.fetch(msg.start, msg.start + total)
          if (own) msg = { ...msg, bytes: own }
        }
        try {
          if (this.subtle) return await this.webcrypto(this.subtle, msg.id, msg.start, total, msg.lengths, msg.bytes)
          if (msg.bytes) {
            if (msg.bytes.length !== total) throw new Error(`job carries ${msg.bytes.length} bytes, expected ${total}`)
            const digests = this.hashPieces(msg.bytes, msg.lengths)
            return this.hashed(msg.id, digests, msg.trial && this.trial(msg.bytes, msg.lengths, msg.trial))
          }
          const h = this.need(this.hasher)
          h.reserve(total)
          await this.fill(msg.start, msg.start + total, msg.bytes, () => this.wasm!.view(h.inputPtr(), total))
          // The trial chunks copied out of wasm memory before it is used again.
          const picked = msg.trial && pick(this.wasm!.view(h.inputPtr(), total), msg.lengths, msg.trial.idx)
          const digests = h.digests(msg.lengths)
          return this.hashed(msg.id, digests, picked && this.need(this.wasm).mod.compressGroup(picked.bytes, picked.lengths, msg.trial!.level))
        } finally {
          this.buffers.give(own)
        }
      }
      case 'cutpoint:many':
        return this.many(msg)
      case 'cutpoint:release':
        this.buffers.give(this.retained.get(msg.slice)?.bytes)
        this.retained.delete(msg.slice)
        return { res: { type: 'cutpoint:release', id: msg.id }, transfer: [] }
      case 'cutpoint:compress': {
        const mod = this.need(this.wasm).mod
        if (!msg.bytes) {
          let bytes: Uint8Array
          const ahead = this.compressAhead.get(msg.id)
          this.compressAhead.delete(msg.id)
          try {
            bytes = await (ahead ?? readChunks(msg.blob!, msg.offsets!, msg.lengths))
          } catch (e: any) {
            return { res: { type: 'cutpoint:compress', id: msg.id, out: new Uint8Array(0), error: String(e?.message ?? e) }, transfer: [] }
          }
          const out = mod.compressGroup(bytes, msg.lengths, msg.level)
          return { res: { type: 'cutpoint:compress', id: msg.id, out }, transfer: [out.buffer as ArrayBuffer] }
        }
        const out = mod.compressGroup(msg.bytes, msg.lengths, msg.level)
        const back = msg.bytes.buffer !== out.buffer ? [msg.bytes.buffer as ArrayBuffer] : []
        return { res: { type: 'cutpoint:compress', id: msg.id, out, bytes: msg.bytes }, transfer: [out.buffer as ArrayBuffer, ...back] }
      }
      case 'cutpoint:crash':
        setTimeout(() => {
          throw new Error('cutpoint: test crash')
        })
        return new Promise(() => {})
      default:
        throw new Error(`unknown message ${(msg as { type?: unknown } | undefined)?.type}`)
    }
  }

  /** A hash job's answer, with its trial chunks' compression where it was asked. */
  private hashed(id: number, digests: Uint8Array, trial?: Uint8Array): Answer {
    const transfer = [digests.buffer as ArrayBuffer]
    if (trial) transfer.push(trial.buffer as ArrayBuffer)
    return { res: { type: 'cutpoint:hash', id, digests, ...(trial ? { trial } : {}) }, transfer }
  }

  /**
   * A hash job's trial chunks (of `bytes`, the job's) compressed as one compression job of them
   * would answer: each run of consecutive ones straight from `bytes` (no copy of them here),
   * the answers joined.
   */
  private trial(bytes: Uint8Array, lengths: Uint32Array, t: { level: number; idx: Uint32Array }): Uint8Array {
    const mod = this.need(this.wasm).mod
    const starts = new Float64Array(lengths.length + 1)
    for (let i = 0; i < lengths.length; i++) starts[i + 1] = starts[i] + lengths[i]
    const outs: { n: number; out: Uint8Array }[] = []
    for (let k = 0; k < t.idx.length; ) {
      let e = k + 1
      while (e < t.idx.length && t.idx[e] === t.idx[e - 1] + 1) e++
      const a = t.idx[k]
      const b = t.idx[e - 1] + 1
      if (b > lengths.length) throw new Error(`trial chunk ${b - 1} of a job of ${lengths.length}`)
      outs.push({ n: e - k, out: mod.compressGroup(bytes.subarray(starts[a], starts[b]), lengths.subarray(a, b), t.level) })
      k = e
    }
    if (outs.length === 1) return outs[0].out
    const joined = new Uint8Array(outs.reduce((s, o) => s + o.out.length, 0))
    let head = 0
    let at = 4 * t.idx.length
    for (const { n, out } of outs) {
      joined.set(out.subarray(0, 4 * n), head)
      joined.set(out.subarray(4 * n), at)
      head += 4 * n
      at += out.length - 4 * n
    }
    return joined
  }

  async close(): Promise<void> {
    this.st1?.free()
    this.hasher?.free()
    this.st1 = this.hasher = undefined
    this.retained.clear()
    // Reads still under way finish against the open source before it closes.
    await Promise.allSettled([...this.ahead.values(), ...this.compressAhead.values()])
    this.ahead.clear()
    this.compressAhead.clear()
    this.buffers.clear()
    await this.closeSource?.()
    this.closeSource = undefined
  }

  private need<T>(x: T | undefined): T {
    if (!x) throw new Error('worker used before cutpoint:init')
    return x
  }

  /**
   * Small inputs chunked whole, one after the other: stage 1 over each (one slice), the core's
   * stage 2 on its candidates, then its chunks' fingerprints. The same cuts and digests as
   * `chunk()` of each input alone (stage 2 sees one slice instead of several; the candidates do
   * not depend on how the input is sliced).
   */
  private async many(msg: ManyMsg): Promise<Answer> {
    const res: ManyRes = { type: 'cutpoint:many', id: msg.id, sizes: [], cuts: [], digests: [], bytes: [], errors: [] }
    const transfer: ArrayBuffer[] = []
    for (const item of msg.files) {
      let bytes: Uint8Array | undefined
      let size = 0
      let error: string | undefined
      if (item instanceof Uint8Array) {
        bytes = item
        size = item.length
      } else {
        try {
          size = item.size
          if (size <= msg.max) bytes = new Uint8Array(await item.arrayBuffer())
        } catch (e: any) {
          error = String(e?.message ?? e)
        }
        if (bytes && bytes.length !== size) error = `read ${bytes.length} bytes of a ${size}-byte file (was it changed?)`
      }
      res.sizes.push(size)
      res.errors.push(error)
      if (!bytes || error) {
        res.cuts.push(undefined)
        res.digests.push(undefined)
        res.bytes.push(undefined)
        continue
      }
      const { cuts, digests } = await this.chunkWhole(msg.id, bytes)
      res.cuts.push(cuts)
      res.digests.push(digests)
      transfer.push(cuts.buffer as ArrayBuffer, digests.buffer as ArrayBuffer)
      // A Blob's bytes go back to the caller (it reads novel chunks from them).
      res.bytes.push(item instanceof Uint8Array ? undefined : bytes)
      if (!(item instanceof Uint8Array)) transfer.push(bytes.buffer as ArrayBuffer)
    }
    return { res, transfer }
  }

  /** One input chunked whole: its cuts (chunk ends) and its chunks' digests end to end. */
  private async chunkWhole(id: number, bytes: Uint8Array): Promise<{ cuts: Float64Array; digests: Uint8Array }> {
    const st1 = this.need(this.st1)
    const m = this.wasm!.mod
    const len = bytes.length
    let c = new Float64Array(0)
    if (len > 0) {
      const { strict, loose } = this.scanPieces(bytes, 0, 0)
      const st2 = new m.Stage2(this.profile)
      try {
        const a = st2.feed(0, len, strict, loose)
        const b = st2.finish(len)
        c = new Float64Array(a.length + b.length)
        c.set(a)
        c.set(b, a.length)
      } finally {
        st2.free()
      }
    }
    const lengths = new Uint32Array(c.length)
    for (let i = 0, at = 0; i < c.length; i++) {
      lengths[i] = c[i] - at
      at = c[i]
    }
    let d: Uint8Array = new Uint8Array(0)
    if (this.subtle) d = ((await this.webcrypto(this.subtle, id, 0, len, lengths, bytes)).res as HashRes).digests
    else if (this.hasher && lengths.length) d = this.hashPieces(bytes, lengths)
    return { cuts: c, digests: d }
  }

  /**
   * Stage 1 of the positions `[p, bytes.length)` of `bytes` (the job's bytes, `bytes[0]` at its
   * start), in pieces of SCAN_PIECE positions, each copied into the stage-1 buffer with the
   * window before it: the candidates' offsets from `p`, as one scan of the whole would give.
   */
  private scanPieces(bytes: Uint8Array, p: number, lane: number): { strict: Uint32Array; loose: Uint32Array } {
    const st1 = this.need(this.st1)
    const W = this.window
    const piece = Math.min(SCAN_PIECE, st1.capacity - W)
    if (piece < 1) throw new Error(`stage 1: the worker buffer (${st1.capacity}) holds no more than the window`)
    const strict: Uint32Array[] = []
    const loose: Uint32Array[] = []
    for (let a = p; a < bytes.length || a === p; a += piece) {
      const b = Math.min(a + piece, bytes.length)
      // The window before the piece: the W bytes before `a` (fewer only at the start of the file).
      const lo = Math.max(0, a - W)
      if (b - lo > st1.capacity) throw new Error(`stage 1: a piece of ${b - lo} bytes exceeds the worker buffer (${st1.capacity})`)
      this.wasm!.view(st1.inputPtr(), b - lo).set(bytes.subarray(lo, b))
      st1.scan(b - lo, a - lo, b - lo, lane)
      strict.push(shifted(st1.strictOffsets(), a - p))
      loose.push(shifted(st1.looseOffsets(), a - p))
      if (b === bytes.length) break
    }
    return { strict: joined(strict), loose: joined(loose) }
  }

  /** Digests of the chunks of these lengths in `bytes`, copied into the hasher's buffer a piece (HASH_PIECE) at a time. */
  private hashPieces(bytes: Uint8Array, lengths: Uint32Array): Uint8Array {
    const h = this.need(this.hasher)
    const out = new Uint8Array(32 * lengths.length)
    for (let i = 0, at = 0; i < lengths.length; ) {
      let j = i
      let n = 0
      while (j < lengths.length && (j === i || n + lengths[j] <= HASH_PIECE)) n += lengths[j++]
      if (n > h.capacity) h.reserve(n)
      this.wasm!.view(h.inputPtr(), n).set(bytes.subarray(at, at + n))
      out.set(h.digests(lengths.subarray(i, j)), 32 * i)
      at += n
      i = j
    }
    return out
  }

  private async init(msg: InitMsg): Promise<Answer> {
    await this.close()
    this.profile = msg.profile
    this.wasm = await loadWasm(msg.flavor, msg.module)
    const m = this.wasm.mod
    const pr = m.parseProfile(msg.profile)
    this.window = pr.window
    pr.free()
    // Bytes that pass through JavaScript are scanned in pieces: a stage-1 buffer of a piece and
    // its window. A path (Node, Deno) is read straight into the buffer: the whole slice.
    this.pieces = msg.source.kind === 'blob' || msg.source.kind === 'message'
    this.st1 = new m.Stage1(msg.profile, msg.backend, this.pieces ? Math.min(msg.capacity, SCAN_PIECE + this.window) : msg.capacity)
    if (msg.hash !== 'none') this.hasher = new m.Hasher(msg.hash, HASH_PIECE)
    // SHA-256 by WebCrypto measured faster than wasm on chunks of 8 KiB and more (bench/js).
    const subtle: SubtleCrypto | undefined = (globalThis as any).crypto?.subtle
    this.subtle = undefined
    if (msg.hash === 'sha256' && msg.hashImpl !== 'wasm') {
      if (subtle) this.subtle = subtle
      else if (msg.hashImpl === 'webcrypto') throw new Error('WebCrypto is not available here (an insecure context?); use hashImpl "wasm"')
    }
    this.buffers.min = msg.source.kind === 'blob' && msg.capacity <= MAX_BUFFER_MIN ? msg.capacity : 0
    const src = await openSource(msg.source, (c) => (this.closeSource = c), this.buffers)
    this.read = src.read
    this.fetch = src.fetch
    return {
      res: { type: 'cutpoint:ready', id: msg.id, buildId: m.buildId(), backend: this.st1.backend },
      transfer: [],
    }
  }

  /** Bytes [s, e) from a retained slice (which ends at or after e), reading any part before it. */
  private async fromRetained(key: number, s: number, e: number): Promise<Uint8Array> {
    const r = this.retained.get(key)
    this.retained.delete(key)
    if (!r || e > r.start + r.bytes.length) throw new Error(`retained slice ${key} does not cover ${s}..${e}`)
    if (s >= r.start) return r.bytes.subarray(s - r.start, e - r.start)
    const out = new Uint8Array(e - s)
    await this.need(this.read)(s, r.start, () => out.subarray(0, r.start - s))
    out.set(r.bytes.subarray(0, e - r.start), r.start - s)
    this.buffers.give(r.bytes)
    return out
  }

  private async webcrypto(subtle: SubtleCrypto, id: number, start: number, total: number, lengths: Uint32Array, bytes?: Uint8Array): Promise<Answer> {
    let buf = bytes
    if (!buf) {
      const tmp = new Uint8Array(total)
      await this.need(this.read)(start, start + total, () => tmp)
      buf = tmp
    }
    const parts: Promise<ArrayBuffer>[] = []
    let off = 0
    for (const l of lengths) {
      parts.push(subtle.digest('SHA-256', buf.subarray(off, off + l) as Uint8Array<ArrayBuffer>))
      off += l
    }
    const digests = new Uint8Array(32 * lengths.length)
    ;(await Promise.all(parts)).forEach((d, i) => digests.set(new Uint8Array(d), 32 * i))
    return { res: { type: 'cutpoint:hash', id, digests }, transfer: [digests.buffer] }
  }

  private async fill(start: number, end: number, bytes: Uint8Array | undefined, into: () => Uint8Array) {
    if (bytes) {
      if (bytes.length !== end - start) throw new Error(`job carries ${bytes.length} bytes, expected ${end - start}`)
      into().set(bytes)
    } else {
      await this.need(this.read)(start, end, into)
    }
  }
}

async function openSource(src: SourceDesc, onClose: (c: () => Promise<void>) => void, buffers: Buffers): Promise<{ read: Reader; fetch?: Fetcher }> {
  switch (src.kind) {
    case 'message':
      return {
        read: async () => {
          throw new Error('this source sends bytes with each job')
        },
      }
    case 'shared':
      // A copy out of shared memory: nothing to overlap.
      return { read: async (s, e, into) => into().set(src.bytes.subarray(s, e)) }
    case 'blob': {
      const fetch = async (s: number, e: number) => {
        let got: Uint8Array
        try {
          got = await readBlob(src.blob.slice(s, e), e - s, buffers)
        } catch (err: any) {
          throw new Error(`cannot read bytes ${s}..${e} of the file: ${err?.message ?? err}`)
        }
        if (got.length !== e - s) throw new Error(`short read at ${s}: the file changed while it was read`)
        return got
      }
      return {
        read: async (s, e, into) => {
          const got = await fetch(s, e)
          into().set(got)
          buffers.give(got)
        },
        fetch,
      }
    }
    case 'path': {
      // No read-ahead (no `fetch`): a read of cached pages is a copy that costs about what it
      // would overlap, and measured slower with two workers on two cores (bench/js/RESULTS.md).
      // A worker handles one job at a time, so Deno's seek + read never interleave.
      if (isDeno) {
        const D = (globalThis as any).Deno
        const f = await D.open(src.path, { read: true })
        onClose(async () => f.close())
        return {
          read: async (s, e, into) => {
            await f.seek(s, D.SeekMode.Start)
            let off = 0
            while (off < e - s) {
              const n = await f.read(into().subarray(off, e - s))
              if (n === null || n === 0) throw new Error(`${src.path}: short read at ${s + off} (file shrank?)`)
              off += n
            }
          },
        }
      }
      const fsName = 'node:fs/promises'
      const fs = await import(/* @vite-ignore */ fsName)
      const fh = await fs.open(src.path, 'r')
      onClose(async () => fh.close())
      return {
        read: async (s, e, into) => {
          let off = 0
          while (off < e - s) {
            const { bytesRead } = await fh.read(into(), off, e - s - off, s + off)
            if (bytesRead === 0) throw new Error(`${src.path}: short read at ${s + off} (file shrank?)`)
            off += bytesRead
          }
        },
      }
    }
  }
}

/** The Blob streams being read (see `readBlob`). */
const reading = new Set<object>()

/**
 * A Blob's `want` bytes, read into a buffer of `buffers` by BYOB reads of its stream (Chromium, 2
 * workers reading a 1 GiB File in 16 MiB slices: 1.0-1.1 CPU s of the renderer against 1.4 for
 * `arrayBuffer()`, Intel Xeon, 2 vCPUs), or by `arrayBuffer()` where the stream is not a byte
 * stream. Fewer bytes than `want`: the Blob was shorter (the caller says so).
 */
export async function readBlob(blob: Blob, want: number, buffers: Buffers): Promise<Uint8Array> {
  let rd: ReadableStreamBYOBReader | undefined
  let stream: ReadableStream<Uint8Array>
  try {
    stream = blob.stream()
    rd = stream.getReader({ mode: 'byob' })
  } catch {
    return new Uint8Array(await blob.arrayBuffer())
  }
  // Held while read: in Chromium 156 a Blob stream that nothing references can be collected in
  // the middle of a read, whose promise then never settles (a worker reading ahead hung after
  // 8 of 16 MiB, twice in a few 1 GiB chunk() runs; never with this reference, 55 runs).
  const held = { blob, stream, rd }
  let buf = buffers.take(want)
  let at = 0
  reading.add(held)
  try {
    while (at < want) {
      const { done, value } = await rd.read(new Uint8Array(buf, at, want - at))
      // Done without a view: the stream was cancelled, and the buffer went with it.
      if (!value) throw new Error('the stream of the file ended without its bytes')
      buf = value.buffer as ArrayBuffer
      at += value.byteLength
      if (done) break
    }
  } finally {
    reading.delete(held)
    rd.cancel().catch(() => {})
  }
  return new Uint8Array(buf, 0, at)
}

/** Offsets from a piece's start made offsets from the job's first position (`by` before it). */
function shifted(o: Uint32Array, by: number): Uint32Array {
  if (by) for (let i = 0; i < o.length; i++) o[i] += by
  return o
}

/** Arrays end to end (the one itself when alone). */
function joined(parts: Uint32Array[]): Uint32Array {
  if (parts.length === 1) return parts[0]
  const out = new Uint32Array(parts.reduce((n, x) => n + x.length, 0))
  let at = 0
  for (const x of parts) {
    out.set(x, at)
    at += x.length
  }
  return out
}
