// `createClient`: the library's client of a cutpoint store (native/store/PROTOCOL.md) for
// browsers, Node and Deno. See push.ts (the upload pipeline), pull.ts (verified restores),
// http.ts (requests, errors, retries), input.ts (reading inputs back by offset).
import { chunkAll, createPool, type ChunkOptions, type WorkerPool } from '../index.js'
import { pools } from '../workers.js'
import { init, parseProfile } from '../runtime.js'
import { DEFAULT_PROFILE } from '../options.js'
import { optFunction, optInt, optString, options } from '../check.js'
import { StoreError, usage } from './errors.js'
import { Http, type RetryEvent } from './http.js'
import type { PushInput } from './input.js'
import { pull, type PullInfo, type PullOptions } from './pull.js'
import { push, COMPRESSIONS, type Compression, type PushOptions, type PushResult } from './push.js'
import { parseFiles } from './list.js'
import { pushMany, type ManyInput, type PushManyOptions, type PushManyResult } from './many.js'
import { startCompressionPool } from '../workers.js'
import type { Pool } from '../pool.js'
import { wire } from './wire.js'
import { forgetPush, pendingPushes, type PendingPush } from './journal.js'

export interface ClientOptions {
  /** The store's URL, e.g. `http://127.0.0.1:7373` (what `cutpoint serve` listens on by default). */
  store: string
  /** Default 'default'. */
  namespace?: string
  /** A bearer token for the namespace (`cutpoint token`); none for an open store. */
  token?: string
  /** Chunking profile (default `gear:2k:8k:64k`, the native CLI's). */
  profile?: string
  /** Chunk fingerprint (default blake3); a namespace has one. */
  hash?: 'blake3' | 'sha256'
  /** Chunking workers (default: the library's default, one per core). */
  workers?: number
  /** The fetch to use (default the global one). */
  fetch?: typeof fetch
  /**
   * Pack uploads in flight (default 2, as `cutpoint push --uploads`; 4 for a File/Blob in a
   * browser, whose packs in flight are slices of the file, not memory).
   */
  concurrency?: number
  /**
   * Pack size to aim at, bytes (default 8 MiB, as `cutpoint push --pack-size`; 32 MiB for a
   * File/Blob in a browser, whose packs are slices of the file). Kept within the store's limit.
   */
  packSize?: number
  /**
   * Retries of safe requests (queries, pack uploads, reads: a pull resumes where its verified
   * bytes end) after a network error, a timeout or a 5xx, with backoff (default 4); then the
   * request fails with a `StoreError` (code 'network') naming the store, the request and the wait.
   */
  retries?: number
  /**
   * Idle timeout, ms (default 60 000): a request whose answer does not begin, or whose body
   * brings no byte, for this long is given up (then retried where safe). Progress resets it: a
   * long answer that keeps coming is never cut. An upload's answer is awaited this long plus its
   * body's time at 64 KiB/s (`fetch` does not report an upload's progress).
   */
  timeout?: number
  /**
   * Compression of the novel chunks (PROTOCOL.md 3.1, as `cutpoint push --compression`): 'auto'
   * (the default: zstd level 4, each chunk kept compressed only where that saves at least 1/16
   * of it), 'max' (zstd level 19: slow, for data pushed once) or 'off'. Used only where the
   * store lists `zstd` in `GET /v1` (an older store: off). The client's workers compress (as
   * many as `workers`), never the calling thread unless `workers` is 0.
   */
  compression?: Compression
  /** Told of each retry before its backoff (a page can say "the store has not answered for 30 s — retrying"). */
  onRetry?: (e: RetryEvent) => void
}

/** A version the store holds (`GET /v1/ns/{ns}/files`). */
export interface FileVersion {
  name: string
  version: number
  bytes: number
  chunks: number
  digest: string
  /** Unix seconds. */
  created: number
}

