// cutpoint for browsers, Node and Deno: SS-CDC chunking and fingerprints over a worker pool.
//
// The algorithms live once, in the Rust core compiled to WebAssembly. This file orchestrates:
// workers run stage 1 over their own slices (the bytes [a - W, b) decide the candidates of the
// positions [a, b), whatever else is cut where) and fingerprint chunks; the coordinator feeds the
// slices' candidates to the core's stage 2 in file order and emits chunks in file order
// (P-Dedupe's ordered parallel fingerprinting). The main thread never holds a whole Blob/file.

import { Handler } from '../../worker/handler.js'
import { Pool, type InThread } from './pool.js'
import { hex, hexDigests } from './hex.js'
import { stage1Job, type HashRes, type SourceDesc, type Stage1Res } from '../../common/protocol.js'
import { HintTable, RapidSession, newTable, type RapidOptions, type RapidResult } from './rapid.js'
import { isDeno, isNode, loadWasm, resolveFlavor, simdSupported, type Flavor, type Wasm, type WasmStage2 } from '../../common/wasm.js'
import { optBool, optInt, optOneOf, options, optString, shown } from './check.js'

export { simdSupported, type Flavor }
export { HintTable, CRITERIA, nativeBlockSize } from './rapid.js'
export type { Criterion, RapidOptions, RapidResult, RapidStats, RecipeSource, CacheSpec, TableOptions } from './rapid.js'

export type HashName = 'blake3' | 'sha256' | 'none'

export interface ChunkOptions {
  /** Chunking profile, e.g. `gear:2k:8k:64k` (the default), `crc32:2k:16k:64k`. */
  profile?: string
  /** Workers; default `navigator.hardwareConcurrency` / `os.availableParallelism()`. 0: no workers, this thread. */
  workers?: number
  /**
   * Bytes of positions each stage-1 job covers (default 4 MiB; at least 64 KiB: a smaller value is
   * raised to 64 KiB, as each job costs a round trip of about 0.1 ms). Any size gives the same chunks.
   */
  segmentSize?: number
  /** Kernel segment size inside a job (default 0: the kernel splits the job over its lanes). */
  laneSegment?: number
  /** Fingerprint (default blake3). */
  hash?: HashName
  /** SHA-256 implementation: 'auto' (WebCrypto where available, measured faster; else wasm), 'wasm', 'webcrypto'. BLAKE3 is always the core's wasm. */
  hashImpl?: 'auto' | 'wasm' | 'webcrypto'
  /** Stage-1 kernel: 'simd128', 'interleaved', 'scalar' (default: the fastest in the build). */
  backend?: string
  /** Which wasm build the workers load (default: the one `init()` chose). */
  wasm?: Flavor | 'auto'
  /** Bytes of chunks per fingerprint job (default 4 MiB). */
  hashBatch?: number
  /**
   * Blob/File/path inputs: the worker that ran stage 1 over a slice keeps its bytes and
   * fingerprints the chunks that end in it, so each byte is read once. Default: on for
   * Blob/File (reads through the browser's blob system are dear: +40% with one worker in
   * Chromium), off for paths and SharedArrayBuffers (page-cache reads are cheap; measured
   * slower with the extra copy). See bench/js/RESULTS.md.
   */
  readOnce?: boolean
  /**
   * RapidCDC: after a chunk whose fingerprint has hints, jump to the hinted next boundary and
   * verify it by `criterion`; hints from `base` (a recipe), `cache` (IndexedDB / a file), `table`
   * (earlier calls). Runs the core's RapidCDC in this thread's wasm instance; with workers, stage 1
   * of large fallback blocks runs in the worker pool (same chunks). See web/README.md.
   */
  rapid?: RapidOptions
  /**
   * Workers kept across calls (`createPool`): no start-up per call. Gives `workers` and the
   * wasm build; one call at a time per pool.
   */
  pool?: WorkerPool
}

/** Workers that stay up across `chunk()` / `createChunker()` calls (see `createPool`). */
export interface WorkerPool {
  readonly workers: number
  readonly flavor: Flavor
  /** Stops the workers. Calls still running fail. */
  close(): void
}

const pools = new WeakMap<WorkerPool, Pool>()

/** What `workers: 0` runs in this thread. */
const inThread: InThread = () => new Handler()

