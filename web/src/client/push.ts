// `push`: one input as the next version of a name, sending only the chunks the store lacks.
// A pipeline, as the native client's (native/store/src/client.rs `push_file`, whose stage
// functions have the same names as PushRun's methods: prepare, stageChunk, stageQuery,
// stagePack, stageUpload, stageCommit), in one event
// loop: the workers chunk and fingerprint (`chunk()`, ahead of this loop) → existence queries
// in batches of 2048 ids, up to MAX_QUERIES in flight, answered in order → the novel chunks
// read back from the input by offset (contiguous ones in one read) and framed into packs (the
// core's frame encoder) → uploads, `concurrency` in flight → the commit, a delta against the
// latest version when there is one (the core's encoder). Memory: the chunker's segments, the
// queries in flight, one pack being filled and `concurrency` packs in flight; never the file.
// Per chunk, as the native client: the recipe (36 bytes in wasm) and the id table (ids.ts,
// about 55-110 bytes a distinct id), which say what to commit and what was already asked;
// once the recipe is in parts, neither grows with the input (ID_TABLE_MAX).
// In a browser a File/Blob goes up heads first: each pack a Blob of its heads and slices of
// the input, so the novel chunks are not read back here at all (see HeadsFirstPack).
//
// The latest recipe of the name (same profile and fingerprint) is fetched first: its chunks are
// known present (not queried), it is the delta's base, and with `rapid` it gives the hints.
// The numbers (`novelChunks`, `novelBytes`, `sentBytes`, ...) are counted as `cutpoint push
// --json` counts them, and the packs are cut where it cuts them, so they are equal.
import { chunk, createChunker, type Chunk, type ChunkOptions, type WorkerPool } from '../index.js'
import type { Trial } from '../options.js'
import { readFrames } from '../emitter.js'
import { CRITERIA, type Criterion } from '../rapid.js'
import { hex, unhex, unhexInto } from '../hex.js'
import { parseProfile } from '../runtime.js'
import type { WasmBaseParts, WasmCompressSampler, WasmPartOut, WasmPartSink, WasmStoreRecipe } from '../../../common/wasm.js'
import type { CompressRes } from '../../../common/protocol.js'
import type { Pool } from '../pool.js'
import { pools } from '../workers.js'
import { checkAbort, StoreError, usage } from './errors.js'
import { BLOB_BODIES, Http, sleep, type StoreLimits } from './http.js'
import { isStream, openReader, StreamWindow, type PushInput, type RangeReader } from './input.js'
import { wire } from './wire.js'
import { pause } from './slice.js'
import { PushJournal, type Resumed } from './journal.js'
import { BASE, IdTable, KNOWN, NOVEL } from './ids.js'

export interface PushProgress {
  stage: 'chunking' | 'querying' | 'uploading' | 'committing' | 'done'
  /** Input bytes chunked so far (and the total when known). */
  bytes: number
  total?: number
  novelBytes: number
  sentBytes: number
  chunks: number
  novelChunks: number
  /** bytes / novelBytes (Infinity while nothing is novel). */
  dedupRatio: number
  /** Bytes per second processed. */
  throughput: number
  /** A push started again of a file whose earlier attempt the journal kept (browsers; see journal.ts). */
  resumed?: Resumed
}

export interface ChunkInfo {
  offset: number
  length: number
  /** The store lacked it and this push sent it (its first occurrence in the input). */
  novel: boolean
  /** Its end came from a RapidCDC hint. */
  hinted: boolean
}

export interface PushOptions {
  name: string
  /** RapidCDC with the name's latest recipe as hints: a criterion, or `true` for 'ff+rwt'. */
  rapid?: boolean | string
  signal?: AbortSignal
  onProgress?: (p: PushProgress) => void
  /** The chunks in file order, in batches, once the store's answer says which are novel. */
  onChunks?: (c: ChunkInfo[]) => void
}

export interface PushResult {
  name: string
  version: number
  bytes: number
  chunks: number
  novelChunks: number
  novelBytes: number
  /** Every request body sent, as `cutpoint push --json`'s `sent_bytes`: queries, packs, the commit. */
  sentBytes: number
  /** Of which pack bodies (chunk data and framing). */
  packBytes: number
  /**
   * The novel chunks' data as it travelled in packs (without the framing): compressed where that
   * saved, raw otherwise (as `cutpoint push --json`'s `compressed_bytes`; with compression off,
   * the novel bytes).
   */
  compressedBytes: number
  /** Novel chunks sent compressed (`compressed_chunks`). */
  compressedChunks: number
  packs: number
  /** Commit body bytes (every attempt). */
  recipeBytes: number
  /** The version the commit was a delta against (absent: the whole recipe was sent). */
  deltaBase?: number
  /** Recipe parts the commit named (0: committed whole; PROTOCOL.md 3.7), and of them those uploaded. */
  parts: number
  partsSent: number
  /**
   * Of the parts uploaded, those sent as part deltas against a part of the base version
   * (PROTOCOL.md 3.8; `parts_delta`), and the bytes of base parts read (`base_part_bytes`).
   */
  partsDelta: number
  basePartBytes: number
  /**
   * The most chunk ids the push's id table held at once (a bound, not a size: at most
   * ID_TABLE_MAX of the input's plus the base recipe's and the journal's, once the recipe is in
   * parts; as `cutpoint push --json`'s `ids_held` counts its own).
   */
  idsHeld: number
  /** Chunks known present from the base recipe (not queried). */
  knownFromBase: number
  hintedChunks: number
  digest: string
  dedupRatio: number
  seconds: number
  profile: string
  hash: string
  /**
   * Browsers, a File/Blob input: an earlier attempt of this push (the same store, namespace, name,
   * file, profile, fingerprint) was cut off, and its journal gave the chunks the store had
   * acknowledged in packs: not queried again (the commit still checks them all).
   */
  resumed?: Resumed
}

/** What a client gives each push. */
export interface PushContext {
  http: Http
  profile: string
  hash: 'blake3' | 'sha256'
  /** Workers of the chunker (a kept pool when free). */
  chunkOptions(): Promise<{ opts: ChunkOptions; release(): void }>
  /** Uploads in flight; default 2, or HEADS_FIRST_CONCURRENCY for a heads-first push. */
  concurrency?: number
  /** Pack size to aim at; default PACK_SIZE, or HEADS_FIRST_PACK_SIZE for a heads-first push. */
  packSize?: number
  /** Compression of the novel chunks where the store lists `zstd` (default 'off'). */
  compression?: Compression
  /** The workers that compress (a client's pool, leased for one push); needed unless 'off'. */
  compressor?(): Promise<{ pool: Pool; release(): void }>
}

/** `createClient({ compression })`, as `cutpoint push --compression`. */
export type Compression = 'auto' | 'off' | 'max'
export const COMPRESSIONS: readonly string[] = ['auto', 'off', 'max']

const BATCH = 2048
const MAX_QUERIES = 2
/**
 * The most ids of the input a push's id table holds once its recipe is in parts (issue #32):
 * then the table is replaced by a fresh one (the base's and the journal's ids added again), so
 * its memory stays flat at any input size. An id met again after that is asked about again
 * (32 bytes); a commit in parts never reads chunks back by id, so nothing else needs them.
 */
export const ID_TABLE_MAX = 1 << 16
// Novel chunks are read back in runs of up to this many bytes: in Chromium every read of a File
// is a round trip to the blob system, and 16 MiB reads ran at about twice the speed of 4 MiB
// ones (AMD EPYC Zen 3); one run is held while it is framed.
const MAX_READ = 16 << 20
// In browsers a pack body is a Blob: Chromium uploads a Uint8Array body about 10x slower than a
// Blob (measured with 256 MiB in 8 MiB packs: 24 s vs 2.3 s).
// - A File/Blob input goes up heads first (PROTOCOL.md §2): a pack's body is a Blob of its heads
//   and slices of the input, so novel chunks are neither read back into script nor copied; the
//   browser reads them from the file as it uploads. Uploading 1 GiB this way took as long as
//   uploading the File's own slices (7.2-8.1 s either way, browser-profile.mjs uptoc/upfile),
//   where a Blob of frame heads interleaved with per-chunk slices took 77 s (Chromium 156).
// - Other inputs are framed into one buffer kept for the whole push (the Blob copies it): a
//   fresh 8 MiB array per pack cost more than the copying itself (allocation and first touch),
//   and a Blob of the frames as separate parts was slower still.