export interface Client {
  /** Pushes one input as the next version of `opts.name`; only the chunks the store lacks travel. */
  push(input: PushInput, opts: PushOptions): Promise<PushResult>
  /**
   * Pushes many inputs, each the next version of its own name, as one pipeline: their chunk ids
   * share queries, their novel chunks share packs, their recipes are committed in batches where
   * the store lists `batch`. One result per input, in order (a failure of one does not stop the
   * others); progress per input.
   */
  pushMany(files: ManyInput[], opts?: PushManyOptions): Promise<PushManyResult>
  /** A version's bytes (latest by default), verified chunk by chunk; the stream errors on a mismatch. */
  pull(name: string, opts?: PullOptions): Promise<ReadableStream<Uint8Array>>
  /** As `pull`, with the version's size, chunk count and digest known before the first byte. */
  pullWithInfo(name: string, opts?: PullOptions): Promise<{ stream: ReadableStream<Uint8Array>; info: PullInfo }>
  /** What the namespace holds, by name then version. */
  list(): Promise<FileVersion[]>
  /**
   * The store's URL of a version's bytes (`GET`, with `Range` too; latest without `version`): a
   * download link for an open store (with a token, fetch it with an `Authorization` header).
   */
  fileUrl(name: string, version?: number): Promise<string>
  /** The store's `GET /v1` (service, protocol, limits); rejects when it is not a cutpoint store. */
  info(): Promise<Record<string, any>>
  /**
   * Browsers: the unfinished pushes of File/Blob inputs to this store and namespace, kept in
   * IndexedDB across reloads (newest first; [] where there is no IndexedDB). Push the same file
   * under the same name again to resume one; `forget` drops one.
   */
  pending(): Promise<PendingPush[]>
  /** Drops an unfinished push's record (an entry of `pending()`, or its `id`). */
  forget(entry: PendingPush | string): Promise<void>
  /**
   * Starts the client's workers and loads the WebAssembly in each, so that the first push does
   * not wait for them (a page calls it when it opens or its settings change); a push starts them
   * anyway. Resolves when they are ready.
   */
  warm(): Promise<void>
  /** Stops the workers. */
  close(): Promise<void>
  readonly store: string
  readonly namespace: string
}

