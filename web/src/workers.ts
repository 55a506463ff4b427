// Worker pools: one per call, or one kept across calls (`createPool`). The pool runs
// worker/handler.ts's Handler in this thread when asked for no workers.
import { Handler } from '../../worker/handler.js'
import type { SourceDesc } from '../../common/protocol.js'
import { isDeno, isNode, loadWasm, resolveFlavor, type Flavor } from '../../common/wasm.js'
import { optInt, options } from './check.js'
import { Pool, type InThread } from './pool.js'
import type { Resolved } from './options.js'
import { need, optWasm } from './runtime.js'

/** What `workers: 0` runs in this thread. */
const inThread: InThread = () => new Handler()

/** Workers that stay up across `chunk()` / `createChunker()` calls (see `createPool`). */
export interface WorkerPool {
  readonly workers: number
  readonly flavor: Flavor
  /** Stops the workers. Calls still running fail. */
  close(): void
}

export const pools = new WeakMap<WorkerPool, Pool>()

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

export async function defaultWorkers(): Promise<number> {
  const g = globalThis as any
  if (isNode) {
    const osName = 'node:os'
    const os = await import(/* @vite-ignore */ osName)
    return os.availableParallelism?.() ?? os.cpus().length
  }
  return g.navigator?.hardwareConcurrency || 1
}

/**
 * Bytes a stage-1 job reads before its segment: the window, or, where the worker keeps the slice
 * for its hash job, up to a longest chunk (at most 1 MiB). The hash job's first chunk begins
 * before the segment (at the last cut of the one before, at most `max` bytes back); with these
 * bytes in the kept slice the worker does not go back to the source for them: one read per
 * segment fewer (chunk() of a 1 GiB File in Chromium, 2 workers, BLAKE3: 2.45 -> 2.22 s, Intel
 * Xeon, 2 vCPUs; `node bench/harness/browser-profile.mjs FILE chunk,chunk,chunk,chunk`).
 * Extra bytes before the window change no candidate: a position's hash depends on its window only.
 */
export function stage1Lead(p: { window: number; max: number }): number {
  return Math.max(p.window, Math.min(p.max, 1 << 20))
}

/** Workers for one call, initialised for it (a kept pool's or new ones); `finish()` them after. */
export async function startPool(r: Resolved, source: SourceDesc): Promise<Pool> {
  const module = isDeno ? undefined : (await loadWasm(r.flavor)).module
  const init = {
    flavor: r.flavor,
    module,
    profile: r.profile.canonical,
    backend: r.backend,
    hash: r.hash,
    hashImpl: r.hashImpl,
    capacity: Math.min(r.span, 1 << 30) + stage1Lead(r.profile),
    source,
  }
  return r.pool ? r.pool.take(init) : Pool.create(r.workers, init, inThread)
}

/**
 * Workers that compress pushes' novel chunks (a client keeps one such pool for its pushes; the
 * chunker's workers are busy chunking meanwhile): `workers` of them (default one per core; 0:
 * this thread), each with the wasm loaded and no source of its own (each job carries its bytes).
 * Kept: idle, they do not keep Node running (`Pool.lease` holds them while a push uses them).
 */
export async function startCompressionPool(workers?: number): Promise<Pool> {
  const w = need()
  const n = workers ?? (await defaultWorkers())
  const module = isDeno ? undefined : (await loadWasm(w.flavor)).module
  const pool = await Pool.keep(n, inThread)
  try {
    // The smallest stage-1 buffer of any profile: a compression worker never chunks.
    return await pool.take({ flavor: w.flavor, module, profile: 'gear:2k:8k:64k', backend: '', hash: 'none', hashImpl: 'wasm', capacity: 1 << 16, source: { kind: 'message' } })
  } catch (e) {
    pool.terminate()
    throw e
  } finally {
    if (pool.usable) pool.finish()
  }
}