/**
 * Starts workers once for many calls (`chunk(x, { pool })`): each call otherwise starts its own
 * (tens of milliseconds: threads, wasm instances). Idle, the pool does not keep Node running
 * (Deno keeps running while it is open); `close()` it when done.
 */
export async function createPool(opts: { workers?: number; wasm?: Flavor | 'auto' } = {}): Promise<WorkerPool> {
  const w = need()
  opts = options('createPool options', opts)
  const workers = optInt('workers', opts.workers, 0, 256) ?? (await defaultWorkers())
  const flavor = opts.wasm !== undefined ? resolveFlavor(optWasm(opts.wasm)) : w.flavor
  const pool = await Pool.keep(workers, inThread)
  const handle: WorkerPool = { workers, flavor, close: () => pool.terminate() }
  pools.set(handle, pool)
  return handle
}

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
function iterable(gen: AsyncGenerator<Chunk[]>, rapid?: () => RapidResult | undefined): ChunkIterable {
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
}

export interface InitInfo {
  buildId: string
  flavor: Flavor
  backends: string[]
  defaultBackend: string
}

let wasm: Wasm | undefined

/** Loads the WebAssembly module (simd128 if the engine has it, else plain; or as forced). Call once before anything else. */
export async function init(opts: { wasm?: Flavor | 'auto' } = {}): Promise<InitInfo> {
  opts = options('init options', opts)
  const flavor = resolveFlavor(optWasm(opts.wasm))
  if (!wasm || wasm.flavor !== flavor) wasm = await loadWasm(flavor)
  return info()
}

/** What `init()` loaded. */
export function info(): InitInfo {
  const w = need()
  return { buildId: w.mod.buildId(), flavor: w.flavor, backends: w.mod.backends(), defaultBackend: w.mod.defaultBackend() }
}

function need(): Wasm {
  if (!wasm) throw new Error('cutpoint: call `await init()` before using the library')
  return wasm
}

/** The canonical form of a profile string; throws a clear error for a bad one. */
export function parseProfile(profile: string): { canonical: string; window: number; min: number; avg: number; max: number; twoClasses: boolean } {
  const w = need()
  if (typeof profile !== 'string') throw new TypeError(`cutpoint: profile must be a string like 'gear:2k:8k:64k' (got ${shown(profile)})`)
  let p: ReturnType<Wasm['mod']['parseProfile']>
  try {
    p = w.mod.parseProfile(profile)
  } catch (e: any) {
    throw new Error(`cutpoint: ${e?.message ?? e}`)
  }
  try {
    return { canonical: p.canonical, window: p.window, min: p.min, avg: p.avg, max: p.max, twoClasses: p.twoClasses }
  } finally {
    p.free()
  }
}

/** One digest (hex) computed by the core's wasm BLAKE3 / SHA-256, in this thread. */
export function digest(alg: 'blake3' | 'sha256', bytes: Uint8Array): string {
  const w = need()
  if (optOneOf('digest algorithm', alg, ['blake3', 'sha256']) === undefined) throw new TypeError(`cutpoint: digest needs an algorithm, 'blake3' or 'sha256'`)
  if (!(bytes instanceof Uint8Array)) throw new TypeError(`cutpoint: digest bytes must be a Uint8Array (got ${shown(bytes)})`)
  return hex(w.mod.digest(alg, bytes))
}

/**
 * A hint table for RapidCDC (the core's), to pass as `rapid.table` to several calls so that
 * each input gets hints from the ones before it. Free it with `free()`.
 */
export function createHintTable(opts: { profile?: string; hash?: 'blake3' | 'sha256'; hintList?: number; maxEntries?: number } = {}): HintTable {
  const w = need()
  opts = options('createHintTable options', opts)
  const profile = optString('profile', opts.profile, "'gear:2k:8k:64k'") ?? DEFAULT_PROFILE
  const hash = optOneOf('hash', opts.hash, ['blake3', 'sha256']) ?? 'blake3'
  const maxEntries = optInt('maxEntries', opts.maxEntries, 0, 2 ** 32 - 1) ?? 0
  return newTable(w.mod, { profile: parseProfile(profile).canonical, hash, hintList: opts.hintList, maxEntries })
}