export function createClient(opts: ClientOptions): Client {
  const o = options<ClientOptions>('createClient options', opts)
  optString('store', o.store, "'http://127.0.0.1:7373'")
  if (o.store === undefined) throw usage("createClient needs a store URL: createClient({ store: 'http://127.0.0.1:7373' })")
  optString('namespace', o.namespace, "'default'")
  optString('token', o.token, 'a token string')
  optString('profile', o.profile, "'gear:2k:8k:64k'")
  optInt('workers', o.workers, 0, 256)
  optInt('concurrency', o.concurrency, 1, 64)
  optInt('packSize', o.packSize, 64 << 10, 256 << 20, '64 KiB..256 MiB')
  optInt('retries', o.retries, 0, 20)
  optInt('timeout', o.timeout, 1, 86_400_000, '1..86400000 ms')
  optFunction('onRetry', o.onRetry)
  if (o.hash !== undefined && o.hash !== 'blake3' && o.hash !== 'sha256') throw usage(`hash must be 'blake3' or 'sha256' (got ${String(o.hash)})`)
  if (o.compression !== undefined && !COMPRESSIONS.includes(o.compression)) throw usage(`compression must be 'auto', 'off' or 'max' (got ${typeof o.compression === 'string' ? `'${o.compression}'` : String(o.compression)})`)
  const namespace = o.namespace ?? 'default'
  let http: Http | undefined
  const ready = async () => {
    await init()
    http ??= new Http({ store: o.store, namespace, token: o.token, fetch: o.fetch, retries: o.retries, timeout: o.timeout, onRetry: o.onRetry })
    return http
  }
  // One pool of workers kept for the client's pushes; a push that finds it busy starts its own.
  let pool: Promise<WorkerPool> | undefined
  let poolBusy = false
  let closed = false
  // A warm-up under way (`warm`): a push waits for it rather than start workers of its own.
  let warming: Promise<void> | undefined
  const chunkOptions = async (): Promise<{ opts: ChunkOptions; release(): void }> => {
    await warming?.catch(() => {})
    return takePool()
  }
  const takePool = async (): Promise<{ opts: ChunkOptions; release(): void }> => {
    if (poolBusy || o.workers === 0) return { opts: { workers: o.workers }, release: () => {} }
    poolBusy = true
    try {
      // A kept pool whose workers failed (a crash in an earlier push) is replaced.
      if (pool && !(await pool.then(usable, () => false))) pool = undefined
      const made = (pool ??= createPool({ workers: o.workers }))
      const p = await made
      if (closed) {
        // Closed while the workers started (`close()` found no pool yet): stop them here.
        if (pool === made) pool = undefined
        p.close()
        throw new StoreError('cutpoint: the client is closed', { code: 'usage' })
      }
      return { opts: { pool: p }, release: () => (poolBusy = false) }
    } catch (e) {
      poolBusy = false
      pool = undefined
      throw e
    }
  }
  const usable = (p: WorkerPool) => pools.get(p)?.usable ?? false
  // The workers that compress the pushes' novel chunks, started at the first push that
  // compresses and shared by the client's pushes (each job carries its bytes).
  let zpool: Promise<Pool> | undefined
  const compressor = async (): Promise<{ pool: Pool; release(): void }> => {
    if (zpool && !(await zpool.then((p) => p.usable, () => false))) zpool = undefined
    const made = (zpool ??= startCompressionPool(o.workers))
    let p: Pool
    try {
      p = await made
    } catch (e) {
      if (zpool === made) zpool = undefined
      throw e
    }
    if (closed) {
      if (zpool === made) zpool = undefined
      p.terminate()
      throw new StoreError('cutpoint: the client is closed', { code: 'usage' })
    }
    return { pool: p, release: p.lease() }
  }
  /** Drops the kept pool after a failure of its workers (the next push starts new ones). */
  const dropPool = async () => {
    const p = pool
    pool = undefined
    ;(await p?.catch(() => undefined))?.close()
  }
  const live = () => {
    if (closed) throw new StoreError('cutpoint: the client is closed', { code: 'usage' })
  }
  return {
    store: o.store,
    namespace,
    async push(input, popts) {
      live()
      const h = await ready()
      return push(
        { http: h, profile: o.profile ?? DEFAULT_PROFILE, hash: o.hash ?? 'blake3', chunkOptions, concurrency: o.concurrency, packSize: o.packSize, compression: o.compression ?? 'auto', compressor },
        input,
        popts,
      )
    },
    async pushMany(files, mopts) {
      live()
      const h = await ready()
      return pushMany(
        { http: h, profile: o.profile ?? DEFAULT_PROFILE, hash: o.hash ?? 'blake3', chunkOptions, concurrency: o.concurrency, packSize: o.packSize, compression: o.compression ?? 'auto', compressor },
        files,
        mopts,
      )
    },
    async pull(name, popts) {
      live()
      return (await pull(await ready(), name, popts)).stream
    },
    async pullWithInfo(name, popts) {
      live()
      return pull(await ready(), name, popts)
    },
    async list() {
      live()
      const h = await ready()
      const files: unknown = await h.requestRead('GET', h.url('files'), { retry: true }, async (res) => {
        const text = await res.text() // a stalled or failed answer throws its StoreError here
        try {
          // In slices where the answer is large (list.ts): a page's thread is not held by one parse.
          return await parseFiles(text)
        } catch (e: any) {
          throw new StoreError(`cutpoint: the store's list is not JSON: ${e?.message ?? e}`, { code: 'protocol' })
        }
      })
      if (!Array.isArray(files)) throw new StoreError("cutpoint: the store's list has no files array", { code: 'protocol' })
      return files as FileVersion[]
    },
    async fileUrl(name, version) {
      const h = await ready()
      try {
        wire().validateName(name)
      } catch (e: any) {
        throw usage(e?.message ?? String(e))
      }
      return h.fileUrl('files', name, version)
    },
    async info() {
      live()
      const h = await ready()
      const v: any = await h.requestRead('GET', `${h.base}/v1`, { retry: true }, (res) =>
        res.json().catch((e) => {
          if (e instanceof StoreError) throw e
          return undefined
        }),
      )
      if (v?.service !== 'cutpoint') throw new StoreError(`cutpoint: ${h.base} is not a cutpoint store`, { code: 'protocol' })
      return v
    },
    async pending() {
      const h = await ready()
      return pendingPushes(h.base, h.ns)
    },
    async forget(entry) {
      return forgetPush(entry)
    },
    warm() {
      if (closed) return Promise.reject(new StoreError('cutpoint: the client is closed', { code: 'usage' }))
      if (!warming) {
        const run = async () => {
          await ready()
          let profile: string
          try {
            profile = parseProfile(o.profile ?? DEFAULT_PROFILE).canonical
          } catch (e: any) {
            throw new StoreError(e?.message ?? String(e), { code: 'usage' })
          }
          // No workers, or a push using them (they are warm): nothing to do.
          if (o.workers === 0 || poolBusy) return
          const { opts: co, release } = await takePool()
          try {
            // One byte of a Blob: every worker is initialised as for a File (its buffers sized
            // for a Blob's segments), loads the WebAssembly and runs it once.
            await chunkAll(new Blob([new Uint8Array(1)]), { ...co, profile, hash: o.hash ?? 'blake3' })
          } catch (e) {
            await dropPool() // its workers failed: the next push starts new ones
            throw e
          } finally {
            release()
          }
        }
        warming = run().finally(() => (warming = undefined))
        warming.catch(() => {}) // the caller hears of a failure; a push waiting for it does not
      }
      return warming
    },
    async close() {
      closed = true
      const p = pool
      pool = undefined
      if (p) (await p.catch(() => undefined))?.close()
      const z = zpool
      zpool = undefined
      if (z) (await z.catch(() => undefined))?.terminate()
    },
  }
}