// Heads-first packs in flight cost no memory here (their data are slices of the file), and
// Chromium's uploads keep the pipeline waiting with only 2 in flight: a 1 GiB first push took
// 14.7-15.9 s with 4 against 17.8-18.5 s with 2 (6: 16.5 s, 8: 14.9 s; AMD EPYC Zen 3, 2 vCPUs,
// browser-profile.mjs push with PCONC). The native push gained nothing from 4 (6.3-6.5 s vs
// 6.4-7.3 s), so its default stays 2.
const HEADS_FIRST_CONCURRENCY = 4
// Chromium's CPU per uploaded byte falls with the request's size: fetch POSTs of a 1 GiB File's
// own slices, 2 in flight, took 3.04-3.88 s in 8 MiB slices against 2.51-3.08 s in 64 MiB ones
// (Intel Xeon family 6 model 207, 2 vCPUs; browser-profile.mjs upfile-8,upfile-64 alternating),
// and a first push of it in 32 MiB packs 6.93-7.96 s (median 7.34) against 7.48-8.61 s (7.73)
// in 8 MiB ones (push-8,push-32, 5 rounds). Heads-first packs cost the page no memory whatever
// their size; a pack cut off by a dropped connection is sent again whole.
const HEADS_FIRST_PACK_SIZE = 32 << 20
const PACK_SIZE = 8 << 20
// A heads-first push's chunking (`headsFirstChunking`): the page's push of a 1 GiB File (2
// workers, web/app in Chromium 156) added 213-258 MiB to Chromium's processes in 16 MiB spans
// with 2 jobs ahead per worker (a worker held up to 5 slices of 16 MiB, and made 5-7 buffers),
// and 144-158 MiB in 8 MiB spans with 1 ahead (3 slices at most); the native push's time over
// the page's, medians, 0.38 before and 0.39 after (16 reps each, alternating; AMD EPYC Zen 4,
// 2 vCPUs, loaded; `node bench/harness/browser-push.mjs --size 1g --reps 3`). 8 MiB spans with
// 2 ahead: 157-185 MiB; 16 MiB spans with 1 ahead: 174-207 MiB.
const HEADS_FIRST_SPAN = 8 << 20
const HEADS_FIRST_AHEAD = 1

/** Chunks a compression job takes at least (fewer jobs than workers for a small group). */
const MIN_COMPRESS_JOB = 32
/** Compression jobs' buffers kept for reuse in a browser, and the largest kept (bytes). */
const JOB_BUFFERS = 8
const JOB_BUFFER_MAX = 4 << 20
/** Compression groups read and compressed ahead of the one being framed (each at most COMPRESS_GROUP chunks). */
const GROUPS_AHEAD = 4

/** A group tried ahead: its bytes where read (framed packs), and the frames of its first `n` chunks. */
interface Tried {
  raws?: Uint8Array[]
  n: number
  frames: Frame[]
}

/** A novel chunk's frame data: compressed, or its raw bytes (undefined: not read, a slice of a heads-first input). */
interface Frame {
  data?: Uint8Array
  compressed: boolean
}

/** A chunk as pushMany's workers give it: its id as the digest's bytes (no `hash` text). */
export interface IdChunk extends Chunk {
  id?: Uint8Array
}

interface Novel {
  off: number
  len: number
  /** The id's bytes: `raw[at .. at + 32]` (the id table's array). */
  raw: Uint8Array
  at: number
}

/** The base: the latest recipe of the name, if it has this profile and fingerprint. */
interface Base {
  version: number
  recipe: WasmStoreRecipe
  text: Uint8Array
}

/** What the options say, checked before anything is asked. */
export interface Checked {
  name: string
  profile: string
  maxChunk: number
  criterion?: Criterion
}

/** A closed recipe part on its way: sent once every pack holding its novel chunks is answered. */
interface PendingPart {
  part: WasmPartOut
  /** The push's chunk count when the part closed: its chunks are the ones before. */
  upto: number
  /** Packs that must be answered first (`ackedThrough` ≥ this); unset while a query of its chunks is unanswered. */
  need?: number
}

function checkOptions(ctx: PushContext, opts: PushOptions): Checked {
  if (!opts || typeof opts !== 'object') throw usage('push needs options with a name: push(input, { name })')
  const { name } = opts
  if (typeof name !== 'string') throw usage(`push needs a name (got ${typeof name})`)
  try {
    wire().validateName(name)
  } catch (e: any) {
    throw usage(e?.message ?? String(e))
  }
  const { profile, maxChunk } = checkProfile(ctx)
  let criterion: Criterion | undefined
  if (opts.rapid === true) criterion = 'ff+rwt'
  else if (typeof opts.rapid === 'string') {
    if (!CRITERIA.includes(opts.rapid as Criterion)) throw usage(`rapid must be one of ${CRITERIA.join(', ')} (got '${opts.rapid}')`)
    criterion = opts.rapid as Criterion
  } else if (opts.rapid !== undefined && opts.rapid !== false) throw usage(`rapid must be a boolean or a criterion (got ${typeof opts.rapid})`)
  return { name, profile, maxChunk, criterion }
}

/** The client's profile, canonical, and its largest chunk. */
export function checkProfile(ctx: PushContext): { profile: string; maxChunk: number } {
  try {
    const pr = parseProfile(ctx.profile)
    return { profile: pr.canonical, maxChunk: pr.max }
  } catch (e: any) {
    throw new StoreError(e?.message ?? String(e), { code: 'usage' })
  }
}

/**
 * Pushes one input as the next version of a name. The stages, each its own method of PushRun
 * (the same names as native/store/src/client.rs `push_file`'s functions): prepare → stageChunk →
 * stageQuery → stagePack (reads the novel chunks back) → stageUpload → stageCommit.
 */
export async function push(ctx: PushContext, input: PushInput, opts: PushOptions): Promise<PushResult> {
  const t0 = performance.now()
  const checked = checkOptions(ctx, opts)
  const userSignal = opts.signal
  checkAbort(userSignal)
  // Every request and step of this push watches `signal`: aborted by the caller's signal, and
  // by the push itself when it fails (the uploads still in flight are stopped).
  const inner = new AbortController()
  const onUserAbort = () => inner.abort(userSignal!.reason)
  userSignal?.addEventListener('abort', onUserAbort, { once: true })
  const run = new PushRun(ctx, opts, checked, inner.signal, t0)
  run.forgetIds = true
  run.useBaseParts = true
  run.trialAhead = true
  try {
    run.progress(true)
    try {
      const chunkOpts = await run.prepare(input)
      run.stage = 'chunking'
      await run.stageChunk(input, chunkOpts)
      run.stage = 'querying'
      run.progress(true)
      await run.finishQueries()
      run.endInput()
      run.stage = 'uploading'
      run.progress(true)
      await run.finishUploads()
      await run.reader!.unchanged()
      return await run.stageCommit()
    } finally {
      await run.close()
    }
  } catch (e) {
    await run.journal?.failed(e, !!userSignal?.aborted)
    throw e
  } finally {
    userSignal?.removeEventListener('abort', onUserAbort)
    if (!run.succeeded) inner.abort(new StoreError('cutpoint: the push failed', { code: 'aborted' }))
  }
}

/** One push's state: the counters (the native report's fields) and what each stage holds. */
export class PushRun {
  readonly http: Http
  readonly hash: 'blake3' | 'sha256'
  readonly name: string
  readonly profile: string
  // Counters.
  bytes = 0
  chunks = 0
  novelChunks = 0
  novelBytes = 0
  sent = 0
  packBytes = 0
  packs = 0
  knownFromBase = 0
  hinted = 0
  total?: number
  stage: PushProgress['stage'] = 'querying'
  private lastReport = 0
  succeeded = false
  journal?: PushJournal
  // prepare: the base, every id met (the base recipe's, the journal's, the input's, where each
  // first occurs), the pack limits, the input's reader, the recipe being built.
  base?: Base
  latest = 0
  table = new IdTable()
  /** Ids the table held at most, and those put in before the input (the base's, the journal's). */
  idsHeld = 0
  private seeded = 0
  /** push() (one input): the table may be replaced once the recipe is in parts (ID_TABLE_MAX). */
  forgetIds = false
  /**
   * push() (one input): a base version committed in parts has its parts read in a window as
   * the input is chunked (`partBase`): their ids are not queried, and the new parts go as part
   * deltas against them.
   */
  useBaseParts = false
  /**
   * push() (one input): a heads-first push with compression and no base has its compression
   * sample tried by the hash jobs (`trialOptions`), where the chunks' bytes are at hand.
   */
  trialAhead = false
  /** The hash jobs' trial frames (Chunk.trial) by the chunk's offset, until its group is settled. */
  private trials = new Map<number, { len: number; out: Uint8Array }>()
  /** The latest version's stored text where it names parts (`fetchBase`), until `prepare` opens the window on it. */
  private partsText?: Uint8Array
  /** The window on the base version's parts (the core's `PartWindow`). */
  partBase?: WasmBaseParts
  source?: Blob
  packSize = 0
  maxCount = 0
  reader?: RangeReader
  window?: StreamWindow
  recipe?: WasmStoreRecipe
  rapidRecipe?: Uint8Array
  private release?: () => void
  // stageQuery: the ids to ask about next, the queries in flight, the chunks not yet reported.
  /** Ids a query asks about (BATCH; pushMany in a browser asks in smaller batches, `setQueryBatch`). */
  private batch = BATCH
  private ask = 0
  private askBuf = new Uint8Array(BATCH * 32)
  private askFrom = -1
  private readonly queries: { p: Promise<Uint8Array>; n: number; from: number; upto: number; end: number; table: IdTable }[] = []
  private readonly infos: { offset: number; length: number; id: number; hinted: boolean; table: IdTable }[] = []
  // stagePack / stageUpload: the pack being filled, the uploads in flight, the first failure.
  private pack?: HeadsFirstPack | PackBuffer
  private concurrency = 2
  private packNovel: Novel[] = []
  private packCount = 0
  readonly inflight = new Set<Promise<void>>()
  failure: unknown
  // Recipe parts (PROTOCOL.md 3.7): the store's limits and features, the current input's part
  // sink, the parts closed and not yet sent, and which packs the store has answered (a part is
  // sent once every pack that may hold its novel chunks is).
  limits: StoreLimits = {}
  sink?: WasmPartSink
  /** The file digest of a recipe in parts (sealed when its input ends). */
  partsDigest?: string
  parts = 0
  partsSent = 0
  partsDelta = 0
  /** Where the input being chunked starts in the push's offsets (pushMany: the inputs end to end). */
  fileBase = 0
  /** pushMany: told of each chunk batch (per-file counts) and of each novel chunk's offset. */
  onBatch?: (chunks: number, bytes: number) => void
  onNovel?: (off: number, len: number) => void
  private pendingParts: PendingPart[] = []
  private packSeq = 0
  private ackedThrough = 0
  private readonly acked = new Set<number>()
  // stagePack's compression: the zstd level (undefined: off), the core's sampler over the
  // push's groups, the workers that compress (leased), the counters.
  private level?: number
  private sampler?: WasmCompressSampler
  private zpool?: Pool
  private zrelease?: () => void
  private zown?: Promise<Pool>
  compressedBytes = 0
  compressedChunks = 0
  /** Novel chunks whose frames came from the hash jobs' trials (not read again; `trialFrames`). */
  trialsUsed = 0
  /** Compression jobs' buffers the workers gave back (browsers: `jobBuffer`). */
  private jobBuffers: ArrayBuffer[] = []
  /** pushMany: told of each novel chunk's frame (its offset, the bytes that travel, compressed). */
  onFrame?: (off: number, stored: number, compressed: boolean) => void