/** The core's sequential reference chunker (tests). */
export function referenceCuts(profile: string, bytes: Uint8Array): number[] {
  const w = need()
  if (!(bytes instanceof Uint8Array)) throw new TypeError(`cutpoint: referenceCuts bytes must be a Uint8Array (got ${shown(bytes)})`)
  return Array.from(w.mod.referenceCuts(parseProfile(profile).canonical, bytes))
}

const DEFAULT_PROFILE = 'gear:2k:8k:64k'
const MiB = 1 << 20

/**
 * Smallest stage-1 job (`segmentSize`): each job costs a round trip (a message to a worker, the
 * candidates back, stage 2 fed) of about 0.1 ms, so 1-byte jobs ran 5.3 s on 200 KB. Measured on
 * 8 MiB (2 vCPUs): 1 KiB jobs 14-29× the 4 MiB time, 4 KiB 4-6×, 16 KiB 2.4-2.9×, 64 KiB within
 * 1.3× (noise). Smaller values are raised to it.
 */
export const MIN_SEGMENT_SIZE = 64 << 10
let minSegment = MIN_SEGMENT_SIZE

function optWasm(v: unknown): Flavor | 'auto' | undefined {
  return optOneOf('wasm', v, ['simd128', 'plain', 'auto'] as const)
}

async function defaultWorkers(): Promise<number> {
  const g = globalThis as any
  if (isNode) {
    const osName = 'node:os'
    const os = await import(/* @vite-ignore */ osName)
    return os.availableParallelism?.() ?? os.cpus().length
  }
  return g.navigator?.hardwareConcurrency || 1
}

interface Resolved {
  profile: ReturnType<typeof parseProfile>
  workers: number
  segment: number
  lane: number
  hash: HashName
  hashImpl: 'auto' | 'wasm' | 'webcrypto'
  backend: string
  flavor: Flavor
  hashBatch: number
  /** A kept pool (`opts.pool`). */
  pool?: Pool
}

/**
 * Every option checked (types first: nothing that is not a string reaches the wasm module as
 * one) before any input is read or any worker started.
 */
function checkChunkOptions(opts: unknown): ChunkOptions {
  const o = options<ChunkOptions>('options', opts)
  optString('profile', o.profile, "'gear:2k:8k:64k'")
  optInt('workers', o.workers, 0, 256)
  optInt('segmentSize', o.segmentSize, 1, 1 << 30, '1..1 GiB')
  optInt('laneSegment', o.laneSegment, 0, 1 << 30, '0..1 GiB')
  optOneOf('hash', o.hash, ['blake3', 'sha256', 'none'])
  optOneOf('hashImpl', o.hashImpl, ['auto', 'wasm', 'webcrypto'])
  optString('backend', o.backend, "'simd128'")
  optWasm(o.wasm)
  optInt('hashBatch', o.hashBatch, 1, 2 ** 32, '1..4 GiB')
  optBool('readOnce', o.readOnce)
  if (o.pool !== undefined && !pools.has(o.pool)) throw new TypeError(`cutpoint: pool must come from createPool() (got ${shown(o.pool)})`)
  if (o.rapid !== undefined && (o.rapid === null || typeof o.rapid !== 'object' || Array.isArray(o.rapid))) {
    throw new TypeError(`cutpoint: rapid must be an object like { criterion: 'ff+rwt' } (got ${shown(o.rapid)})`)
  }
  return o
}

