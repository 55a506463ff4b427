// The options of `chunk()` / `createChunker()`: what each means, their checks (before any input
// is read or any worker started) and their resolution into the values the loops use.
import { resolveFlavor, type Flavor } from '../../common/wasm.js'
import { optBool, optInt, optOneOf, options, optString, shown } from './check.js'
import type { Pool } from './pool.js'
import type { RapidOptions } from './rapid.js'
import { need, optWasm, parseProfile } from './runtime.js'
import { defaultWorkers, pools, type WorkerPool } from './workers.js'

export type HashName = 'blake3' | 'sha256' | 'none'

export interface ChunkOptions {
  /** Chunking profile, e.g. `gear:2k:8k:64k` (the default), `crc32:2k:16k:64k`. */
  profile?: string
  /** Workers; default `navigator.hardwareConcurrency` / `os.availableParallelism()`. 0: no workers, this thread. */
  workers?: number
  /**
   * Span: bytes of positions each stage-1 job (one message to a worker) covers (default 4 MiB, and
   * 16 MiB for a Blob/File, whose every read is a round trip to the browser's blob system: in
   * Chromium 4 MiB reads of a File ran at about half the speed of 16 MiB ones; at least 64 KiB:
   * a smaller value is raised to 64 KiB, as each job costs a round trip of about 0.1 ms). Any
   * size gives the same chunks. The core's `Options::span`.
   */
  span?: number
  /** The old name of `span`, still accepted (giving both, they must agree). */
  segmentSize?: number
  /**
   * Lane segment: bytes of positions one SIMD lane of the kernel scans in one go inside a span
   * (default 0: the kernel splits the span over its lanes). The core's `Options::lane_segment`,
   * the CLI's `--lane-segment`.
   */
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

export const DEFAULT_PROFILE = 'gear:2k:8k:64k'
export const MiB = 1 << 20

/**
 * Smallest span (stage-1 job): each job costs a round trip (a message to a worker, the
 * candidates back, stage 2 fed) of about 0.1 ms, so 1-byte jobs ran 5.3 s on 200 KB. Measured on
 * 8 MiB (2 vCPUs): 1 KiB jobs 14-29× the 4 MiB time, 4 KiB 4-6×, 16 KiB 2.4-2.9×, 64 KiB within
 * 1.3× (noise). Smaller values are raised to it.
 */
export const MIN_SPAN = 64 << 10
/** The old name of `MIN_SPAN`. */
export const MIN_SEGMENT_SIZE = MIN_SPAN
let minSpan = MIN_SPAN

/** Sets the smallest span (tests) and returns the previous one. */
export function setMinSpan(n: number): number {
  const prev = minSpan
  minSpan = n
  return prev
}

export interface Resolved {
  profile: ReturnType<typeof parseProfile>
  workers: number
  span: number
  lane: number
  hash: HashName
  hashImpl: 'auto' | 'wasm' | 'webcrypto'
  backend: string
  flavor: Flavor
  hashBatch: number
  /** A kept pool (`opts.pool`). */
  pool?: Pool
  /** push()'s compression sample tried in the hash jobs (`ChunkOptions.trial`). */
  trial?: Trial
  /** Stage-1 jobs launched ahead, and hash jobs left pending, per worker (`chunkRandom`): 2, or push()'s `ahead`. */
  ahead: number
}

/** Chunks compressed by the hash jobs: the first `first` of every `every`, at zstd `level`. */
export interface Trial {
  level: number
  every: number
  first: number
}

/**
 * Every option checked (types first: nothing that is not a string reaches the wasm module as
 * one) before any input is read or any worker started.
 */
export function checkChunkOptions(opts: unknown): ChunkOptions {
  const o = options<ChunkOptions>('options', opts)
  optString('profile', o.profile, "'gear:2k:8k:64k'")
  optInt('workers', o.workers, 0, 256)
  optInt('span', o.span, 1, 1 << 30, '1..1 GiB')
  optInt('segmentSize', o.segmentSize, 1, 1 << 30, '1..1 GiB')
  if (o.span !== undefined && o.segmentSize !== undefined && o.span !== o.segmentSize) {
    throw new TypeError(`cutpoint: span (${o.span}) and its old name segmentSize (${o.segmentSize}) differ: give one`)
  }
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

/** The default span: 4 MiB, and for a Blob/File (read by the workers) `BLOB_SPAN`. */
export const DEFAULT_SPAN = 4 * MiB
export const BLOB_SPAN = 16 * MiB

export async function resolve(opts: ChunkOptions, defaultSpan = DEFAULT_SPAN): Promise<Resolved> {
  const w = need()
  opts = checkChunkOptions(opts)
  const profile = parseProfile(opts.profile ?? DEFAULT_PROFILE)
  const hash = opts.hash ?? 'blake3'
  if (opts.pool && opts.workers !== undefined && opts.workers !== opts.pool.workers) throw new Error(`cutpoint: workers (${opts.workers}) differs from the pool's (${opts.pool.workers})`)
  if (opts.pool && opts.wasm && resolveFlavor(opts.wasm) !== opts.pool.flavor) throw new Error(`cutpoint: wasm '${opts.wasm}' differs from the pool's build (${opts.pool.flavor})`)
  const workers = opts.pool?.workers ?? opts.workers ?? (await defaultWorkers())
  const span = Math.max(opts.span ?? opts.segmentSize ?? defaultSpan, minSpan)
  const lane = opts.laneSegment ?? 0
  const flavor = opts.pool?.flavor ?? (opts.wasm ? resolveFlavor(opts.wasm) : w.flavor)
  const backend = opts.backend ?? ''
  if (backend && flavor === w.flavor && !w.mod.backends().includes(backend)) {
    throw new Error(`cutpoint: backend '${backend}' is not in the ${flavor} build (available: ${w.mod.backends().join(', ')})`)
  }
  const hashBatch = opts.hashBatch ?? 4 * MiB
  const hashImpl = opts.hashImpl ?? 'auto'
  const { trial, ahead = 2 } = opts as { trial?: Trial; ahead?: number }
  return { profile, workers, span, lane, hash, hashImpl, backend, flavor, hashBatch, pool: opts.pool && pools.get(opts.pool), trial, ahead }
}
