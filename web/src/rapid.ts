// RapidCDC in the TypeScript layer: options, hint sources (base recipe, hint cache in IndexedDB
// or a file, a table kept across calls), and the driver that feeds an input to the core's
// RapidCDC (wasm `RapidRun`) and turns its typed arrays into chunks.
//
// Nothing of the algorithm lives here: hint tests, the SS-CDC fallback, fingerprints, the
// table's LRU lists and eviction, the recipe and cache formats (and their profile / version
// checks) are the Rust core's, the same code the native CLI runs. The run executes in the
// calling thread's wasm instance (the coordinator); with workers, stage 1 of large fallback
// blocks (novel regions) runs in the worker pool, which returns each slice's candidates to the
// core's run (`RapidRun.supplyCandidates`): the same chunks as in one thread. See web/README.md.

import type { Pool } from './pool.js'
import { stage1Job, type Stage1Res } from '../../common/protocol.js'
import { hexDigests } from './hex.js'
import { isDeno, isNode, type WasmModule, type WasmRapidRun, type WasmRapidTable } from '../../common/wasm.js'
import { optBool, optFunction, optInt, optOneOf, shown } from './check.js'
import { done, req } from './idb.js'

export type Criterion = 'ff' | 'ff+mt' | 'ff+rwt' | 'ff+rwt+fpt'
export const CRITERIA: readonly Criterion[] = ['ff', 'ff+mt', 'ff+rwt', 'ff+rwt+fpt']

/** A recipe: its bytes, a Blob, a URL, or a string (a path on Node/Deno, a URL in browsers). */
export type RecipeSource = Uint8Array | ArrayBuffer | Blob | URL | string

/**
 * Where the hint cache persists: a string is a file path on Node/Deno and an IndexedDB database
 * name in browsers; `true` is IndexedDB database `cutpoint` (browsers only).
 */
export type CacheSpec = string | true

export interface RapidOptions {
  /** Acceptance test for hinted boundaries. `ff+rwt+fpt` gives exactly the regular boundaries. */
  criterion: Criterion
  /** Next-chunk sizes kept per fingerprint (default 2, as the paper). */
  hintList?: number
  /** Hints from a base file's recipe (`cutpoint ... --save-recipe`, or `recipe: true` here). */
  base?: RecipeSource
  /** A persisted hint cache: read before the input (if present), written after it. */
  cache?: CacheSpec | false
  /** Largest hint cache written (bytes; default 64 MiB like the CLI's --hints-max); in IndexedDB also the bound on all caches together. */
  cacheMaxBytes?: number
  /** A table kept across calls (hints from inputs chunked earlier); updated in place. */
  table?: HintTable
  /**
   * Largest fallback block (positions). Default `max(1, workers)` MiB: the native engine's
   * `threads × 1 MiB`, so `workers: N` gives the boundaries of `cutpoint ... --threads N`.
   */
  blockSize?: number
  /**
   * With workers: the smallest fallback block (positions) whose stage 1 runs in the worker pool
   * rather than in this thread (default 256 KiB: below it a round trip costs about what it
   * saves; on machines with two cores or fewer the pool is not used unless this is given, as it
   * measured slower there). Any value gives the same chunks.
   */
  workerBlock?: number
  /** Keep this input's recipe (`result.recipe`, usable as `base` later and by the CLI's --base). */
  recipe?: boolean
  /** Mark each chunk with `hinted` (its end came from a hint rather than the boundary rule). */
  hinted?: boolean
  /** Called once with the result when the input has been chunked. */
  onResult?: (r: RapidResult) => void
}

export interface RapidStats {
  /** Input bytes and chunks. */
  bytes: number
  chunks: number
  /** Chunks whose end came from a hint. */
  hintedChunks: number
  /** Positions whose rolling hash was computed (fallback blocks), and those skipped. */
  rolledBytes: number
  skippedBytes: number
  /** Rolling-window tests (ff+rwt, ff+rwt+fpt) and the bytes they hashed. */
  windowTests: number
  windowBytes: number
  /** Fingerprints computed for fingerprint tests that failed, and their bytes. */
  fptWasted: number
  fptWastedBytes: number
  /** Hits and misses by hint list position (0 = most recent). */
  hits: number[]
  misses: number[]
  /** hits / (hits + misses) by list position; null where no hint was tried. */
  hitRatio: (number | null)[]
  /** Times every hint of a list missed and chunking fell back to the boundary rule. */
  fallbacks: number
  /** Fallback blocks scanned by stage 1. */
  fallbackBlocks: number
}

