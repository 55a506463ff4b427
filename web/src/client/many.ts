// `pushMany`: many inputs, each the next version of its own name, as one pipeline (PROTOCOL.md
// 5.1 "Many files", issue #33; native/store/src/client.rs `push_files` does the same). The
// inputs are chunked in order into one stream of chunk batches (PushRun's stages, the inputs end
// to end in its offsets), so the ids of many small files share one existence query and their
// novel chunks share packs; the recipes are committed in batches (`POST commits`, within the
// store's `max_batch_files` and `max_recipe_bytes`) where the store lists `batch`, else one
// `PUT` each. No base recipe is fetched (that would be a request per file): each recipe is
// committed whole, or in parts when it passes the threshold (3.7), on its own.
//
// Each input gets its own result: a name the store cannot take, an input that cannot be opened,
// changed while it was read, or whose commit the store refused fails alone. A failure of the
// pipeline itself (the store unreachable, an input unreadable half-way) rejects, and then
// nothing was committed. Memory: PushRun's (the id table, the packs in flight), each small
// input's recipe text until the commits, and at most MAX_OPEN inputs open at a time; an input
// is read, never held whole.
import { chunk, type Chunk } from '../index.js'
import { checkAbort, StoreError, usage } from './errors.js'
import { isStream, openReader, type PushInput, type RangeReader } from './input.js'
import { checkProfile, commit, PushRun, type IdChunk, type PushContext, type PushResult } from './push.js'
import { wire } from './wire.js'
import { pause } from './slice.js'
import { isDeno, isNode, type WasmPartSink } from '../../../common/wasm.js'
import type { ManyRes } from '../../../common/protocol.js'
import { resolve } from '../options.js'
import type { Pool } from '../pool.js'
import { startPool } from '../workers.js'

export interface ManyInput {
  input: PushInput
  name: string
}

export interface PushManyProgress {
  /** The input this is about: its index in the list and its name. */
  index: number
  name: string
  /** chunking → queued (chunked; its novel chunks on their way) → committing → done | failed. */
  stage: 'chunking' | 'queued' | 'committing' | 'done' | 'failed'
  /** This input's bytes chunked so far, its size (once opened), its novel bytes so far. */
  bytes: number
  total?: number
  novelBytes: number
  /** With 'done'. */
  result?: PushResult
  /** With 'failed'. */
  error?: StoreError
  /** The whole push: inputs, of which committed and failed so far; bytes chunked; bytes sent. */
  files: number
  filesDone: number
  filesFailed: number
  allBytes: number
  sentBytes: number
}

export interface PushManyOptions {
  signal?: AbortSignal
  /** Per input, as it goes (a page coalesces these per animation frame). */
  onProgress?: (p: PushManyProgress) => void
}

/** An input that was not committed, and why. */
export interface PushManyFailure {
  name: string
  error: StoreError
}

export interface PushManyResult {
  /** One per input, in input order. */
  results: (PushResult | PushManyFailure)[]
  files: number
  committed: number
  failed: number
  /** Bytes of all the inputs chunked, of which novel; every request body sent. */
  bytes: number
  novelBytes: number
  /** The novel chunks' data as it travelled (compressed where that saved), and the chunks sent compressed. */
  compressedBytes: number
  compressedChunks: number
  sentBytes: number
  packs: number
  /** Commit requests: batches (`POST commits`), or one `PUT` per input without `batch`. */
  commitRequests: number
  seconds: number
}

/** Inputs whose readers are open at a time (others are opened again if a chunk must be read back). */
const MAX_OPEN = 16
/** Inputs opened (and small ones chunked) ahead of the one being queried. */
const AHEAD = 8
/** An input up to this size is chunked ahead, in this thread. */
const AHEAD_BYTES = 256 << 10
/** In a browser with workers: inputs opened and read ahead (their chunking is batched in the workers). */
const AHEAD_BROWSER = 64
/**
 * In a browser: ids a query asks about (push's default is 2,048, two queries ahead). A query's
 * answer is framed, compressed and packed while the chunking waits; at 2,048 ids the first one
 * (2,048 novel chunks of a first push, about 4,100 small files) came only as the third query was
 * sent, and its packs were built in one stretch of 67-167 ms frames on a loaded machine. A
 * multiple of the core's compression group (256 chunks): the groups of an answer whose chunks
 * are all novel are the same.
 */