async function resolve(opts: ChunkOptions): Promise<Resolved> {
  const w = need()
  opts = checkChunkOptions(opts)
  const profile = parseProfile(opts.profile ?? DEFAULT_PROFILE)
  const hash = opts.hash ?? 'blake3'
  if (opts.pool && opts.workers !== undefined && opts.workers !== opts.pool.workers) throw new Error(`cutpoint: workers (${opts.workers}) differs from the pool's (${opts.pool.workers})`)
  if (opts.pool && opts.wasm && resolveFlavor(opts.wasm) !== opts.pool.flavor) throw new Error(`cutpoint: wasm '${opts.wasm}' differs from the pool's build (${opts.pool.flavor})`)
  const workers = opts.pool?.workers ?? opts.workers ?? (await defaultWorkers())
  const segment = Math.max(opts.segmentSize ?? 4 * MiB, minSegment)
  const lane = opts.laneSegment ?? 0
  const flavor = opts.pool?.flavor ?? (opts.wasm ? resolveFlavor(opts.wasm) : w.flavor)
  const backend = opts.backend ?? ''
  if (backend && flavor === w.flavor && !w.mod.backends().includes(backend)) {
    throw new Error(`cutpoint: backend '${backend}' is not in the ${flavor} build (available: ${w.mod.backends().join(', ')})`)
  }
  const hashBatch = opts.hashBatch ?? 4 * MiB
  const hashImpl = opts.hashImpl ?? 'auto'
  return { profile, workers, segment, lane, hash, hashImpl, backend, flavor, hashBatch, pool: opts.pool && pools.get(opts.pool) }
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
class Breather {
  private last = performance.now()
  async maybe() {
    if (performance.now() - this.last > 8) {
      await macrotask()
      this.last = performance.now()
    }
  }
}

/** Chunks decided but not yet fingerprinted, batched into hash jobs; emitted in order. */
class Emitter {
  private lastCut = 0
  private batchStart = 0
  private lens: number[] = []
  private batchBytes = 0
  private queue: { start: number; lens: number[]; p: Promise<HashRes>; done: boolean }[] = []
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
    const p = this.pool.runAt<HashRes>({ type: 'cutpoint:hash', start, lengths, bytes, slice }, transfer, at).then((r) => r.res)
    const item = { start, lens, p, done: false }
    item.p.then(
      () => (item.done = true),
      () => (item.done = true),
    )
    this.queue.push(item)
    this.lens = []
    this.batchBytes = 0
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
      let off = item.start
      item.lens.forEach((len, i) => {
        out.push({ offset: off, length: len, hash: hashes[i] })
        off += len
      })
    }
    return out
  }
}

function sourceOf(input: Uint8Array | Blob | string): { desc: SourceDesc; size: () => Promise<number>; bytesFor?: (s: number, e: number) => Uint8Array } {
  if (input instanceof Uint8Array) {
    if (typeof SharedArrayBuffer !== 'undefined' && input.buffer instanceof SharedArrayBuffer) {
      return { desc: { kind: 'shared', bytes: input }, size: async () => input.length }
    }
    return { desc: { kind: 'message' }, size: async () => input.length, bytesFor: (s, e) => input.slice(s, e) }
  }
  if (typeof Blob !== 'undefined' && input instanceof Blob) {
    return { desc: { kind: 'blob', blob: input }, size: async () => input.size }
  }
  if (typeof input === 'string') {
    if (!isNode && !isDeno) throw new Error('cutpoint: a path input needs Node or Deno')
    return {
      desc: { kind: 'path', path: input },
      size: async () => {
        let st: { size: number; isDirectory: boolean }
        try {
          if (isDeno) {
            const s = await (globalThis as any).Deno.stat(input)
            st = { size: s.size, isDirectory: s.isDirectory }
          } else {
            const fsName = 'node:fs/promises'
            const fs = await import(/* @vite-ignore */ fsName)
            const s = await fs.stat(input)
            st = { size: s.size, isDirectory: s.isDirectory() }
          }
        } catch (e: any) {
          throw new Error(`cutpoint: cannot read ${input}: ${e?.message ?? e}`)
        }
        if (st.isDirectory) throw new Error(`cutpoint: cannot read ${input}: it is a directory`)
        return st.size
      },
    }
  }
  throw new TypeError('cutpoint: input must be a Uint8Array, Blob/File, ReadableStream or a path')
}

/** Workers for one call, initialised for it (a kept pool's or new ones); `finish()` them after. */
async function startPool(r: Resolved, source: SourceDesc): Promise<Pool> {
  const module = isDeno ? undefined : (await loadWasm(r.flavor)).module
  const init = {
    flavor: r.flavor,
    module,
    profile: r.profile.canonical,
    backend: r.backend,
    hash: r.hash,
    hashImpl: r.hashImpl,
    capacity: Math.min(r.segment, 1 << 30) + r.profile.window,
    source,
  }
  return r.pool ? r.pool.take(init) : Pool.create(r.workers, init, inThread)
}

/**
 * Chunks `input` (Uint8Array, Blob/File, ReadableStream of Uint8Array, or a path on Node/Deno) and
 * yields `{offset, length, hash}` in file order. Same boundaries and digests as the native CLI.
 */