export interface RapidResult {
  criterion: Criterion
  profile: string
  hash: string
  /** Stage-1 kernel of the fallback. */
  backend: string
  /** Largest fallback block used. */
  blockSize: number
  stats: RapidStats
  /** Fingerprints read from the hint cache, and chunks from the base recipe. */
  hintsLoaded: number
  baseChunks: number
  /** Bytes of hint cache written (absent without `cache`). */
  cacheBytes?: number
  /** Fingerprints in the table after the input. */
  tableSize: number
  /** The input's recipe, with `recipe: true`. */
  recipe?: Uint8Array
}

/**
 * A hint table (the core's `HintTable`) for one profile and fingerprint. Pass it as
 * `rapid.table` to several `chunk()` calls to carry hints from one input to the next.
 */
export class HintTable {
  /** @internal */
  constructor(readonly raw: WasmRapidTable) {}
  get profile(): string {
    return this.raw.profile
  }
  get hash(): string {
    return this.raw.hash
  }
  get hintList(): number {
    return this.raw.listLen
  }
  /** Fingerprints held. */
  get size(): number {
    return this.raw.size
  }
  /** Adds a recipe (bytes or text); one for another profile or fingerprint is rejected. Returns its chunk count. */
  addRecipe(recipe: Uint8Array | string): number {
    return wrap(() => this.raw.addRecipe(typeof recipe === 'string' ? new TextEncoder().encode(recipe) : recipe))
  }
  /** Merges hint cache bytes (the native `--hints` file format); another profile / fingerprint / format version, or damage, is rejected and nothing is used. */
  loadCache(bytes: Uint8Array): number {
    return wrap(() => this.raw.loadCache(bytes))
  }
  /** The table as hint cache bytes (the native `--hints` format), at most `maxBytes` (0: no bound), most recently used kept. */
  exportCache(maxBytes = 0): Uint8Array {
    return wrap(() => this.raw.exportCache(maxBytes))
  }
  free() {
    this.raw.free()
  }
}

function wrap<T>(f: () => T): T {
  try {
    return f()
  } catch (e: any) {
    throw new Error(`cutpoint: ${e?.message ?? e}`)
  }
}

export interface TableOptions {
  profile: string
  hash: string
  hintList?: number
  /** Bound on fingerprints held (least recently used evicted first); 0 = none. */
  maxEntries?: number
}

export function newTable(mod: WasmModule, o: TableOptions): HintTable {
  const n = optInt('rapid.hintList', o.hintList, 1, 64) ?? 2
  return new HintTable(wrap(() => new mod.RapidTable(o.profile, o.hash, n, o.maxEntries ?? 0)))
}

const MiB = 1 << 20
const DEFAULT_WORKER_BLOCK = 256 << 10

/** Workers for stage 1 of fallback blocks (from `chunk()`'s options). */
export interface RapidWorkers {
  /** Starts the pool (called once, when the first block for the workers is due). */
  start(): Promise<Pool>
  /** Largest slice of positions per stage-1 job (the span). */
  span: number
  /** Lane segment inside a job (`laneSegment`). */
  lane: number
  /** The profile's window W: a job over positions [a, b) gets the bytes [a - W, b). */
  window: number
  /** A view of `len` bytes of this thread's wasm memory at `ptr` (the run's input, copied out once). */
  view(ptr: number, len: number): Uint8Array
}

/** @internal Test hooks, not part of the API: faults injected into the next fallback block's stage 1. */
export const __rapidFaults: { stage1?: 'crash' | 'bad-offsets' } = {}

/**
 * The native engine's block for `threads` threads (`Engine::block_size` in the core: 1 MiB
 * spans, four per thread, at most 16, at least one per thread): the largest RapidCDC fallback
 * block, so that ff / ff+mt / ff+rwt give the native CLI's boundaries for the same `--threads`.
 */
export function nativeBlockSize(threads: number): number {
  const t = Math.max(1, threads)
  return Math.max(t, Math.min(4 * t, 16)) * MiB
}
const DEFAULT_CACHE_MAX = 64 * MiB