const QUERY_BATCH_BROWSER = 512
/**
 * In a browser: the push's id table sized for this many ids per input (up to MAX_RESERVED_IDS)
 * before the first chunk, so that it does not grow (a rehash of every id in one task) while a
 * folder of small files is pushed: 10,000 such files came to about 15,000 chunks.
 */
const IDS_PER_INPUT = 2
const MAX_RESERVED_IDS = 1 << 18
/** A worker message of small inputs: at most this many, or about this many bytes. */
const BATCH_FILES = 16
/**
 * Blobs (Files) in one worker message: posting a File is a structured clone on the page's thread,
 * 0.65 ms each on a quiet machine and several ms on a loaded one (a CDP profile of 10,000 Files:
 * posts of 16 held the thread 50-100 ms at a time), so a message takes few of them.
 */
const BATCH_BLOBS = 4
const BATCH_BYTES = 1 << 20
/** Rounds of sending missing chunks again after a 409 at commit, as `push`. */
const MAX_ROUNDS = 3

/** One input of the push and what it came to. */
class ManyFile {
  /** Where its bytes start in the push's offsets. */
  base = 0
  size?: number
  bytes = 0
  chunks = 0
  novelChunks = 0
  novelBytes = 0
  /** Its novel chunks' data as it travelled (compressed where that saved), and how many compressed. */
  compressedBytes = 0
  compressedChunks = 0
  stage: PushManyProgress['stage'] = 'chunking'
  reader?: RangeReader
  /** Its bytes, read by a worker (a small Blob in a browser), while ManyReader keeps them. */
  cache?: Uint8Array
  /** Its `unchanged()` check (a path: size and mtime), kept after its reader is closed. */
  check?: RangeReader
  /** Its recipe, sealed: whole (`text`) or in parts (`sink`, sent by the pipeline). */
  digest?: string
  text?: Uint8Array
  sink?: WasmPartSink
  recipeBytes = 0
  version?: number
  error?: StoreError
  result?: PushResult
  constructor(
    readonly index: number,
    readonly input: PushInput,
    readonly name: string,
  ) {}
}

/** A Blob's check (a Blob has none: `openReader`'s is a no-op too). */
const NOT_CHECKED: RangeReader = { read: async () => new Uint8Array(0), unchanged: async () => {}, close: async () => {} }
/** Bytes of small Blobs kept for the read-back of their novel chunks (oldest let go first). */
const CACHE_BYTES = 64 << 20

/** The inputs end to end as one random-access input: a read may span inputs. */
class ManyReader implements RangeReader {
  private readonly list: ManyFile[] = []
  private readonly open: ManyFile[] = []
  private readonly cached: ManyFile[] = []
  private cachedBytes = 0

  /** `f`'s bytes, read by a worker: its reads come from them while they are kept. */
  cache(f: ManyFile, bytes: Uint8Array): void {
    f.cache = bytes
    this.cached.push(f)
    this.cachedBytes += bytes.length
    while (this.cachedBytes > CACHE_BYTES && this.cached.length > 1) {
      const old = this.cached.shift()!
      this.cachedBytes -= old.cache?.length ?? 0
      old.cache = undefined
    }
  }

  /** Bytes [o, o + n) of `f`. */
  private async readOf(f: ManyFile, o: number, n: number): Promise<Uint8Array> {
    if (f.cache) return f.cache.subarray(o, o + n)
    return (await this.readerOf(f)).read(o, n)
  }

  add(f: ManyFile): void {
    if (f.size) this.list.push(f)
  }

  /** The input holding offset `off`. */
  find(off: number): ManyFile | undefined {
    const l = this.list
    let lo = 0
    let hi = l.length - 1
    while (lo < hi) {
      const mid = (lo + hi + 1) >> 1
      if (l[mid].base <= off) lo = mid
      else hi = mid - 1
    }
    const f = l[lo]
    return f && f.base <= off && off < f.base + f.size! ? f : undefined
  }

  /** `f`'s reader, opened again if it was closed; at most MAX_OPEN stay open. */
  async readerOf(f: ManyFile): Promise<RangeReader> {
    if (f.reader) return f.reader
    f.reader = (await openReader(f.input as Blob | Uint8Array | string)).reader
    this.keep(f)
    return f.reader
  }

  keep(f: ManyFile): void {
    this.open.push(f)
    while (this.open.length > MAX_OPEN) {
      const old = this.open.shift()!
      const r = old.reader
      old.reader = undefined
      void r?.close()
    }
  }