export function chunk(input: Uint8Array | Blob | ReadableStream<Uint8Array> | string, opts: ChunkOptions = {}): ChunkIterable {
  need()
  opts = checkChunkOptions(opts)
  if (opts.rapid) return chunkRapid(input, opts)
  if (typeof ReadableStream !== 'undefined' && input instanceof ReadableStream) return iterable(chunkStream(input, opts))
  const src = sourceOf(input as Uint8Array | Blob | string)
  return iterable(chunkRandom(src, opts))
}

/** Pieces of any input, read in order in this thread (RapidCDC's input). */
async function* pieces(input: Uint8Array | Blob | ReadableStream<Uint8Array> | string, size: number): AsyncGenerator<Uint8Array> {
  if (input instanceof Uint8Array) {
    for (let off = 0; off < input.length; off += size) yield input.subarray(off, Math.min(off + size, input.length))
  } else if (typeof ReadableStream !== 'undefined' && input instanceof ReadableStream) {
    const reader = input.getReader()
    try {
      for (;;) {
        const { done, value } = await reader.read()
        if (done) break
        yield value
      }
    } finally {
      reader.releaseLock()
    }
  } else if (typeof Blob !== 'undefined' && input instanceof Blob) {
    for (let off = 0; off < input.size; off += size) {
      let buf: ArrayBuffer
      try {
        buf = await input.slice(off, Math.min(off + size, input.size)).arrayBuffer()
      } catch (e: any) {
        throw new Error(`cutpoint: cannot read bytes ${off}.. of the file: ${e?.message ?? e}`)
      }
      yield new Uint8Array(buf)
    }
  } else if (typeof input === 'string') {
    if (isDeno) {
      const D = (globalThis as any).Deno
      let f: any
      try {
        f = await D.open(input, { read: true })
        if ((await f.stat()).isDirectory) throw new Error('it is a directory')
      } catch (e: any) {
        f?.close()
        throw new Error(`cutpoint: cannot read ${input}: ${e?.message ?? e}`)
      }
      try {
        for (;;) {
          const buf = new Uint8Array(size)
          let n: number | null
          try {
            n = await f.read(buf)
          } catch (e: any) {
            throw new Error(`cutpoint: cannot read ${input}: ${e?.message ?? e}`)
          }
          if (n === null) break
          yield buf.subarray(0, n)
        }
      } finally {
        f.close()
      }
    } else if (isNode) {
      const fsName = 'node:fs/promises'
      const fs = await import(/* @vite-ignore */ fsName)
      let fh: any
      try {
        fh = await fs.open(input, 'r')
        if ((await fh.stat()).isDirectory()) throw new Error('it is a directory')
      } catch (e: any) {
        await fh?.close()
        throw new Error(`cutpoint: cannot read ${input}: ${e?.message ?? e}`)
      }
      try {
        for (;;) {
          const buf = new Uint8Array(size)
          let bytesRead: number
          try {
            ;({ bytesRead } = await fh.read(buf, 0, size, null))
          } catch (e: any) {
            throw new Error(`cutpoint: cannot read ${input}: ${e?.message ?? e}`)
          }
          if (bytesRead === 0) break
          yield buf.subarray(0, bytesRead)
        }
      } finally {
        await fh.close()
      }
    } else {
      throw new Error('cutpoint: a path input needs Node or Deno')
    }
  } else {
    throw new TypeError('cutpoint: input must be a Uint8Array, Blob/File, ReadableStream or a path')
  }
}

async function openRapid(opts: ChunkOptions): Promise<{ r: Resolved; session: RapidSession }> {
  const r = await resolve(opts)
  const w = need()
  if (r.flavor !== w.flavor) throw new Error(`cutpoint: rapid runs in this thread's wasm build (${w.flavor}); init({ wasm: '${r.flavor}' }) to use the other`)
  // With workers, stage 1 of large fallback blocks runs in a pool (started when first needed).
  // Not by default on two cores or fewer: the coordinator needs one for the fingerprints, and
  // the pool measured slower there (novel 256 MiB, ff+rwt: 481 / 436 / 381 MB/s with 0 / 1 / 2
  // workers); an explicit rapid.workerBlock still uses it.
  const usePool = r.workers >= 1 && (opts.rapid!.workerBlock !== undefined || (await defaultWorkers()) > 2)
  const pool = usePool ? { start: () => startPool(r, { kind: 'message' }), segment: r.segment, lane: r.lane, window: r.profile.window, view: w.view } : undefined
  const session = await RapidSession.open(w.mod, opts.rapid!, r.profile.canonical, r.hash, r.workers, r.backend, pool)
  return { r, session }
}