function checkOptions(o: RapidOptions) {
  if (!o || typeof o !== 'object' || Array.isArray(o)) throw new TypeError(`cutpoint: rapid must be an object like { criterion: 'ff+rwt' } (got ${shown(o)})`)
  if (o.criterion === undefined) throw new TypeError(`cutpoint: rapid.criterion is required (one of ${CRITERIA.join(', ')})`)
  optOneOf('rapid.criterion', o.criterion, CRITERIA)
  optInt('rapid.hintList', o.hintList, 1, 64)
  optInt('rapid.blockSize', o.blockSize, 64, 1 << 30, '64..1 GiB')
  optInt('rapid.workerBlock', o.workerBlock, 1, 2 ** 53, '1..2^53')
  if (o.cacheMaxBytes !== undefined && (typeof o.cacheMaxBytes !== 'number' || !Number.isFinite(o.cacheMaxBytes) || o.cacheMaxBytes < 1024)) {
    throw new TypeError(`cutpoint: rapid.cacheMaxBytes must be a number of bytes, at least 1024 (got ${shown(o.cacheMaxBytes)})`)
  }
  if (o.cache !== undefined && o.cache !== false && o.cache !== true && typeof o.cache !== 'string') {
    throw new TypeError(`cutpoint: rapid.cache must be a string (a file path; an IndexedDB name in browsers), true or false (got ${shown(o.cache)})`)
  }
  const b = o.base as unknown
  if (
    b !== undefined &&
    !(b instanceof Uint8Array || b instanceof ArrayBuffer || typeof b === 'string' || b instanceof URL || (typeof Blob !== 'undefined' && b instanceof Blob))
  ) {
    throw new TypeError(`cutpoint: rapid.base must be a Uint8Array, ArrayBuffer, Blob, URL or string (got ${shown(b)})`)
  }
  if (o.table !== undefined && !(o.table instanceof HintTable)) throw new TypeError(`cutpoint: rapid.table must come from createHintTable() (got ${shown(o.table)})`)
  optBool('rapid.recipe', o.recipe)
  optBool('rapid.hinted', o.hinted)
  optFunction('rapid.onResult', o.onResult)
}

// ---- recipe and cache I/O -------------------------------------------------------------------

async function readPath(path: string): Promise<Uint8Array | undefined> {
  try {
    if (isDeno) return await (globalThis as any).Deno.readFile(path)
    const fsName = 'node:fs/promises'
    const fs = await import(/* @vite-ignore */ fsName)
    return new Uint8Array(await fs.readFile(path))
  } catch (e: any) {
    if (e?.code === 'ENOENT' || e?.name === 'NotFound') return undefined
    throw new Error(`cutpoint: cannot read ${path}: ${e?.message ?? e}`)
  }
}

/** Writes atomically (a temporary file, then a rename), as the native CLI does. */
async function writePath(path: string, bytes: Uint8Array): Promise<void> {
  const tmp = `${path}.tmp`
  try {
    if (isDeno) {
      const D = (globalThis as any).Deno
      await D.writeFile(tmp, bytes)
      await D.rename(tmp, path)
      return
    }
    const fsName = 'node:fs/promises'
    const fs = await import(/* @vite-ignore */ fsName)
    await fs.writeFile(tmp, bytes)
    await fs.rename(tmp, path)
  } catch (e: any) {
    throw new Error(`cutpoint: cannot write the hint cache ${path}: ${e?.message ?? e}`)
  }
}

async function fetchBytes(url: URL | string): Promise<Uint8Array> {
  let res: Response
  try {
    res = await fetch(url)
  } catch (e: any) {
    throw new Error(`cutpoint: cannot fetch ${url}: ${e?.message ?? e}`)
  }
  if (!res.ok) throw new Error(`cutpoint: cannot fetch ${url}: HTTP ${res.status}`)
  return new Uint8Array(await res.arrayBuffer())
}

async function recipeBytes(src: RecipeSource): Promise<Uint8Array> {
  if (src instanceof Uint8Array) return src
  if (src instanceof ArrayBuffer) return new Uint8Array(src)
  if (typeof Blob !== 'undefined' && src instanceof Blob) return new Uint8Array(await src.arrayBuffer())
  if (src instanceof URL) {
    if (src.protocol === 'file:' && (isNode || isDeno)) {
      // A name in a variable, as elsewhere: bundlers leave it alone (no node:url in a page).
      const urlName = 'node:url'
      const { fileURLToPath } = await import(/* @vite-ignore */ urlName)
      return recipeBytes(isDeno ? decodeURIComponent(src.pathname) : fileURLToPath(src))
    }
    return fetchBytes(src)
  }
  if (typeof src === 'string') {
    if (isNode || isDeno) {
      const b = await readPath(src)
      if (!b) throw new Error(`cutpoint: cannot read the base recipe ${src}: no such file`)
      return b
    }
    return fetchBytes(new URL(src, (globalThis as any).location?.href))
  }
  throw new TypeError('cutpoint: rapid.base must be a Uint8Array, ArrayBuffer, Blob, URL or string')
}