  /** The end of the input holding `off` (a read within it is a view of its cached bytes, no copy). */
  extent(off: number): number {
    const f = this.find(off)
    return f ? f.base + f.size! : off
  }

  async read(off: number, len: number): Promise<Uint8Array> {
    const first = this.find(off)
    if (!first) throw new StoreError(`cutpoint: internal error: no input holds offset ${off}`, { code: 'protocol' })
    if (off + len <= first.base + first.size!) return this.readOf(first, off - first.base, len)
    const out = new Uint8Array(len)
    let at = 0
    while (at < len) {
      const f = this.find(off + at)
      if (!f) throw new StoreError(`cutpoint: internal error: no input holds offset ${off + at}`, { code: 'protocol' })
      const n = Math.min(len - at, f.base + f.size! - (off + at))
      out.set(await this.readOf(f, off + at - f.base, n), at)
      at += n
    }
    return out
  }

  async unchanged(): Promise<void> {}

  async close(): Promise<void> {
    for (const f of this.cached) f.cache = undefined
    this.cached.length = 0
    this.cachedBytes = 0
    for (const f of this.open) await f.reader?.close()
    for (const f of this.open) f.reader = undefined
    this.open.length = 0
  }
}

/**
 * Pushes many inputs as one pipeline: stages chunk → query → pack → upload shared by all
 * (PushRun), then `stageCommitMany` (batches). Per-input results in input order.
 */
export async function pushMany(ctx: PushContext, inputs: ManyInput[], opts: PushManyOptions = {}): Promise<PushManyResult> {
  const t0 = performance.now()
  if (!Array.isArray(inputs)) throw usage('pushMany needs a list of { input, name }')
  if (opts === null || typeof opts !== 'object') throw usage('pushMany options must be an object')
  const { profile, maxChunk } = checkProfile(ctx)
  const userSignal = opts.signal
  checkAbort(userSignal)
  const inner = new AbortController()
  const onUserAbort = () => inner.abort(userSignal!.reason)
  userSignal?.addEventListener('abort', onUserAbort, { once: true })
  const files = inputs.map((x, i) => new ManyFile(i, x?.input, typeof x?.name === 'string' ? x.name : String(x?.name)))
  const run = new PushRun(ctx, { name: '(many)', signal: inner.signal }, { name: '(many)', profile, maxChunk }, inner.signal, t0)
  const many = new ManyRun(run, files, opts, t0)
  try {
    try {
      await many.prepare()
      await many.stageChunkAll()
      run.stage = 'querying'
      await run.finishQueries()
      run.stage = 'uploading'
      await run.finishUploads()
      run.succeeded = true
      await many.stageCommitMany()
      return many.result()
    } finally {
      await run.close()
      await many.close()
    }
  } finally {
    userSignal?.removeEventListener('abort', onUserAbort)
    if (!run.succeeded) inner.abort(new StoreError('cutpoint: the push failed', { code: 'aborted' }))
  }
}

/** What a worker made of one input of a batch (SmallBatcher). */
interface SmallResult {
  size: number
  /** Absent: a Blob over AHEAD_BYTES (only measured), or `error`. */
  chunks?: Chunk[]
  /** A Blob's bytes as the worker read them. */
  bytes?: Uint8Array
  error?: string
}

/**
 * Small inputs chunked in the workers, many to a message, so that a page's thread neither
 * chunks them nor touches the Files: in Chromium a File's `size`, `slice()` and `arrayBuffer()`
 * are each a synchronous look-up on the calling thread (a CDP profile of 2,000 Files pushed from
 * the page: 4.2 s in `slice`, 4.0 s in `openReader` (`size`), 2.5 s in `arrayBuffer`, against
 * 0.2 s of wasm), and done for many Files back to back they froze the page for 50-200 ms at a
 * time. A Blob is sent as it is (a Blob over AHEAD_BYTES comes back measured only); its bytes
 * come back with its chunks, for the novel chunks' read-back (ManyReader's cache). Batches of up
 * to BATCH_FILES inputs (BATCH_BLOBS Blobs, or about BATCH_BYTES; a Blob counts as 16 KiB), one per task.
 */
class SmallBatcher {
  private files: (Uint8Array | Blob)[] = []
  private waiting: { resolve(r: SmallResult): void; reject(e: unknown): void }[] = []
  private timer?: ReturnType<typeof setTimeout>