function chunkRapid(input: Parameters<typeof chunk>[0], opts: ChunkOptions): ChunkIterable {
  let session: RapidSession | undefined
  async function* gen(): AsyncGenerator<Chunk[]> {
    const o = await openRapid(opts)
    session = o.session
    const breather = new Breather()
    // One piece read ahead: reading (I/O threads) overlaps the run's work on this one.
    const src = pieces(input, o.r.segment)
    let next = src.next()
    next.catch(() => {})
    try {
      for (let r = await next; !r.done; r = await next) {
        next = src.next()
        next.catch(() => {})
        yield await session.push(r.value)
        await breather.maybe()
      }
      yield await session.end()
    } finally {
      session.close()
      // Closes the source once the read under way ends (not awaited: a stream may never end).
      next.then(
        () => src.return(undefined).catch(() => {}),
        () => {},
      )
    }
  }
  return iterable(gen(), () => session?.info)
}

/** Collects every chunk (convenience for small inputs and tests). */
export async function chunkAll(input: Parameters<typeof chunk>[0], opts: ChunkOptions = {}): Promise<Chunk[]> {
  const out: Chunk[] = []
  for await (const b of chunk(input, opts).batches()) for (const c of b) out.push(c)
  return out
}

async function* chunkRandom(src: ReturnType<typeof sourceOf>, opts: ChunkOptions): AsyncGenerator<Chunk[]> {
  const r = await resolve(opts)
  const size = await src.size()
  const pool = await startPool(r, src.desc)
  const st2 = new (need().mod.Stage2)(r.profile.canonical)
  try {
    const em = new Emitter(pool, r, (s, e) => src.bytesFor?.(s, e))
    const W = r.profile.window
    const nseg = Math.ceil(size / r.segment)
    const look = 2 * pool.size
    // Workers read the source themselves: they keep each stage-1 slice for its hash job.
    const readOnce = !src.bytesFor && r.hash !== 'none' && (opts.readOnce ?? src.desc.kind === 'blob')
    const jobs: Promise<{ res: Stage1Res; worker: number }>[] = []
    let launched = 0
    const launch = () => {
      const i = launched++
      const a = i * r.segment
      const b = Math.min(a + r.segment, size)
      const { msg, transfer } = stage1Job(a, b, W, r.lane, src.bytesFor, readOnce ? i : undefined)
      jobs[i] = pool.runAt<Stage1Res>(msg, transfer)
      jobs[i].catch(() => {})
    }
    for (let i = 0; i < nseg; i++) {
      while (launched < nseg && launched <= i + look) launch()
      const { res, worker } = await jobs[i]
      delete jobs[i]
      const a = i * r.segment
      const b = Math.min(a + r.segment, size)
      em.add(st2.feed(a, b, res.strict, res.loose), !readOnce)
      if (b === size) em.add(st2.finish(size), !readOnce)
      if (readOnce) em.flush(worker, i)
      yield await em.take(look)
    }
    em.flush()
    yield await em.take(0)
  } finally {
    st2.free()
    pool.finish()
  }
}

async function* chunkStream(stream: ReadableStream<Uint8Array>, opts: ChunkOptions): AsyncGenerator<Chunk[]> {
  const c = await createChunker(opts)
  const reader = stream.getReader()
  try {
    for (;;) {
      const { done, value } = await reader.read()
      if (done) break
      yield await c.update(value)
    }
    yield await c.finish()
  } finally {
    c.close()
    reader.releaseLock()
  }
}

export interface Chunker {
  /** Adds bytes; resolves to the chunks completed so far (in order, maybe none). */
  update(bytes: Uint8Array): Promise<Chunk[]>
  /** Ends the input; resolves to the remaining chunks. The chunker is closed afterwards. */
  finish(): Promise<Chunk[]>
  /** Stops the workers (also after an error). */
  close(): void
  /** With `rapid`: the result after `finish()`, the statistics so far before. */
  readonly rapid?: RapidResult
}