/** A hint cache store: a file (Node, Deno) or an IndexedDB record (browsers). */
interface CacheStore {
  where: string
  load(): Promise<Uint8Array | undefined>
  save(bytes: Uint8Array): Promise<void>
}

function cacheStore(spec: CacheSpec, key: string, maxBytes: number): CacheStore {
  if (isNode || isDeno) {
    if (typeof spec !== 'string') throw new Error('cutpoint: rapid.cache on Node and Deno is a file path')
    return { where: spec, load: () => readPath(spec), save: (b) => writePath(spec, b) }
  }
  const idb: IDBFactory | undefined = (globalThis as any).indexedDB
  if (!idb) throw new Error('cutpoint: rapid.cache needs IndexedDB here, and there is none')
  const db = spec === true ? 'cutpoint' : spec
  return {
    where: `indexedDB:${db}/${key}`,
    load: () => idbLoad(idb, db, key),
    save: (b) => idbSave(idb, db, key, b, maxBytes),
  }
}

const STORE = 'hints'

function idbOpen(idb: IDBFactory, name: string): Promise<IDBDatabase> {
  return new Promise((resolve, reject) => {
    const r = idb.open(name, 1)
    r.onupgradeneeded = () => {
      if (!r.result.objectStoreNames.contains(STORE)) r.result.createObjectStore(STORE)
    }
    r.onsuccess = () => resolve(r.result)
    r.onerror = () => reject(new Error(`cutpoint: cannot open IndexedDB '${name}': ${r.error?.message ?? 'error'}`))
    r.onblocked = () => reject(new Error(`cutpoint: IndexedDB '${name}' is blocked by another connection`))
  })
}

interface CacheRecord {
  bytes: Uint8Array
  size: number
  savedAt: number
}

async function idbLoad(idb: IDBFactory, name: string, key: string): Promise<Uint8Array | undefined> {
  const db = await idbOpen(idb, name)
  try {
    const tx = db.transaction(STORE, 'readonly')
    const rec: CacheRecord | undefined = await req(tx.objectStore(STORE).get(key))
    return rec?.bytes
  } finally {
    db.close()
  }
}

/** Stores one cache and evicts the least recently saved others while all exceed `maxBytes`. */
async function idbSave(idb: IDBFactory, name: string, key: string, bytes: Uint8Array, maxBytes: number): Promise<void> {
  const db = await idbOpen(idb, name)
  try {
    const tx = db.transaction(STORE, 'readwrite')
    const st = tx.objectStore(STORE)
    st.put({ bytes, size: bytes.length, savedAt: Date.now() } satisfies CacheRecord, key)
    const keys = (await req(st.getAllKeys())) as string[]
    const others: { key: string; size: number; savedAt: number }[] = []
    for (const k of keys) {
      if (k === key) continue
      const r: CacheRecord | undefined = await req(st.get(k))
      if (r) others.push({ key: k, size: r.size, savedAt: r.savedAt })
    }
    let total = bytes.length + others.reduce((a, o) => a + o.size, 0)
    others.sort((a, b) => a.savedAt - b.savedAt)
    for (const o of others) {
      if (total <= maxBytes) break
      st.delete(o.key)
      total -= o.size
    }
    await done(tx)
  } finally {
    db.close()
  }
}

// ---- the run --------------------------------------------------------------------------------

function decodeStats(v: Float64Array): RapidStats {
  const n = v[10]
  const hits = Array.from(v.subarray(11, 11 + n))
  const misses = Array.from(v.subarray(11 + n, 11 + 2 * n))
  return {
    bytes: v[0],
    chunks: v[1],
    hintedChunks: v[2],
    rolledBytes: v[3],
    skippedBytes: Math.max(0, v[0] - v[3]),
    windowTests: v[4],
    windowBytes: v[5],
    fptWasted: v[6],
    fptWastedBytes: v[7],
    fallbacks: v[8],
    fallbackBlocks: v[9],
    hits,
    misses,
    hitRatio: hits.map((h, k) => (h + misses[k] > 0 ? h / (h + misses[k]) : null)),
  }
}