  constructor(
    private readonly pool: Pool,
    private readonly hashed: boolean,
  ) {}

  /** `item` (a Uint8Array is moved to a worker) chunked whole there, offsets from 0. */
  add(item: Uint8Array | Blob): Promise<SmallResult> {
    return new Promise((resolve, reject) => {
      // A view into a larger buffer is copied (that buffer is not ours to move).
      this.files.push(item instanceof Uint8Array && (item.byteOffset !== 0 || item.byteLength !== item.buffer.byteLength) ? item.slice() : item)
      this.waiting.push({ resolve, reject })
      this.timer ??= setTimeout(() => this.flush(), 0)
    })
  }

  /**
   * One batch to a worker per task: posting a File costs the page's thread about 0.5 ms in
   * Chromium (its structured clone), so a task posts at most BATCH_BLOBS of them.
   */
  private flush(): void {
    this.timer = undefined
    let n = 0
    for (let bytes = 0, blobs = 0; n < this.files.length && n < BATCH_FILES && bytes < BATCH_BYTES && blobs < BATCH_BLOBS; n++) {
      const f = this.files[n]
      bytes += f instanceof Uint8Array ? f.length : 16 << 10
      if (!(f instanceof Uint8Array)) blobs++
    }
    const files = this.files.splice(0, n)
    const waiting = this.waiting.splice(0, n)
    if (this.files.length) this.timer = setTimeout(() => this.flush(), 0)
    if (!files.length) return
    const transfer = files.flatMap((b) => (b instanceof Uint8Array ? [b.buffer as ArrayBuffer] : []))
    this.pool.run<ManyRes>({ type: 'cutpoint:many', files, max: AHEAD_BYTES }, transfer).then(
      (res) =>
        waiting.forEach((w, i) => {
          const cuts = res.cuts[i]
          w.resolve({ size: res.sizes[i], error: res.errors[i], bytes: res.bytes[i], chunks: cuts && this.chunks(cuts, res.digests[i]!) })
        }),
      (e) => waiting.forEach((w) => w.reject(e)),
    )
  }

  /** The chunks of one input; their ids as the digests' bytes (stageQuery takes them as they are: no hex). */
  private chunks(cuts: Float64Array, digests: Uint8Array): IdChunk[] {
    const out: IdChunk[] = []
    const d = cuts.length ? digests.length / cuts.length : 0
    let at = 0
    for (let i = 0; i < cuts.length; i++) {
      const c: IdChunk = { offset: at, length: cuts[i] - at }
      if (this.hashed) c.id = digests.subarray(i * d, (i + 1) * d)
      out.push(c)
      at = cuts[i]
    }
    return out
  }

  close(): void {
    clearTimeout(this.timer)
    this.timer = undefined
    this.pool.finish()
  }
}

/** A push of many inputs: its inputs, the shared PushRun, the commits. */
class ManyRun {
  private readonly reader = new ManyReader()
  private cur?: ManyFile
  /** In a browser with workers: the small inputs' chunking (else in this thread). */
  private small?: SmallBatcher
  private lastReport = 0
  private commitRequests = 0
  private done = 0
  private failed = 0
  private closed = false

  constructor(
    private readonly run: PushRun,
    private readonly files: ManyFile[],
    private readonly opts: PushManyOptions,
    private readonly t0: number,
  ) {}

  /** Names and inputs checked (a bad one fails alone), the store's limits, the pack layout. */
  async prepare(): Promise<void> {
    const { run } = this
    for (const f of this.files) {
      await pause()
      try {
        wire().validateName(f.name)
      } catch (e: any) {
        this.fail(f, usage(e?.message ?? String(e)))
        continue
      }
      const ok = f.input instanceof Uint8Array || typeof f.input === 'string' || (typeof Blob !== 'undefined' && f.input instanceof Blob)
      if (!ok) this.fail(f, usage(isStream(f.input) ? `'${f.name}': pushMany takes Blobs, Uint8Arrays and paths; push a stream with push()` : `'${f.name}': not a File/Blob, Uint8Array or path`))
    }
    const lim = await run.http.limits(run.signal)
    // Framed packs, the novel chunks read back by offset (the inputs end to end), also in a
    // browser: heads-first packs (push's way for one File) would be Blobs of a slice per File,
    // and Chromium makes each slice on the page's thread (~0.5 ms each on a loaded machine: a
    // pack of 1,000 small Files froze the page for about a second); read back, the slices are
    // made one read at a time, between frames. Not one Blob of all the Files either: that reads
    // every File's size at once (a synchronous look-up each in Chromium).
    run.setLimits(undefined, lim)
    run.reader = this.reader
    run.onBatch = (n, bytes) => {
      const f = this.cur!
      f.chunks += n
      f.bytes += bytes
      this.report(f)
    }
    run.onFrame = (off, stored, compressed) => {
      const f = this.reader.find(off)
      if (!f) return
      f.compressedBytes += stored
      if (compressed) f.compressedChunks++
    }
    run.onNovel = (off, len) => {
      const f = this.reader.find(off)
      if (!f) return
      f.novelChunks++
      f.novelBytes += len
    }
  }