  constructor(
    readonly ctx: PushContext,
    readonly opts: PushOptions,
    private readonly checked: Checked,
    readonly signal: AbortSignal,
    private readonly t0: number,
  ) {
    this.http = ctx.http
    this.hash = ctx.hash
    this.name = checked.name
    this.profile = checked.profile
  }

  progress(force = false): void {
    if (!this.opts.onProgress) return
    const now = performance.now()
    if (!force && now - this.lastReport < 100) return
    this.lastReport = now
    const secs = (now - this.t0) / 1000
    this.opts.onProgress({
      stage: this.stage,
      bytes: this.bytes,
      total: this.total,
      novelBytes: this.novelBytes,
      sentBytes: this.sent,
      chunks: this.chunks,
      novelChunks: this.novelChunks,
      dedupRatio: this.novelBytes ? this.bytes / this.novelBytes : Infinity,
      throughput: secs > 0 ? this.bytes / secs : 0,
      resumed: this.journal?.resumed,
    })
  }

  /**
   * Before the input is chunked: the base recipe and the store's limits (asked together), the
   * pack layout, the journal, the input's reader and the chunker's options.
   */
  async prepare(input: PushInput): Promise<ChunkOptions> {
    const { http, signal, name, profile, hash } = this
    // The store's pack limit, asked while the base recipe is fetched.
    const limits = http.limits(signal)
    limits.catch(() => {}) // awaited below, unless the recipe's request fails first
    await this.fetchBase()
    // Heads-first packs (a File/Blob in a browser) or framed ones, aimed within the store's
    // limit; decided before anything is opened or leased (a limit too small is an error here).
    this.setLimits(BLOB_BODIES && typeof Blob !== 'undefined' && input instanceof Blob ? input : undefined, await limits)
    this.openPartBase()
    // The journal (browsers, File/Blob): what an earlier attempt had stored is known present.
    this.journal = await PushJournal.open({ store: http.base, namespace: http.ns, name, profile, hash }, input, () => ({
      stage: this.stage,
      bytes: this.bytes,
      chunks: this.chunks,
      novelBytes: this.novelBytes,
    }))
    if (this.journal) for (const seg of this.journal.known) this.table.addAll(seg, KNOWN)
    this.seeded = this.idsHeld = this.table.count

    if (isStream(input)) this.reader = this.window = new StreamWindow()
    else {
      const o = await openReader(input as Blob | Uint8Array | string)
      this.reader = o.reader
      this.total = o.size
    }
    this.checkLimits(this.total)
    const criterion = this.checked.criterion
    this.recipe = criterion ? undefined : new (wire().StoreRecipe)(profile, hash)
    this.sink = this.newSink()
    const chunkOpts = await this.chunkOptions()
    this.trialOptions(chunkOpts)
    this.headsFirstChunking(chunkOpts)
    if (criterion) chunkOpts.rapid = { criterion, base: this.base?.text, recipe: true, hinted: true }
    return chunkOpts
  }

  /**
   * The store's limits and the pack layout within them: heads first from `source` (a File/Blob
   * in a browser), else framed; `concurrency` uploads in flight.
   */
  setLimits(source: Blob | undefined, lim: StoreLimits): void {
    this.limits = lim
    this.source = source
    this.packSize = fitPack(this.ctx.packSize ?? (source ? HEADS_FIRST_PACK_SIZE : PACK_SIZE), this.checked.maxChunk, lim)
    // Chunks per pack within the store's count, in either layout (the core's rule).
    this.maxCount = wire().fitPackChunks(lim.maxPackChunks)
    this.level = this.compressionLevel(lim)
    if (this.level !== undefined) this.sampler ??= new (wire().CompressSampler)()
    const header = wire().packHeader(this.hash, source !== undefined, this.level !== undefined)
    this.pack = source ? new HeadsFirstPack(header, source) : new PackBuffer(header, this.packSize)
    this.concurrency = this.ctx.concurrency ?? (source ? HEADS_FIRST_CONCURRENCY : 2)
  }

  /**
   * A first push (no base, nothing resumed) of a File/Blob heads first with compression: the hash
   * jobs also compress the chunks the sampler will try once a group of novel chunks is found to
   * compress nothing (the first SAMPLE of every COMPRESS_GROUP chunks; where every chunk is
   * novel, those are the ones), so that they are not read from the file again, each a round trip
   * to the browser's blob system (450 reads of a 1 GiB push of random bytes: 0.6-0.9 CPU s of
   * Chromium's, loaded). A chunk tried there is not compressed again wherever the sampler
   * asks for it (a group tried whole takes its first SAMPLE from there too); one it asks for
   * that was not tried is read and compressed as before; one it does not ask for (known
   * present, or raw by the sampler's rule) costs its compression only.
   */
  private trialOptions(chunkOpts: ChunkOptions): void {
    if (!this.trialAhead || !this.source || this.level === undefined || this.checked.criterion || this.base || this.partBase || this.journal?.resumed) return
    const [every, first] = wire().compressGroupSizes()
    ;(chunkOpts as { trial?: Trial }).trial = { level: this.level, every, first }
  }

  /**
   * A heads-first push (a File/Blob in a browser) chunks in spans of HEADS_FIRST_SPAN with
   * HEADS_FIRST_AHEAD jobs ahead per worker: there each stage-1 job ahead and each hash job
   * pending holds its span of the file in a worker (the workers read the File once), and the
   * uploads, not the chunking, set the pace of a first push. Not RapidCDC's (it reads the input
   * in this thread, in spans of its own). The same chunks whatever the span.
   */
  private headsFirstChunking(chunkOpts: ChunkOptions): void {
    if (!this.source || this.checked.criterion) return
    chunkOpts.span ??= HEADS_FIRST_SPAN
    ;(chunkOpts as { ahead?: number }).ahead = HEADS_FIRST_AHEAD
  }

  /** The chunker's options (the client's workers, leased until `close`). */
  async chunkOptions(): Promise<ChunkOptions> {
    const { opts: chunkOpts, release } = await this.ctx.chunkOptions()
    this.release = release
    chunkOpts.profile = this.profile
    chunkOpts.hash = this.hash
    this.compressionPool(chunkOpts)
    return chunkOpts
  }

  /**
   * The zstd level where the option asks for compression and the store lists `zstd` (an older
   * store: undefined, off).
   */
  private compressionLevel(lim: StoreLimits): number | undefined {
    const mode = this.ctx.compression ?? 'off'
    if (mode === 'off' || !lim.features?.includes('zstd') || !this.ctx.compressor) return undefined
    return wire().compressionLevel(mode)
  }

  /**
   * The workers that compress (once the chunker's options are known): the chunker's where the
   * push has the client's kept pool (no more workers, and their memory, than chunking needs);
   * else the client's compression workers (`ownCompressionPool`, when first needed). RapidCDC
   * may never start the chunker's workers: its pushes use the client's.
   */
  private compressionPool(chunkOpts: ChunkOptions): void {
    if (this.level === undefined || this.zpool) return
    const kept = chunkOpts.pool && !this.checked.criterion ? pools.get(chunkOpts.pool) : undefined
    if (!kept) return
    this.zpool = kept
    this.zrelease = kept.lease()
  }

  /** The client's compression workers for this push (instead of the chunker's), leased once. */
  private ownCompressionPool(): Promise<Pool> {
    return (this.zown ??= (async () => {
      const z = await this.ctx.compressor!()
      this.zrelease?.()
      this.zrelease = z.release
      return (this.zpool = z.pool)
    })())
  }