export interface RapidChunk {
  offset: number
  length: number
  hash: string
  /** With `rapid.hinted`: whether its end came from a hint (not the boundary rule). */
  hinted?: boolean
}


/**
 * One input through the core's RapidCDC: `push` bytes in order (any piece sizes), `end`, then
 * `close`. Each returns the chunks decided so far, in order.
 */
export class RapidSession {
  private run?: WasmRapidRun
  private result?: RapidResult
  private closed = false
  private pool?: Promise<Pool>

  private constructor(
    private o: RapidOptions,
    private table: HintTable,
    private ownTable: boolean,
    private store: CacheStore | undefined,
    private base: { hintsLoaded: number; baseChunks: number; blockSize: number; maxBytes: number },
    private workers?: RapidWorkers,
  ) {}

  /** Prepares the table (from `o.table`, the base recipe, the cache) and starts the run. */
  /**
   * `pool`: workers for stage 1 of the fallback blocks of at least `o.workerBlock` positions
   * (none: every block in this thread); they do not change the chunks.
   */
  static async open(mod: WasmModule, o: RapidOptions, profile: string, hash: string, workers: number, backend: string, pool?: RapidWorkers): Promise<RapidSession> {
    checkOptions(o)
    if (hash === 'none') throw new Error("cutpoint: rapid needs chunk fingerprints: use hash 'blake3' or 'sha256', not 'none'")
    const blockSize = o.blockSize ?? nativeBlockSize(workers)
    const maxBytes = o.cacheMaxBytes ?? DEFAULT_CACHE_MAX
    const key = `v${mod.hintCacheVersion()} ${profile} ${hash}`
    const store = o.cache ? cacheStore(o.cache, key, maxBytes) : undefined
    const recipe = o.base !== undefined ? await recipeBytes(o.base) : undefined
    const baseName = typeof o.base === 'string' || o.base instanceof URL ? `the base recipe ${o.base}` : 'the base recipe'
    const cached = store ? await store.load() : undefined
    const ownTable = !o.table
    const table = o.table ?? newTable(mod, { profile, hash, hintList: o.hintList })
    try {
      if (o.table && o.hintList !== undefined && o.hintList !== o.table.hintList) {
        throw new Error(`cutpoint: rapid.hintList ${o.hintList} differs from the table's (${o.table.hintList})`)
      }
      const baseChunks = recipe ? wrapWhere(baseName, () => table.raw.addRecipe(recipe)) : 0
      const hintsLoaded = cached ? wrapWhere(`the hint cache ${store!.where}`, () => table.raw.loadCache(cached)) : 0
      const s = new RapidSession(o, table, ownTable, store, { hintsLoaded, baseChunks, blockSize, maxBytes }, pool)
      const run = wrap(() => new mod.RapidRun(table.raw, profile, hash, o.criterion, blockSize, backend, !!o.recipe))
      s.run = run
      if (pool) wrap(() => run.externalStage1(o.workerBlock ?? DEFAULT_WORKER_BLOCK))
      return s
    } catch (e) {
      if (ownTable) table.free()
      throw e
    }
  }

  /** Adds input bytes; returns the chunks they complete. */
  async push(bytes: Uint8Array): Promise<RapidChunk[]> {
    const run = this.need()
    wrap(() => run.push(bytes))
    return this.drain()
  }

  /** Ends the input; returns the remaining chunks and the result (cache saved, table given back). */
  async end(): Promise<RapidChunk[]> {
    const run = this.need()
    wrap(() => run.end())
    const out = await this.drain()
    if (!run.done) throw new Error('cutpoint: internal error: RapidCDC did not finish at the end of the input')
    const stats = decodeStats(run.stats())
    const recipe = this.o.recipe ? run.recipe() : undefined
    const backend = run.backend
    run.finish(this.table.raw)
    run.free()
    this.run = undefined
    let cacheBytes: number | undefined
    try {
      if (this.store) {
        const bytes = this.table.exportCache(this.base.maxBytes)
        await this.store.save(bytes)
        cacheBytes = bytes.length
      }
      this.result = {
        criterion: this.o.criterion,
        profile: this.table.profile,
        hash: this.table.hash,
        backend,
        blockSize: this.base.blockSize,
        stats,
        hintsLoaded: this.base.hintsLoaded,
        baseChunks: this.base.baseChunks,
        cacheBytes,
        tableSize: this.table.size,
        recipe,
      }
    } finally {
      this.close()
    }
    this.o.onResult?.(this.result)
    return out
  }