function rapidChunker(session: RapidSession): Chunker {
  let closed = false
  const guard = async <T>(f: () => Promise<T>): Promise<T> => {
    if (closed) throw new Error('cutpoint: the chunker is closed')
    try {
      return await f()
    } catch (e) {
      close()
      throw e
    }
  }
  const close = () => {
    closed = true
    session.close()
  }
  return {
    update: (bytes) => guard(async () => session.push(bytes)),
    finish: () =>
      guard(async () => {
        const out = await session.end()
        closed = true
        return out
      }),
    close,
    get rapid() {
      return session.info
    },
  }
}

/** A stateful chunker for data that arrives in pieces. Any piece sizes give the same chunks. */
export async function createChunker(opts: ChunkOptions = {}): Promise<Chunker> {
  need()
  opts = checkChunkOptions(opts)
  if (opts.rapid) return rapidChunker((await openRapid(opts)).session)
  const r = await resolve(opts)
  const pool = await startPool(r, { kind: 'message' })
  const st2: WasmStage2 = new (need().mod.Stage2)(r.profile.canonical)
  const W = r.profile.window
  // Bytes [base, base + len) of the stream are in held[0..len).
  let held = new Uint8Array(0)
  let base = 0
  let len = 0
  let nextA = 0
  let fed = 0
  let closed = false
  const jobs: { a: number; b: number; p: Promise<Stage1Res>; done: boolean }[] = []
  const em = new Emitter(pool, r, (s, e) => held.slice(s - base, e - base))
  const look = 2 * pool.size

  const launch = (b: number) => {
    const a = nextA
    const { msg, transfer } = stage1Job(a, b, W, r.lane, (s, e) => held.slice(s - base, e - base))
    const job = { a, b, p: pool.run<Stage1Res>(msg, transfer), done: false }
    job.p.then(
      () => (job.done = true),
      () => (job.done = true),
    )
    jobs.push(job)
    nextA = b
  }
  const drain = async (all: boolean) => {
    while (jobs.length && (all || jobs[0].done || jobs.length > look)) {
      const j = jobs.shift()!
      const res = await j.p
      em.add(st2.feed(j.a, j.b, res.strict, res.loose))
      fed = j.b
    }
  }
  const compact = () => {
    const keep = Math.min(Math.max(0, nextA - W), em.needFrom, st2.start)
    const drop = keep - base
    if (drop > 0 && drop >= len / 2) {
      held.copyWithin(0, drop, len)
      len -= drop
      base = keep
    }
  }
  const guard = async <T>(f: () => Promise<T>): Promise<T> => {
    if (closed) throw new Error('cutpoint: the chunker is closed')
    try {
      return await f()
    } catch (e) {
      close()
      throw e
    }
  }
  const close = () => {
    if (closed) return
    closed = true
    st2.free()
    pool.finish()
  }
  return {
    update: (bytes) =>
      guard(async () => {
        if (len + bytes.length > held.length) {
          const grown = new Uint8Array(Math.max(len + bytes.length, held.length * 2, 1 << 16))
          grown.set(held.subarray(0, len))
          held = grown
        }
        held.set(bytes, len)
        len += bytes.length
        while (base + len - nextA >= r.segment) launch(nextA + r.segment)
        await drain(false)
        compact()
        return em.take(look)
      }),
    finish: () =>
      guard(async () => {
        const end = base + len
        if (end > nextA) launch(end)
        await drain(true)
        if (fed !== end) st2.feed(fed, end, new Uint32Array(0), new Uint32Array(0))
        em.add(st2.finish(end))
        em.flush()
        const out = await em.take(0)
        close()
        return out
      }),
    close,
  }
}

/** @internal Test hooks, not part of the API: they may change or go without notice. */
export const __test = {
  /**
   * Sets the smallest stage-1 job (default MIN_SEGMENT_SIZE) and returns the previous one: tests
   * that check odd, tiny jobs give the same chunks lower it.
   */
  minSegment(n: number): number {
    const prev = minSegment
    minSegment = n
    return prev
  },
  async poolCrash(opts: ChunkOptions = {}) {
    const r = await resolve(opts)
    const pool = await startPool(r, { kind: 'message' })
    try {
      await Promise.all([pool.crashOne(), pool.run(stage1Job(0, 0, 0, 0, () => new Uint8Array(0)).msg)])
    } finally {
      pool.finish()
    }
  },
}