  /**
   * Check before sending (PROTOCOL.md 5.1 step 6): a store that takes parts must take a part of
   * one chunk; a store without parts must take the shortest recipe a `len`-byte input can have.
   */
  checkLimits(len: number | undefined): void {
    const { maxRecipe, features } = this.limits
    if (maxRecipe === undefined) return
    if (features?.includes('parts')) {
      const need = wire().minPartText(this.hash)
      if (need > maxRecipe / 4) {
        throw new StoreError(`cutpoint: the store's max_recipe_bytes (${maxRecipe}) is too small for a recipe part of one chunk (${need} bytes, a quarter of the limit); nothing was sent`, { code: 'usage' })
      }
      return
    }
    if (len === undefined) return
    const floor = wire().recipeFloor(len, this.checked.maxChunk)
    if (floor > maxRecipe) {
      throw new StoreError(
        `cutpoint: this file's recipe would be at least ${floor} bytes, over the store's max_recipe_bytes of ${maxRecipe}, and the store takes no recipe parts; nothing was sent`,
        { status: 413, code: 'too_large' },
      )
    }
  }

  /** A commit body over the store's `max_recipe_bytes` is refused here, before it is sent. */
  checkCommit(text: Uint8Array): void {
    const max = this.limits.maxRecipe
    if (max !== undefined && text.length > max) {
      throw new StoreError(`cutpoint: the commit of '${this.name}' is ${text.length} bytes, over the store's max_recipe_bytes of ${max}; its chunks were sent, nothing was committed`, {
        status: 413,
        code: 'too_large',
      })
    }
  }

  /**
   * The window on the base version's parts (PROTOCOL.md 5.1 step 5), where the latest version
   * was committed in parts with this profile and fingerprint, this push commits in parts too
   * (the store lists `parts`), and it is push()'s one input. Part deltas only where the store
   * lists `part-delta`. A stored text that does not parse is no base (its parts are not read).
   */
  private openPartBase(): void {
    const text = this.partsText
    this.partsText = undefined
    const features = this.limits.features ?? []
    if (!text || !this.useBaseParts || !features.includes('parts')) return
    try {
      this.partBase = wire().BaseParts.of(text, this.profile, this.hash, features.includes('part-delta'))
    } catch {
      this.partBase = undefined
    }
  }

  /**
   * Keeps the window on the base's parts from WINDOW bytes before the open part's start (its
   * delta's base) to WINDOW bytes past the chunks up to `upto`: the parts that leave it are
   * dropped, those that enter it are read (`GET parts/{id}`), each kept only if it hashes to its
   * id (a part that cannot be read or does not match is skipped: its chunks are queried).
   */
  private async advancePartBase(upto: number): Promise<void> {
    const base = this.partBase!
    const { http, signal } = this
    const win = wire().BaseParts.windowBytes()
    const lo = Math.max(0, this.sink!.partStart - win)
    for (const i of base.advance(lo, upto + win)) {
      const id = base.lineId(i)
      let text: Uint8Array
      try {
        text = await http.requestRead('GET', http.url(`parts/${id}`), { retry: true, signal }, async (r) => new Uint8Array(await r.arrayBuffer()))
      } catch (e) {
        checkAbort(signal)
        base.skip()
        continue
      }
      try {
        base.load(i, text)
      } catch {
        // Not the part its id names: skipped (counted in `unreadable`).
      }
    }
  }

  /** A part sink for the next input: cuts its recipe into parts where the store takes them. */
  newSink(): WasmPartSink {
    return new (wire().PartSink)(this.profile, this.hash, this.limits.maxRecipe, !!this.limits.features?.includes('parts'))
  }

  /** The name's latest recipe: the base if it has this profile and fingerprint. */
  private async fetchBase(): Promise<void> {
    const { http, signal, name } = this
    // A damaged latest recipe (the store's code `damaged`) is no base: the whole recipe is sent.
    const got = await http
      .requestRead('GET', http.fileUrl('recipes', name, undefined, true), { retry: true, signal, pass: [404] }, async (res) => {
        if (res.status !== 200) {
          await res.body?.cancel()
          return undefined
        }
        return { res, text: new Uint8Array(await res.arrayBuffer()) }
      })
      .catch((e) => {
        if (e instanceof StoreError && e.code === 'damaged') return undefined
        throw e
      })
    if (!got) return
    const { res, text } = got
    this.latest = Number(res.headers.get('x-cutpoint-version'))
    if (!Number.isSafeInteger(this.latest) || this.latest < 1) throw new StoreError('cutpoint: the recipe came without its version (X-Cutpoint-Version)', { code: 'protocol' })
    // A version committed in parts is no base for a delta commit, and its ids are not held
    // here: push() reads its parts in a window as the input is chunked (`openPartBase`), and its
    // unchanged parts are found present by `parts/query`.
    if (wire().recipeHasParts(text)) {
      this.partsText = text
      return
    }
    let rec: WasmStoreRecipe
    try {
      rec = wire().StoreRecipe.parse(text)
    } catch (e: any) {
      throw new StoreError(`cutpoint: the store's recipe of '${name}': ${e?.message ?? e}`, { code: 'protocol' })
    }
    if (rec.profile === this.profile && rec.hash === this.hash) {
      this.base = { version: this.latest, recipe: rec, text }
      for (let i = 0; i < rec.count; i += 65536) this.table.addAll(rec.ids(i, i + 65536), KNOWN | BASE)
    } else rec.free()
  }

  /** Chunks and fingerprints the input in the workers, each batch on to stageQuery. */
  async stageChunk(input: PushInput, chunkOpts: ChunkOptions): Promise<void> {
    const signal = this.signal
    if (!isStream(input)) {
      const it = chunk(input as Blob | Uint8Array | string, chunkOpts)
      for await (const b of it.batches()) await this.stageQuery(b)
      this.rapidRecipe = it.rapid?.recipe
      return
    }
    const ch = await createChunker(chunkOpts)
    const rd = input.getReader()
    const onAbort = () => rd.cancel(signal.reason).catch(() => {})
    signal.addEventListener('abort', onAbort, { once: true })
    // One piece read ahead: the stream's source works while this piece is chunked and queried.
    let next: Promise<ReadableStreamReadResult<Uint8Array>> | undefined = rd.read()
    let ok = false
    try {
      for (;;) {
        const { done, value } = await next!
        next = undefined
        checkAbort(signal)
        if (done) break
        next = rd.read()
        next.catch(() => {})
        this.window!.add(value)
        await this.stageQuery(await ch.update(value))
      }
      await this.stageQuery(await ch.finish())
      this.rapidRecipe = ch.rapid?.recipe
      ok = true
    } finally {
      signal.removeEventListener('abort', onAbort)
      ch.close()
      // A read still pending (the push failed): cancel the stream, which ends it, then let go.
      if (!ok && next) await rd.cancel().catch(() => {})
      rd.releaseLock()
    }
  }

  /** Queries of `n` ids (1 ≤ n ≤ BATCH), set before the first chunk. */
  setQueryBatch(n: number): void {
    if (this.ask || this.queries.length) throw new Error('cutpoint: setQueryBatch after the first query')
    this.batch = Math.max(1, Math.min(BATCH, Math.floor(n)))
    this.askBuf = new Uint8Array(this.batch * 32)
  }

  /**
   * A batch of chunks: into the recipe and the id table; the ids not known present are asked
   * about in batches of BATCH (or `setQueryBatch`'s), up to MAX_QUERIES in flight, answered in order (`answerQuery`).
   */
  async stageQuery(batch: Chunk[]): Promise<void> {
    if (this.failure) throw this.failure
    checkAbort(this.signal)
    if (!batch.length) return
    const { opts } = this
    let table = this.table
    // Every id decoded once, here: the recipe, the queries and the pack heads use these bytes
    // (pushMany's chunks from its workers carry them as bytes: no hex on the page's thread).
    const ids = new Uint8Array(batch.length * 32)
    batch.forEach((c: IdChunk, i) => (c.id ? ids.set(c.id, i * 32) : unhexInto(c.hash!, ids, i * 32)))
    const sizes = Uint32Array.from(batch, (c) => c.length)
    // The base's parts near these chunks: ids found there are present, not asked about.
    let inBase: Uint8Array | undefined
    if (this.partBase) {
      const last = batch[batch.length - 1]
      await this.advancePartBase(last.offset + last.length)
      checkAbort(this.signal)
      inBase = this.partBase.known(ids)
    }
    if (this.recipe) this.recipe.add(ids, sizes)
    // A part these chunks close gets its delta now, while its base is in the window (a part
    // closed before the recipe passes the parts threshold waits in the sink until then).
    const inParts = this.partBase ? this.sink?.addWith(ids, sizes, this.partBase) : this.sink?.add(ids, sizes)
    const bytesBefore = this.bytes
    for (let i = 0; i < batch.length; i++) {
      const c = batch[i]
      this.bytes += c.length
      this.chunks++
      if (c.hinted) this.hinted++
      const id = table.add(ids, i * 32)
      table.place(id, this.fileBase + c.offset, c.length)
      let f = table.flags[id]
      if (f & BASE || inBase?.[i]) this.knownFromBase++
      if (inBase?.[i]) f = table.flags[id] = f | KNOWN
      if (!(f & KNOWN)) {
        table.flags[id] = f | KNOWN
        if (this.askFrom < 0) this.askFrom = c.offset
        this.askBuf.set(ids.subarray(i * 32, i * 32 + 32), this.ask * 32)
        this.ask++
      }
      if (c.trial) this.trials.set(this.fileBase + c.offset, { len: c.length, out: c.trial })
      if (opts.onChunks) this.infos.push({ offset: c.offset, length: c.length, id, hinted: !!c.hinted, table })
      if (this.ask >= this.batch) {
        this.sendQuery()
        while (this.queries.length > MAX_QUERIES) await this.answerQuery()
      }
      if (table.count - this.seeded >= ID_TABLE_MAX && this.forgetAsked()) {
        table = this.table
        while (this.queries.length > MAX_QUERIES) await this.answerQuery()
      }
    }
    if (table.count > this.idsHeld) this.idsHeld = table.count
    this.onBatch?.(batch.length, this.bytes - bytesBefore)
    if (inParts) this.takeParts()
    if (!this.queries.length && !this.ask) {
      this.emitInfos(this.chunks)
      this.window?.release(this.bytes)
      this.assignParts(this.chunks)
    }
    this.progress()
  }