  /** The result once the input is done; before that, the statistics so far. */
  get info(): RapidResult | undefined {
    if (this.result) return this.result
    if (!this.run) return undefined
    return {
      criterion: this.o.criterion,
      profile: this.table.profile,
      hash: this.table.hash,
      backend: this.run.backend,
      blockSize: this.base.blockSize,
      stats: decodeStats(this.run.stats()),
      hintsLoaded: this.base.hintsLoaded,
      baseChunks: this.base.baseChunks,
      tableSize: this.run.tableSize,
    }
  }

  /** Stops (also after an error or an early exit): no cache is written; a caller's table is given back. */
  close() {
    if (this.closed) return
    this.closed = true
    if (this.run) {
      try {
        this.run.finish(this.table.raw)
      } catch {}
      this.run.free()
      this.run = undefined
    }
    if (this.ownTable) this.table.free()
    if (this.pool) {
      this.pool.then(
        (p) => p.finish(),
        () => {},
      )
      this.pool = undefined
    }
  }

  private need(): WasmRapidRun {
    if (!this.run) throw new Error('cutpoint: the RapidCDC run is closed')
    return this.run
  }

  private async drain(): Promise<RapidChunk[]> {
    const out: RapidChunk[] = []
    for (;;) {
      const run = this.need()
      const n = wrap(() => run.run(4096))
      if (n === 0) {
        const need = run.needed()
        if (need.length === 0) break
        await this.stage1(run, need[0], need[1])
        continue
      }
      const offs = run.offsets()
      const lens = run.lengths()
      const digs = run.digests()
      const hashes = hexDigests(digs, n)
      if (this.o.hinted) {
        const found = run.found()
        for (let i = 0; i < n; i++) out.push({ offset: offs[i], length: lens[i], hash: hashes[i], hinted: found[i] !== 255 })
      } else for (let i = 0; i < n; i++) out.push({ offset: offs[i], length: lens[i], hash: hashes[i] })
    }
    return out
  }

  /**
   * Stage 1 of the positions [a, q) of a fallback block: this thread keeps the first share (one
   * part in workers + 1) and scans it in the run meanwhile; the workers take the rest in slices
   * of at most `span` positions (fewer, so that every worker gets one), each job with the
   * bytes [x - W, y) of its slice [x, y) copied out of the run. Candidates go to the run in order.
   */
  private async stage1(run: WasmRapidRun, a: number, q: number) {
    const w = this.workers!
    this.pool ??= w.start()
    const pool = await this.pool
    if (this.run !== run) throw new Error('cutpoint: the RapidCDC run is closed')
    const here = Math.floor((q - a) / (pool.size + 1))
    const per = Math.max(1, Math.min(w.span, Math.ceil((q - a - here) / pool.size)))
    const fault = __rapidFaults.stage1
    __rapidFaults.stage1 = undefined
    // (Test hook: a worker dies before the slices' jobs are done; they all fail.)
    if (fault === 'crash') pool.crashOne().catch(() => {})
    const jobs: { x: number; y: number; p: Promise<Stage1Res> }[] = []
    for (let x = a + here; x < q; x += per) {
      const y = Math.min(x + per, q)
      const { msg, transfer } = stage1Job(x, y, w.window, w.lane, (start, end) => w.view(wrap(() => run.bytesPtr(start, end)), end - start).slice())
      const p = pool.run<Stage1Res>(msg, transfer)
      p.catch(() => {})
      jobs.push({ x, y, p })
    }
    if (here > 0) wrap(() => run.scanStage1(a, a + here))
    for (const j of jobs) {
      const res = await j.p
      if (this.run !== run) throw new Error('cutpoint: the RapidCDC run is closed')
      const strict = fault === 'bad-offsets' ? Uint32Array.of(j.y - j.x) : res.strict
      wrap(() => run.supplyCandidates(j.x, j.y, strict, res.loose))
    }
  }
}

function wrapWhere<T>(what: string, f: () => T): T {
  try {
    return f()
  } catch (e: any) {
    throw new Error(`cutpoint: ${what}: ${e?.message ?? e}`)
  }
}