  /** Each input in turn through the chunker into the shared stages; its recipe sealed at its end. */
  async stageChunkAll(): Promise<void> {
    const { run } = this
    const chunkOpts = await run.chunkOptions()
    const live = this.files.filter((f) => !f.error)
    const depth = await this.startSmall(chunkOpts, live) ? AHEAD_BROWSER : AHEAD
    if (!isNode && !isDeno) {
      run.setQueryBatch(QUERY_BATCH_BROWSER)
      run.table.reserve(Math.min(MAX_RESERVED_IDS, live.length * IDS_PER_INPUT))
    }
    // Each entry let go once taken: kept to the end, every input's chunk list (an object per
    // chunk, its id a view of the worker's answer) stayed live for the garbage collector to trace.
    const ahead: (Promise<Chunk[][] | undefined> | undefined)[] = []
    const next = () => {
      const f = live[ahead.length]
      if (!f) return
      const p = this.openAhead(f)
      p.catch(() => {}) // awaited at its turn (a push that failed before never gets there)
      ahead.push(p)
    }
    for (let i = 0; i < depth; i++) next()
    for (let i = 0; i < live.length; i++) {
      const f = live[i]
      checkAbort(run.signal)
      const early = await ahead[i]
      ahead[i] = undefined
      next()
      // The workers' answers come 16 inputs at a time: taking them in one go held the page's
      // thread (and its frames) for 70-120 ms on a loaded machine.
      await pause()
      if (f.error) continue
      f.base = run.fileBase = run.bytes
      this.reader.add(f)
      this.reader.keep(f)
      this.cur = f
      run.recipe = new (wire().StoreRecipe)(run.profile, run.hash)
      run.sink = run.newSink()
      this.report(f, true)
      if (early) for (const b of early) await run.stageQuery(b)
      else for await (const b of chunk(f.input as Blob | Uint8Array | string, chunkOpts).batches()) await run.stageQuery(b)
      this.endFile(f)
    }
    this.cur = undefined
  }

  /**
   * In a browser (a page: its thread must stay free) with workers, and small inputs among
   * `live`: a pool of its own for them (the client's may be taken by a larger input's chunk()).
   * Node and Deno chunk small inputs in this thread (no frames to keep; no worker round trip).
   */
  private async startSmall(chunkOpts: Parameters<typeof resolve>[0], live: ManyFile[]): Promise<boolean> {
    if (isNode || isDeno || !live.length) return false
    const r = await resolve(chunkOpts)
    if (r.workers < 1) return false
    const pool = await startPool({ ...r, pool: undefined, span: AHEAD_BYTES }, { kind: 'message' })
    this.small = new SmallBatcher(pool, r.hash !== 'none')
    return true
  }