  /**
   * Flat memory at any input size: once the recipe is in parts (no commit reads a chunk back by
   * its id then) and the table holds ID_TABLE_MAX ids of the input, the ids asked so far are
   * sent (their queries keep the table they were asked from) and a fresh table takes over, the
   * base's and the journal's ids put in again.
   */
  private forgetAsked(): boolean {
    if (!this.forgetIds || !this.sink?.inParts || this.table.count - this.seeded < ID_TABLE_MAX) return false
    if (this.table.count > this.idsHeld) this.idsHeld = this.table.count
    this.sendQuery()
    const t = new IdTable()
    if (this.base) for (let i = 0; i < this.base.recipe.count; i += 65536) t.addAll(this.base.recipe.ids(i, i + 65536), KNOWN | BASE)
    if (this.journal) for (const seg of this.journal.known) t.addAll(seg, KNOWN)
    this.table = t
    this.seeded = t.count
    return true
  }

  /** The recipe is in parts: the whole one is not kept; the parts closed so far wait to be sent. */
  private takeParts(): void {
    const sink = this.sink!
    if (this.recipe) {
      this.recipe.free()
      this.recipe = undefined
    }
    for (let p = sink.takePart(); p; p = sink.takePart()) {
      this.pendingParts.push({ part: p, upto: this.chunks })
      this.parts++
    }
  }

  /**
   * The input is chunked: a recipe in parts is sealed (its file digest; its last part closed
   * and queued). Returns the digest, or undefined for a recipe committed whole.
   */
  endInput(): string | undefined {
    if (!this.sink?.inParts) return undefined
    const digest = (this.partsDigest = this.partBase ? this.sink.sealWith(this.partBase) : this.sink.seal())
    this.takeParts()
    if (!this.queries.length && !this.ask) this.assignParts(this.chunks)
    return digest
  }

  /**
   * The queries of the chunks before `upto` are answered and their novel chunks are in packs:
   * the parts closed by then need those packs answered (the one being filled too, if it holds
   * any chunk), then they go (`flushParts`).
   */
  private assignParts(upto: number): void {
    for (const p of this.pendingParts) if (p.need === undefined && p.upto <= upto) p.need = this.packSeq + (this.packCount ? 1 : 0)
    this.flushParts()
  }

  /** The parts whose packs are all answered: sent (those the store lacks), among the uploads in flight. */
  private flushParts(): void {
    const ready: WasmPartOut[] = []
    this.pendingParts = this.pendingParts.filter((p) => {
      const go = p.need !== undefined && this.ackedThrough >= p.need
      if (go) ready.push(p.part)
      return !go
    })
    if (!ready.length) return
    const p: Promise<void> = this.sendParts(ready)
      .catch((e) => {
        this.failure ??= e
        throw e
      })
      .finally(() => this.inflight.delete(p))
    p.catch(() => {})
    this.inflight.add(p)
  }

  /** `parts/query` for these parts, then `POST parts` of each the store lacks (create-only: safe to retry). */
  private async sendParts(parts: WasmPartOut[]): Promise<void> {
    const { http, signal } = this
    const max = wire().maxQueryIds()
    try {
      for (let i = 0; i < parts.length; i += max) {
        const some = parts.slice(i, i + max)
        const ids = new Uint8Array(some.length * 32)
        some.forEach((p, j) => unhexInto(p.id, ids, j * 32))
        const body = wire().queryEncode(ids)
        this.sent += ids.length
        const missing = await http.requestRead('POST', http.url('parts/query'), { body, retry: true, signal }, async (r) => {
          const b = new Uint8Array(await r.arrayBuffer())
          try {
            return wire().queryDecode(b, some.length)
          } catch (e: any) {
            throw new StoreError(`cutpoint: the store's parts/query answer: ${e?.message ?? e}`, { code: 'protocol' })
          }
        })
        const lacking = new Set<string>()
        for (let j = 0; j < missing.length; j += 32) lacking.add(hex(missing.subarray(j, j + 32)))
        for (const p of some) {
          if (!lacking.has(p.id)) continue
          checkAbort(signal)
          await this.sendPart(p)
          this.partsSent++
        }
      }
    } finally {
      for (const p of parts) p.free()
    }
  }

  /**
   * `POST parts` of one part: its part delta where it has one (PROTOCOL.md 3.8), else its text;
   * a delta refused with a 4xx (its base gone meanwhile, or a store that cannot expand it):
   * its text.
   */
  private async sendPart(p: WasmPartOut): Promise<void> {
    const { http, signal } = this
    const post = (body: Uint8Array) => {
      this.sent += body.length
      return http.requestRead('POST', http.url('parts'), { body, type: 'text/plain; charset=utf-8', retry: true, signal }, (r) => r.json())
    }
    const delta = p.delta
    if (delta) {
      try {
        await post(delta)
        this.partsDelta++
        return
      } catch (e) {
        if (!(e instanceof StoreError && e.status !== undefined && e.status >= 400 && e.status < 500)) throw e
      }
    }
    await post(p.text)
  }

  /** The last query sent and every answer taken in. */
  async finishQueries(): Promise<void> {
    this.sendQuery()
    while (this.queries.length) await this.answerQuery()
    this.emitInfos(this.chunks)
    this.assignParts(this.chunks)
  }

  private sendQuery(): void {
    if (!this.ask) return
    const { http, signal } = this
    const n = this.ask
    const from = this.askFrom
    const buf = this.askBuf.subarray(0, n * 32)
    this.ask = 0
    this.askBuf = new Uint8Array(this.batch * 32)
    this.askFrom = -1
    this.sent += n * 32
    const body = wire().queryEncode(buf)
    const p = http
      .requestRead('POST', http.url('query'), { body, retry: true, signal }, (r) => r.arrayBuffer())
      .then((b) => {
        try {
          return wire().queryDecode(new Uint8Array(b), n)
        } catch (e: any) {
          throw new StoreError(`cutpoint: the store's query answer: ${e?.message ?? e}`, { code: 'protocol' })
        }
      })
    p.catch(() => {})
    this.queries.push({ p, n, from, upto: this.chunks, end: this.fileBase + this.bytes, table: this.table })
  }

  /** The oldest query's answer: its novel chunks on to stagePack. */
  private async answerQuery(): Promise<void> {
    const q = this.queries.shift()!
    const table = q.table
    const missing = await q.p
    checkAbort(this.signal)
    const n = missing.length / 32
    const list: Novel[] = []
    for (let j = 0; j < n; j++) {
      const i = table.find(missing, j * 32)
      if (i < 0 || table.off(i) < 0) throw new StoreError(`cutpoint: the store names chunk ${hex(missing.subarray(j * 32, j * 32 + 32))} as missing, which was not asked`, { code: 'protocol' })
      this.novelChunks++
      this.novelBytes += table.len(i)
      this.onNovel?.(table.off(i), table.len(i))
      table.flags[i] |= NOVEL
      list.push({ off: table.off(i), len: table.len(i), raw: table.ids, at: i * 32 })
    }
    await this.stagePack(list)
    // Trial frames of the chunks this query covered that no group used (known present, or not sampled).
    if (this.trials.size) for (const off of this.trials.keys()) if (off < q.end) this.trials.delete(off)
    this.assignParts(q.upto)
    this.emitInfos(q.upto)
    if (this.window) this.window.release(Math.min(this.queries[0]?.from ?? Infinity, this.askFrom >= 0 ? this.askFrom : Infinity, this.bytes))
    this.progress()
  }

  private emitInfos(upto: number): void {
    const { opts } = this
    if (!opts.onChunks) return
    const n = this.infos.length - (this.chunks - upto)
    if (n <= 0) return
    const out = this.infos.splice(0, n).map((c) => ({
      offset: c.offset,
      length: c.length,
      hinted: c.hinted,
      novel: (c.table.flags[c.id] & NOVEL) !== 0 && c.table.off(c.id) === c.offset,
    }))
    opts.onChunks(out)
  }

  /**
   * Novel chunks into packs: heads first (a File/Blob in a browser: no read at all), else read
   * back from the input by offset (contiguous ones in one read) and framed. A full pack goes to
   * stageUpload.
   */
  async stagePack(list: Novel[]): Promise<void> {
    if (this.level !== undefined) return this.packCompressed(list)
    const pack = this.pack!
    if (pack instanceof HeadsFirstPack) {
      for (const n of list) {
        pack.add(wire().packFrameHead(n.len, n.raw.subarray(n.at, n.at + 32)), n.off, n.len)
        this.compressedBytes += n.len
        this.onFrame?.(n.off, n.len, false)
        if (this.journal) this.packNovel.push(n)
        this.packCount++
        if (pack.len >= this.packSize || this.packCount >= this.maxCount) await this.stageUpload()
      }
      return
    }
    let i = 0
    while (i < list.length) {
      const j = this.runOf(list, i)
      const end = list[j].off + list[j].len
      const buf = await this.reader!.read(list[i].off, end - list[i].off)
      checkAbort(this.signal)
      for (let k = i; k <= j; k++) {
        const n = list[k]
        const at = n.off - list[i].off
        pack.add(wire().packFrameHead(n.len, n.raw.subarray(n.at, n.at + 32)), buf.subarray(at, at + n.len))
        this.compressedBytes += n.len
        this.onFrame?.(n.off, n.len, false)
        if (this.journal) this.packNovel.push(n) // what the journal records once the store acknowledges the pack
        this.packCount++
        if (pack.len >= this.packSize || this.packCount >= this.maxCount) await this.stageUpload()
        const p = pause()
        if (p) await p
      }
      i = j + 1
    }
  }

  /**
   * stagePack with compression: the novel chunks in groups (the core's COMPRESS_GROUP), each
   * compressed across the workers under the core's sampler (as the native `compress_group`),
   * then framed: compressed where that saves at least 1/16, raw otherwise. Up to GROUPS_AHEAD
   * groups are read and compressed ahead (`tryGroup`, the sampler's decision guessed from its
   * state then), and settled in order (`settleGroup`: the sampler's exact decision), so that
   * reads and worker round trips overlap and the frames are still the native client's. Heads
   * first (a File/Blob in a browser) only the chunks tried are read, by the workers from the
   * file, and a raw one is a slice of the input; framed, every chunk is read back.
   */
  private async packCompressed(list: Novel[]): Promise<void> {
    const size = wire().compressGroupSizes()[0]
    const groups: Novel[][] = []
    for (let g = 0; g < list.length; g += size) groups.push(list.slice(g, g + size))
    const tried: Promise<Tried>[] = []
    const start = (i: number) => {
      if (i >= groups.length) return
      tried[i] = this.tryGroup(groups[i])
      tried[i].catch(() => {}) // awaited in order below
    }
    for (let i = 0; i < GROUPS_AHEAD; i++) start(i)
    for (let i = 0; i < groups.length; i++) {
      const frames = await this.settleGroup(groups[i], await tried[i])
      start(i + GROUPS_AHEAD)
      for (let k = 0; k < groups[i].length; k++) {
        await this.addFrame(groups[i][k], frames[k])
        const p = pause()
        if (p) await p
      }
    }
  }

  /** A group read and its first chunks compressed, as many as the sampler's state now says. */
  private async tryGroup(chunks: Novel[]): Promise<Tried> {
    const n = this.sampler!.first(chunks.length)
    const raws = this.pack instanceof HeadsFirstPack ? undefined : await this.readChunks(chunks)
    return { raws, n, frames: await this.compressChunks(chunks.slice(0, n), raws?.slice(0, n)) }
  }

  /**
   * A group's frames under the sampler's exact rule (its state after the group before): the
   * first chunks tried (all of them, or a sample after a group where none compressed), the rest
   * only if the sampler says so (raw otherwise, whatever was tried ahead). What `tryGroup` did
   * not try and the rule wants is compressed here.
   */
  private async settleGroup(chunks: Novel[], t: Tried): Promise<Frame[]> {
    const sampler = this.sampler!
    const n = chunks.length
    const first = sampler.first(n)
    const frames = t.frames.slice(0, first)
    if (t.n < first) frames.push(...(await this.compressChunks(chunks.slice(t.n, first), t.raws?.slice(t.n, first))))
    if (sampler.tryRest(frames.some((f) => f.compressed))) {
      frames.push(...t.frames.slice(first))
      const have = Math.max(first, t.n)
      if (have < n) frames.push(...(await this.compressChunks(chunks.slice(have), t.raws?.slice(have))))
    } else for (let k = first; k < n; k++) frames.push({ data: t.raws?.[k], compressed: false })
    sampler.record(frames.some((f) => f.compressed))
    return frames
  }

  /**
   * Chunks' frames: those the hash jobs tried (`trialFrames`, heads first), the others
   * compressed in the workers (`compressJobs`).
   */
  private async compressChunks(chunks: Novel[], raws?: Uint8Array[]): Promise<Frame[]> {
    const tried = !raws && this.pack instanceof HeadsFirstPack ? this.trialFrames(chunks) : undefined
    if (!tried) return this.compressJobs(chunks, raws)
    const rest = chunks.filter((_, k) => !tried[k])
    const done = rest.length ? await this.compressJobs(rest) : []
    let j = 0
    return tried.map((f) => f ?? done[j++])
  }

  /**
   * Chunks compressed in the workers (`compressGroup` of the wasm, about equal shares, each job
   * a copy of its chunks' bytes, or heads first their offsets in the file, which the worker
   * reads): each chunk's frame, its compressed data or its raw bytes (heads first: none).
   */
  private async compressJobs(chunks: Novel[], raws?: Uint8Array[]): Promise<Frame[]> {
    if (!chunks.length) return []
    // Heads first (a File/Blob in a browser) the workers read the chunks from the file
    // themselves: the page's thread neither reads them (a Blob slice and a read, each a round
    // trip to the browser's blob system: 2 s of a 1 GiB push's page thread) nor copies them.
    const source = !raws && this.pack instanceof HeadsFirstPack ? this.source : undefined
    const got = source ? undefined : (raws ?? (await this.readChunks(chunks)))
    // The chunker's workers are initialised once chunking starts; should they not be, the
    // client's compression workers.
    const pool = this.zpool?.ready ? this.zpool : await this.ownCompressionPool()
    const per = Math.ceil(chunks.length / Math.min(pool.size, Math.ceil(chunks.length / MIN_COMPRESS_JOB)))
    const jobs: Promise<{ a: number; out: Uint8Array }>[] = []
    for (let a = 0; a < chunks.length; a += per) {
      const b = Math.min(chunks.length, a + per)
      const lengths = new Uint32Array(b - a)
      let job: Promise<CompressRes>
      if (source) {
        const offsets = new Float64Array(b - a)
        for (let k = a; k < b; k++) (lengths[k - a] = chunks[k].len), (offsets[k - a] = chunks[k].off)
        job = pool.run<CompressRes>({ type: 'cutpoint:compress', level: this.level!, lengths, blob: source, offsets }, [])
      } else {
        let total = 0
        for (let k = a; k < b; k++) total += lengths[k - a] = got![k].length
        const bytes = this.jobBuffer(total)
        for (let k = a, at = 0; k < b; at += got![k].length, k++) bytes.set(got![k], at)
        job = pool.run<CompressRes>({ type: 'cutpoint:compress', level: this.level!, lengths, bytes }, [bytes.buffer as ArrayBuffer])
      }
      const done = job.then((r) => {
        if (r.error) throw new StoreError(`cutpoint: ${r.error}; nothing was committed`, { code: 'io' })
        this.keepJobBuffer(r.bytes)
        return { a, out: r.out }
      })
      done.catch(() => {}) // awaited below (after the pauses)
      jobs.push(done)
      // A job's copy (up to a group's bytes) is one slice of the page's thread.
      const p = pause()
      if (p) await p
    }
    const frames: Frame[] = new Array(chunks.length)
    for (const { a, out } of await Promise.all(jobs)) {
      const b = Math.min(chunks.length, a + per)
      const read = readFrames(out, chunks.slice(a, b).map((c) => c.len))
      if (!read) throw new StoreError('cutpoint: internal error: a compression worker answered out of order', { code: 'protocol' })
      read.forEach((f, i) => (frames[a + i] = f.compressed ? f : { data: got?.[a + i], compressed: false }))
    }
    checkAbort(this.signal)
    return frames
  }

  /**
   * The chunks' frames from the hash jobs' trials (`trialOptions`; as a compression job answers:
   * the same core function, level and bytes), undefined for a chunk not tried there (it is read
   * and compressed); undefined when none was.
   */
  private trialFrames(chunks: Novel[]): (Frame | undefined)[] | undefined {
    if (!this.trials.size) return undefined
    let used = 0
    const frames = chunks.map((n): Frame | undefined => {
      const t = this.trials.get(n.off)
      const f = t && t.len === n.len ? readFrames(t.out, [n.len])?.[0] : undefined
      if (!f) return undefined
      this.trials.delete(n.off)
      used++
      return f
    })
    this.trialsUsed += used
    return used ? frames : undefined
  }

  /**
   * A compression job's buffer of `n` bytes: one a worker gave back, else a new one. In a
   * browser the page's thread made a fresh buffer of about 1 MiB per job (a folder of 10,000
   * files: as many bytes of new ArrayBuffers as the novel chunks, and the garbage collections
   * they bring); Node and Deno do not keep them (their memory stays the push's).
   */
  private jobBuffer(n: number): Uint8Array {
    const i = this.jobBuffers.findIndex((b) => b.byteLength >= n)
    if (i < 0) return new Uint8Array(n)
    const [b] = this.jobBuffers.splice(i, 1)
    return new Uint8Array(b, 0, n)
  }

  /** A job's buffer given back by its worker: kept (browsers; at most JOB_BUFFERS of up to JOB_BUFFER_MAX bytes). */
  private keepJobBuffer(b?: Uint8Array): void {
    if (!BLOB_BODIES || !b || b.buffer.byteLength > JOB_BUFFER_MAX || this.jobBuffers.length >= JOB_BUFFERS) return
    this.jobBuffers.push(b.buffer as ArrayBuffer)
  }