  /**
   * An input opened (its size, its reader; one that cannot be opened, or is over a limit of the
   * store, fails alone) ahead of its turn, and a small one chunked ahead in this thread: a worker
   * round trip costs more than chunking a few KiB, and the inputs' reads overlap. The chunk
   * list of a small input (a few records) waits for its turn; a larger input is chunked by the
   * workers at its turn.
   */
  private async openAhead(f: ManyFile): Promise<Chunk[][] | undefined> {
    const { run } = this
    if (this.small && typeof Blob !== 'undefined' && f.input instanceof Blob) return this.blobAhead(f, this.small)
    try {
      const o = await openReader(f.input as Blob | Uint8Array | string)
      if (this.closed) {
        await o.reader.close()
        return undefined
      }
      f.reader = f.check = o.reader
      f.size = o.size
      run.checkLimits(o.size)
    } catch (e: any) {
      await f.reader?.close()
      f.reader = undefined
      this.fail(f, e instanceof StoreError ? e : new StoreError(`cutpoint: ${f.name}: ${e?.message ?? e}`, { code: 'io', cause: e }))
      return undefined
    }
    if (f.size > AHEAD_BYTES || run.signal.aborted) return undefined
    // Read once through its reader (no second open) and chunked with a span of its size (the
    // span only splits the work; the chunks are the same at any span).
    const bytes = await f.reader!.read(0, f.size)
    if (this.small) {
      const r = await this.small.add(bytes)
      return r.chunks && [r.chunks]
    }
    const out: Chunk[][] = []
    for await (const b of chunk(bytes, { profile: run.profile, hash: run.hash, workers: 0, span: Math.max(64 << 10, f.size) }).batches()) out.push(b)
    return out
  }

  /**
   * A Blob in a browser with workers: measured, read and (if small) chunked by a worker; its
   * bytes kept for the read-back of its novel chunks (ManyReader's cache). A larger one is
   * opened here and chunked at its turn.
   */
  private async blobAhead(f: ManyFile, small: SmallBatcher): Promise<Chunk[][] | undefined> {
    const { run } = this
    // A worker's failure fails the push (as chunk()'s would); a file that cannot be read fails alone.
    const r = await small.add(f.input as Blob)
    try {
      if (r.error) throw new StoreError(`cutpoint: ${f.name}: ${r.error}`, { code: 'io' })
      if (this.closed) return undefined
      f.size = r.size
      run.checkLimits(r.size)
      f.check = NOT_CHECKED
      if (r.chunks) {
        this.reader.cache(f, r.bytes!)
        return [r.chunks]
      }
      f.reader = (await openReader(f.input as Blob)).reader
      return undefined
    } catch (e: any) {
      this.fail(f, e instanceof StoreError ? e : new StoreError(`cutpoint: ${f.name}: ${e?.message ?? e}`, { code: 'io', cause: e }))
      return undefined
    }
  }

  /** An input is chunked: its recipe sealed (whole: its text; in parts: its last part queued). */
  private endFile(f: ManyFile): void {
    const { run } = this
    if (f.bytes !== f.size) throw new StoreError(`cutpoint: ${f.name}: chunked ${f.bytes} bytes of a ${f.size}-byte input; nothing was committed`, { code: 'io' })
    const sink = run.sink!
    if (sink.inParts) {
      f.digest = run.endInput()
      f.sink = sink
    } else {
      const r = run.recipe!
      f.digest = r.seal()
      f.text = r.text()
      r.free()
      sink.free()
    }
    run.recipe = undefined
    run.sink = undefined
    f.stage = 'queued'
    this.report(f, true)
  }

  /**
   * The recipes committed: an input that changed while it was read fails alone; recipes in
   * parts one by one, the others in batches (or a `PUT` each); a 409 sends the missing chunks
   * again and commits those inputs again.
   */
  async stageCommitMany(): Promise<void> {
    const { run } = this
    let pending: ManyFile[] = []
    // An input that changed while it was read fails alone (paths: size and mtime, 32 at a time).
    const live = this.files.filter((f) => !f.error)
    for (let i = 0; i < live.length; i += 32) {
      await Promise.all(
        live.slice(i, i + 32).map((f) =>
          f.check!.unchanged().catch((e: any) => this.fail(f, e instanceof StoreError ? e : new StoreError(String(e?.message ?? e), { code: 'io' }))),
        ),
      )
      // A Blob's check answers at once: without this the loop over 10,000 was one task.
      await pause()
    }
    for (let i = 0; i < live.length; i++) {
      const f = live[i]
      await pause()
      if (f.error) continue
      f.stage = 'committing'
      this.report(f, true)
      if (f.sink) await this.commitParts(f)
      else pending.push(f)
    }
    const batch = run.limits.features?.includes('batch')
    for (let round = 0; pending.length; round++) {
      checkAbort(run.signal)
      const answers = batch ? await this.commitBatches(pending) : await this.commitEach(pending)
      const again: ManyFile[] = []
      const missing = new Set<string>()
      for (let i = 0; i < answers.length; i++) {
        const [f, r] = answers[i]
        await pause()
        if (r instanceof StoreError && r.status === 409 && r.missing?.length && round < MAX_ROUNDS) {
          for (const id of r.missing) missing.add(id)
          again.push(f)
        } else if (r instanceof StoreError) this.fail(f, r)
        else this.commitOk(f, r)
      }
      if (missing.size) await run.resendMissing([...missing])
      pending = again
    }
  }