  /**
   * The last of the chunks from `list[i]` on that one read takes: contiguous ones, up to
   * MAX_READ bytes, within one input of pushMany (`extent`: its inputs' cached bytes are read
   * without a copy; a run across inputs was a new buffer and a copy of every novel byte on the
   * page's thread, and the garbage collections they brought).
   */
  private runOf(list: Novel[], i: number): number {
    const limit = Math.min(list[i].off + MAX_READ, this.reader!.extent?.(list[i].off) ?? Infinity)
    let j = i
    let end = list[i].off + list[i].len
    while (j + 1 < list.length && list[j + 1].off === end && end + list[j + 1].len <= limit) end += list[++j].len
    return j
  }

  /**
   * The chunks' bytes, read back from the input (contiguous ones in one read: `runOf`); the
   * page's thread is given back between reads (`pause`).
   */
  private async readChunks(list: Novel[]): Promise<Uint8Array[]> {
    const out: Uint8Array[] = []
    let i = 0
    while (i < list.length) {
      const j = this.runOf(list, i)
      const end = list[j].off + list[j].len
      const buf = await this.reader!.read(list[i].off, end - list[i].off)
      checkAbort(this.signal)
      for (let k = i; k <= j; k++) out.push(buf.subarray(list[k].off - list[i].off, list[k].off - list[i].off + list[k].len))
      i = j + 1
      const p = pause()
      if (p) await p
    }
    return out
  }

  /** One chunk's frame into the pack; a full pack goes to stageUpload. */
  private async addFrame(n: Novel, f: Frame): Promise<void> {
    const pack = this.pack!
    const len = f.compressed ? f.data!.length : n.len
    const head = wire().packFrameHead(len, n.raw.subarray(n.at, n.at + 32), f.compressed)
    if (pack instanceof HeadsFirstPack) pack.add(head, n.off, f.compressed ? len : n.len, f.data, f.compressed)
    else pack.add(head, f.data!)
    this.compressedBytes += len
    if (f.compressed) this.compressedChunks++
    this.onFrame?.(n.off, len, f.compressed)
    if (this.journal) this.packNovel.push(n)
    this.packCount++
    if (pack.len >= this.packSize || this.packCount >= this.maxCount) await this.stageUpload()
  }

  /** Sends the pack being filled, once fewer than `concurrency` uploads are in flight. */
  async stageUpload(): Promise<void> {
    const { http, signal, source } = this
    const body = this.pack!.take(wire().packEnd(this.packCount))
    const inPack = this.packNovel
    const seq = this.packSeq++
    this.packNovel = []
    this.packCount = 0
    while (this.inflight.size >= this.concurrency) await Promise.race(this.inflight)
    if (this.failure) throw this.failure
    checkAbort(signal)
    const p: Promise<void> = http
      .requestRead('POST', http.url('packs'), { body, retry: true, signal }, (r) => r.json())
      .then(() => {
        this.sent += packSizeOf(body)
        this.packBytes += packSizeOf(body)
        this.packs++
        this.journal?.acked(inPack)
        this.acked.add(seq)
        while (this.acked.delete(this.ackedThrough)) this.ackedThrough++
        this.flushParts()
        this.progress()
      })
      .catch(async (e) => {
        // The browser reads a heads-first body from the file as it sends it: a file changed
        // or removed since it was picked fails the request, which is said as such.
        if (source && !signal.aborted && e instanceof StoreError && e.code !== 'usage') {
          try {
            await source.slice(0, 1).arrayBuffer()
          } catch (r: any) {
            e = new StoreError(`cutpoint: cannot read the file while uploading it (was it changed or removed?): ${r?.message ?? r}; nothing was committed`, { code: 'io', cause: r })
          }
        }
        this.failure ??= e
        throw e
      })
      .finally(() => this.inflight.delete(p))
    p.catch(() => {})
    this.inflight.add(p)
  }

  /** The last pack sent and every upload answered. */
  async finishUploads(): Promise<void> {
    if (this.packCount) await this.stageUpload()
    // Parts go as their packs are answered: uploads in flight may start more.
    for (;;) {
      while (this.inflight.size) await Promise.allSettled([...this.inflight])
      if (this.failure) throw this.failure
      this.flushParts()
      if (!this.inflight.size) break
    }
    if (this.pendingParts.length) throw new StoreError('cutpoint: internal error: recipe parts were left unsent', { code: 'protocol' })
    checkAbort(this.signal)
  }

  /** The recipe: built here (SS-CDC), or the RapidCDC run's (it records the hint flags). */
  private sealedRecipe(): WasmStoreRecipe {
    if (this.recipe) return this.recipe
    if (!this.rapidRecipe) throw new StoreError('cutpoint: internal error: the RapidCDC run gave no recipe', { code: 'protocol' })
    return wire().StoreRecipe.parse(this.rapidRecipe)
  }

  /**
   * Commits the recipe: a delta against the base when there is one, else the whole recipe. If
   * chunks went missing meanwhile they are sent again; if the base version went, the whole
   * recipe is sent. Returns the push's result.
   */
  async stageCommit(): Promise<PushResult> {
    if (this.sink?.inParts) return this.stageCommitParts()
    const { http, name, signal, base, bytes, total } = this
    const full = this.sealedRecipe()
    try {
      if (full.bytes !== bytes || (total !== undefined && full.bytes !== total)) {
        throw new StoreError(`cutpoint: chunked ${full.bytes} bytes of a ${total ?? bytes}-byte input; nothing was committed`, { code: 'io' })
      }
      const digest = full.seal()
      this.stage = 'committing'
      this.progress(true)
      let deltaBase = base?.version
      let text = base ? full.delta(base.recipe, base.version) : full.text()
      let recipeBytes = 0
      let rounds = 0
      let version: number
      for (;;) {
        checkAbort(signal)
        this.checkCommit(text)
        this.sent += text.length
        recipeBytes += text.length
        try {
          version = await commit(http, name, text, digest, this.latest, signal)
          break
        } catch (e: any) {
          if (!(e instanceof StoreError)) throw e
          if (e.status === 404 && deltaBase !== undefined) {
            deltaBase = undefined
            text = full.text()
          } else if (e.status === 409 && e.missing && rounds < 3) {
            // Chunks collected or deleted since the query: send them and commit again.
            rounds++
            await this.resendMissing(e.missing)
          } else throw e
        }
      }
      return await this.done(version, recipeBytes, digest, deltaBase)
    } finally {
      if (full !== this.recipe) full.free()
    }
  }

  /**
   * Commits a recipe in parts (every part sent or found present by now): the short recipe of
   * part lines, checked against `max_recipe_bytes` before it is sent.
   */
  private async stageCommitParts(): Promise<PushResult> {
    const { http, name, signal, bytes, total } = this
    const sink = this.sink!
    if (sink.bytes !== bytes || (total !== undefined && sink.bytes !== total)) {
      throw new StoreError(`cutpoint: chunked ${sink.bytes} bytes of a ${total ?? bytes}-byte input; nothing was committed`, { code: 'io' })
    }
    const text = sink.recipeText()
    this.checkCommit(text)
    this.stage = 'committing'
    this.progress(true)
    checkAbort(signal)
    this.sent += text.length
    const version = await commit(http, name, text, this.partsDigest!, this.latest, signal)
    return this.done(version, text.length, this.partsDigest!)
  }

  /** The push's result, once its commit stands. */
  private async done(version: number, recipeBytes: number, digest: string, deltaBase?: number): Promise<PushResult> {
    const { bytes } = this
    this.stage = 'done'
    this.succeeded = true
    await this.journal?.succeeded()
    this.progress(true)
    return {
      name: this.name,
      version,
      bytes,
      chunks: this.chunks,
      novelChunks: this.novelChunks,
      novelBytes: this.novelBytes,
      sentBytes: this.sent,
      packBytes: this.packBytes,
      compressedBytes: this.compressedBytes,
      compressedChunks: this.compressedChunks,
      packs: this.packs,
      recipeBytes,
      deltaBase,
      parts: this.parts,
      partsSent: this.partsSent,
      partsDelta: this.partsDelta,
      basePartBytes: this.partBase?.readBytes ?? 0,
      idsHeld: this.idsHeld,
      knownFromBase: this.knownFromBase,
      hintedChunks: this.hinted,
      digest,
      dedupRatio: this.novelBytes ? bytes / this.novelBytes : Infinity,
      seconds: (performance.now() - this.t0) / 1000,
      profile: this.profile,
      hash: this.hash,
      resumed: this.journal?.resumed,
    }
  }

  /** The chunks a commit named missing, read back from the input and uploaded again. */
  async resendMissing(missing: string[]): Promise<void> {
    const { table } = this
    const list: Novel[] = []
    for (const id of missing) {
      let i = -1
      try {
        if (id.length === 64) i = table.find(unhex(id), 0)
      } catch {}
      if (i < 0 || table.off(i) < 0) throw new StoreError(`cutpoint: the store asks for chunk ${id}, which the input lacks`, { code: 'protocol' })
      list.push({ off: table.off(i), len: table.len(i), raw: table.ids, at: i * 32 })
    }
    if (this.window) throw new StoreError('cutpoint: the store lost chunks of a stream during the push; push it again', { code: 'io' })
    await this.stagePack(list)
    await this.finishUploads()
  }

  /** Lets go of the workers, the recipes and the reader; stops what is still in flight. */
  async close(): Promise<void> {
    this.failure ??= new Error('push ended')
    for (const p of this.inflight) p.catch(() => {})
    this.release?.()
    this.zrelease?.()
    this.sampler?.free()
    this.sampler = undefined
    this.trials.clear()
    this.recipe?.free()
    this.recipe = undefined
    this.sink?.free()
    this.sink = undefined
    for (const p of this.pendingParts) p.part.free()
    this.pendingParts = []
    this.base?.recipe.free()
    this.partBase?.free()
    this.partBase = undefined
    await this.reader?.close()
  }
}

/**
 * Commits, not blindly retried (PROTOCOL.md: a commit is not idempotent). After a network
 * error or a 5xx the answer may have been lost: the name's latest version is read, and if it is
 * newer than the one seen before the push and has this push's digest, that is the commit;
 * otherwise the commit is sent again (at most `retries` times, with backoff).
 */
export async function commit(http: Http, name: string, text: Uint8Array, digest: string, before: number, signal?: AbortSignal): Promise<number> {
  let wait = http.backoff
  for (let n = 0; ; n++) {
    try {
      const res = await http.request('PUT', http.fileUrl('files', name), { body: text, type: 'text/plain; charset=utf-8', signal })
      const v = await res.json()
      if (!Number.isSafeInteger(v?.version)) throw new StoreError('cutpoint: the commit answer has no version', { code: 'protocol' })
      return v.version
    } catch (e: any) {
      checkAbort(signal)
      const lost = e instanceof StoreError && (e.code === 'network' || (e.status !== undefined && e.status >= 500))
      if (!lost) throw e
      if (n >= http.retries) throw n > 0 && e.code === 'network' ? new StoreError(`${e.message} (gave up after ${n + 1} tries)`, { code: 'network', cause: e.cause }) : e
      await sleep(wait, signal)
      wait *= 2
      const back = await http.requestRead('GET', http.fileUrl('recipes', name), { retry: true, signal, pass: [404] }, async (res) => {
        if (res.status !== 200) {
          await res.body?.cancel()
          return undefined
        }
        return { v: Number(res.headers.get('x-cutpoint-version')), text: new Uint8Array(await res.arrayBuffer()) }
      })
      if (back) {
        const rec = wire().StoreRecipe.parse(back.text)
        const same = rec.digestHex === digest
        rec.free()
        if (back.v > before && same) return back.v
      }
    }
  }
}

/** The pack size to aim at within the store's limit (the core's rule: `fitPackTarget`). */
function fitPack(want: number, maxChunk: number, limits: StoreLimits): number {
  if (limits.maxPack === undefined) return want
  try {
    return wire().fitPackTarget(want, maxChunk, limits.maxPack)
  } catch (e: any) {
    throw new StoreError(`cutpoint: ${e?.message ?? e}`, { code: 'usage' })
  }
}

const packSizeOf = (b: Uint8Array | Blob) => (b instanceof Uint8Array ? b.length : b.size)

/**
 * A heads-first pack being filled from a Blob input: the heads in one buffer, the data as runs
 * of the input (adjacent chunks merged). Its body is a Blob of the header, the heads, the end
 * frame and slices of the input: nothing of the input is read here. With compression a
 * compressed frame's data is memory, and so is a raw chunk that was read (tried) and follows
 * memory: runs of memory alternate with slices at most twice a compression group.
 */
class HeadsFirstPack {
  private heads: Uint8Array
  private count = 0
  private runs: number[] = [] // kind (SLICE: of the input, MEM: of `mem`), start, end, ...
  /** Frame data held in memory (compressed frames, raw chunks read), reused pack after pack. */
  private mem = new Uint8Array(0)
  private memLen = 0
  len = 0

  constructor(
    private header: Uint8Array,
    private source: Blob,
  ) {
    this.heads = new Uint8Array(36 * 1024)
    this.len = header.length
  }

  /**
   * A frame: its head and its data, bytes `[off, off + len)` of the input, or `data` (a
   * compressed frame's, or the chunk's bytes read) kept in memory where it is compressed or
   * follows memory.
   */
  add(head: Uint8Array, off: number, len: number, data?: Uint8Array, compressed = false): void {
    const at = this.count * head.length
    if (at + head.length > this.heads.length) {
      const grown = new Uint8Array(2 * this.heads.length)
      grown.set(this.heads)
      this.heads = grown
    }
    this.heads.set(head, at)
    this.count++
    const r = this.runs
    const last = r.length - 3
    if (data && (compressed || (last >= 0 && r[last] === MEM))) {
      if (this.memLen + data.length > this.mem.length) {
        const grown = new Uint8Array(Math.max(this.memLen + data.length, 2 * this.mem.length, 1 << 20))
        grown.set(this.mem.subarray(0, this.memLen))
        this.mem = grown
      }
      this.mem.set(data, this.memLen)
      if (last >= 0 && r[last] === MEM && r[last + 2] === this.memLen) r[last + 2] += data.length
      else r.push(MEM, this.memLen, this.memLen + data.length)
      this.memLen += data.length
      this.len += head.length + data.length
      return
    }
    if (last >= 0 && r[last] === SLICE && r[last + 2] === off) r[last + 2] = off + len
    else r.push(SLICE, off, off + len)
    this.len += head.length + len
  }

  take(end: Uint8Array): Blob {
    const parts: BlobPart[] = [this.header as Uint8Array<ArrayBuffer>, this.heads.slice(0, this.count * end.length), end as Uint8Array<ArrayBuffer>]
    for (let i = 0; i < this.runs.length; i += 3) {
      const [kind, a, b] = [this.runs[i], this.runs[i + 1], this.runs[i + 2]]
      parts.push(kind === SLICE ? this.source.slice(a, b) : (this.mem.subarray(a, b) as Uint8Array<ArrayBuffer>))
    }
    // The Blob copies the memory runs: `mem` is filled again for the next pack.
    const body = new Blob(parts, { type: 'application/octet-stream' })
    const want = this.len + end.length
    if (body.size !== want) throw new StoreError(`cutpoint: internal error: a pack of ${body.size} bytes, ${want} expected`, { code: 'protocol' })
    this.count = 0
    this.runs = []
    this.memLen = 0
    this.len = this.header.length
    return body
  }
}

const SLICE = 0
const MEM = 1

/**
 * In a browser, a pack is made of Blobs of this many bytes as it fills: one 8 MiB Blob made at
 * the pack's end was a copy of 8 MiB in one task of the page's thread (50-110 ms in a CDP profile
 * of a folder of 10,000 files pushed from the page, loaded machine); a piece is a copy of 512 KiB
 * and the pack's Blob is made of the pieces' Blobs (no copy). Pieces of 128 KiB cost more: a
 * Blob's cost is mostly fixed (`new Blob` took 1.1 s of the page's thread in all against 0.52-0.55 s
 * in profiles of a 10,000-file drop, with tasks of 8-37 ms still).
 */
const PACK_PIECE = 512 << 10

/**
 * The pack being filled: its header, then frames, in one buffer reused pack after pack (in a
 * browser: a buffer of PACK_PIECE bytes, each full one kept as a Blob).
 */
class PackBuffer {
  private buf: Uint8Array
  /** Browsers: the pack's bytes before `buf`'s, as Blobs. */
  private pieces: Blob[] = []
  /** Bytes in `buf`. */
  private at = 0
  len = 0

  constructor(
    private header: Uint8Array,
    packSize: number,
  ) {
    this.buf = new Uint8Array(BLOB_BODIES ? PACK_PIECE : Math.max(packSize, 1 << 16) + (1 << 16))
    this.add(header)
  }

  add(...parts: Uint8Array[]): void {
    for (const p of parts) {
      if (BLOB_BODIES) this.putPiece(p)
      else this.put(p)
      this.len += p.length
    }
  }

  /** `p` at the end of the buffer, grown if need be (Node and Deno). */
  private put(p: Uint8Array): void {
    const need = this.at + p.length
    if (need > this.buf.length) {
      const grown = new Uint8Array(Math.max(need, 2 * this.buf.length))
      grown.set(this.buf.subarray(0, this.at))
      this.buf = grown
    }
    this.buf.set(p, this.at)
    this.at += p.length
  }

  /** `p` into the piece being filled; a full piece becomes a Blob (browsers). */
  private putPiece(p: Uint8Array): void {
    for (let o = 0; o < p.length; ) {
      const n = Math.min(p.length - o, this.buf.length - this.at)
      this.buf.set(p.subarray(o, o + n), this.at)
      this.at += n
      o += n
      if (this.at === this.buf.length) {
        this.pieces.push(new Blob([this.buf as Uint8Array<ArrayBuffer>]))
        this.at = 0
      }
    }
  }

  /** The body of the pack (a Blob in browsers, else a copy) and an empty pack after it. */
  take(end: Uint8Array): Uint8Array | Blob {
    this.add(end)
    const data = this.buf.subarray(0, this.at)
    const body = BLOB_BODIES ? new Blob([...this.pieces, data as Uint8Array<ArrayBuffer>], { type: 'application/octet-stream' }) : data.slice()
    if (packSizeOf(body) !== this.len) throw new StoreError(`cutpoint: internal error: a pack of ${packSizeOf(body)} bytes, ${this.len} expected`, { code: 'protocol' })
    this.pieces = []
    this.at = 0
    this.len = 0
    this.add(this.header)
    return body
  }
}

export type { WorkerPool }