  /** A recipe in parts (its parts sent by the pipeline): the short recipe of part lines. */
  private async commitParts(f: ManyFile): Promise<void> {
    const { run } = this
    try {
      const text = f.sink!.recipeText()
      const max = run.limits.maxRecipe
      if (max !== undefined && text.length > max) {
        throw new StoreError(`cutpoint: the commit of '${f.name}' is ${text.length} bytes, over the store's max_recipe_bytes of ${max}; its chunks were sent, nothing was committed`, {
          status: 413,
          code: 'too_large',
        })
      }
      run.sent += text.length
      f.recipeBytes += text.length
      this.commitRequests++
      this.commitOk(f, await commit(run.http, f.name, text, f.digest!, 0, run.signal))
    } catch (e: any) {
      checkAbort(run.signal)
      this.fail(f, e instanceof StoreError ? e : new StoreError(String(e?.message ?? e), { code: 'protocol' }))
    }
  }

  /** Without the store's `batch`: a `PUT` per input (read back after a lost answer, as `push`). */
  private async commitEach(list: ManyFile[]): Promise<[ManyFile, number | StoreError][]> {
    const { run } = this
    const out: [ManyFile, number | StoreError][] = []
    for (const f of list) {
      run.sent += f.text!.length
      f.recipeBytes += f.text!.length
      this.commitRequests++
      try {
        out.push([f, await commit(run.http, f.name, f.text!, f.digest!, 0, run.signal)])
      } catch (e: any) {
        checkAbort(run.signal)
        if (!(e instanceof StoreError)) throw e
        out.push([f, e])
      }
    }
    return out
  }

  /**
   * `POST commits` in batches within `max_batch_files` and `max_recipe_bytes` (the core's batch
   * body). Not sent again after a lost answer (not idempotent): its inputs fail with that error.
   */
  private async commitBatches(list: ManyFile[]): Promise<[ManyFile, number | StoreError][]> {
    const { run } = this
    const maxFiles = Math.max(1, run.limits.maxBatchFiles ?? wire().maxBatchFiles())
    const maxBytes = run.limits.maxRecipe ?? Infinity
    const out: [ManyFile, number | StoreError][] = []
    const w = new (wire().StoreBatch)()
    let idx: ManyFile[] = []
    const send = async () => {
      const body = w.finish()
      const sent = idx
      idx = []
      run.sent += body.length
      this.commitRequests++
      for (const f of sent) f.recipeBytes += f.text!.length
      try {
        out.push(...(await this.postBatch(body, sent)))
      } catch (e: any) {
        checkAbort(run.signal)
        if (!(e instanceof StoreError)) throw e
        for (const f of sent) out.push([f, e])
      }
    }
    try {
      for (let i = 0; i < list.length; i++) {
        const f = list[i]
        await pause()
        const text = f.text!
        if (w.count && (w.count >= maxFiles || w.lenWith(f.name, text.length) > maxBytes)) await send()
        if (w.lenWith(f.name, text.length) > maxBytes) {
          out.push([f, new StoreError(`cutpoint: the commit of '${f.name}' is ${text.length} bytes, over the store's max_recipe_bytes of ${maxBytes}; nothing was committed`, { status: 413, code: 'too_large' })])
          continue
        }
        w.add(f.name, text)
        idx.push(f)
      }
      if (w.count) await send()
    } finally {
      w.free()
    }
    return out
  }

  /** One batch request; each input's answer (its version, or the store's error for it). */
  private async postBatch(body: Uint8Array, list: ManyFile[]): Promise<[ManyFile, number | StoreError][]> {
    const { http, signal } = this.run
    const res = await http.request('POST', http.url('commits'), { body, type: 'text/plain; charset=utf-8', signal })
    let v: any
    try {
      v = await res.json()
    } catch (e: any) {
      if (e instanceof StoreError) throw e
      throw new StoreError(`cutpoint: the store's batch answer is not JSON: ${e?.message ?? e}`, { code: 'protocol' })
    }
    const rs = v?.results
    if (!Array.isArray(rs) || rs.length !== list.length) {
      throw new StoreError(`cutpoint: the store's batch answer has ${Array.isArray(rs) ? rs.length : 'no'} results for ${list.length} files`, { code: 'protocol' })
    }
    return list.map((f, i): [ManyFile, number | StoreError] => {
      const r = rs[i]
      if (r?.status === 201 && Number.isSafeInteger(r.version)) return [f, r.version]
      const status = typeof r?.status === 'number' ? r.status : undefined
      const msg = typeof r?.error === 'string' ? r.error : '(no message)'
      return [
        f,
        new StoreError(`cutpoint: the store at ${http.base} answered ${status ?? '?'} for '${f.name}': ${msg}`, {
          status,
          code: typeof r?.code === 'string' ? r.code : 'protocol',
          missing: Array.isArray(r?.missing) ? r.missing.filter((x: unknown) => typeof x === 'string') : undefined,
        }),
      ]
    })
  }

  private commitOk(f: ManyFile, version: number): void {
    const { run } = this
    const frames = f.compressedBytes + 36 * f.novelChunks
    f.version = version
    f.stage = 'done'
    f.result = {
      name: f.name,
      version,
      bytes: f.bytes,
      chunks: f.chunks,
      novelChunks: f.novelChunks,
      novelBytes: f.novelBytes,
      // The input's own frames and recipe; packs are shared (`packs` is the push's).
      sentBytes: frames + f.recipeBytes,
      packBytes: frames,
      compressedBytes: f.compressedBytes,
      compressedChunks: f.compressedChunks,
      packs: run.packs,
      recipeBytes: f.recipeBytes,
      parts: f.sink?.parts ?? 0,
      // Parts are sent by the shared pipeline: the push's count.
      partsSent: f.sink ? run.partsSent : 0,
      partsDelta: 0,
      basePartBytes: 0,
      // The push's id table (shared by the files; pushMany keeps every id: a batch commit may
      // read any file's chunks back).
      idsHeld: run.idsHeld,
      knownFromBase: 0,
      hintedChunks: 0,
      digest: f.digest!,
      dedupRatio: f.novelBytes ? f.bytes / f.novelBytes : Infinity,
      seconds: (performance.now() - this.t0) / 1000,
      profile: run.profile,
      hash: run.hash,
    }
    this.done++
    this.free(f)
    this.report(f, true)
  }

  private fail(f: ManyFile, e: StoreError): void {
    f.error = e
    f.stage = 'failed'
    this.failed++
    this.free(f)
    this.report(f, true)
  }

  private free(f: ManyFile): void {
    f.text = undefined
    f.sink?.free()
    f.sink = undefined
  }

  /** Progress of `f` (at most every 100 ms while it is being chunked). */
  private report(f: ManyFile, force = false): void {
    const on = this.opts.onProgress
    if (!on) return
    const now = performance.now()
    if (!force && now - this.lastReport < 100) return
    this.lastReport = now
    on({
      index: f.index,
      name: f.name,
      stage: f.stage,
      bytes: f.bytes,
      total: f.size,
      novelBytes: f.novelBytes,
      result: f.result,
      error: f.error,
      files: this.files.length,
      filesDone: this.done,
      filesFailed: this.failed,
      allBytes: this.run.bytes,
      sentBytes: this.run.sent,
    })
  }

  result(): PushManyResult {
    const { run } = this
    return {
      results: this.files.map((f) => f.result ?? { name: f.name, error: f.error ?? new StoreError('cutpoint: internal error: no result', { code: 'protocol' }) }),
      files: this.files.length,
      committed: this.done,
      failed: this.failed,
      bytes: run.bytes,
      novelBytes: run.novelBytes,
      compressedBytes: run.compressedBytes,
      compressedChunks: run.compressedChunks,
      sentBytes: run.sent,
      packs: run.packs,
      commitRequests: this.commitRequests,
      seconds: (performance.now() - this.t0) / 1000,
    }
  }

  async close(): Promise<void> {
    this.closed = true
    this.small?.close()
    this.small = undefined
    // In slices (`pause`), awaiting only the readers still open: an `await` per input of
    // 10,000 was one task of 20-50 ms as the push ended.
    for (const f of this.files) {
      this.free(f)
      await pause()
    }
    await this.reader.close()
    // Inputs opened ahead of a turn that never came (the push failed).
    for (const f of this.files) {
      const r = f.reader
      f.reader = undefined
      if (r) await r.close()
      await pause()
    }
  }
}

