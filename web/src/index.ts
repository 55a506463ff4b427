// cutpoint for browsers, Node and Deno: SS-CDC chunking and fingerprints over a worker pool.
//
// The algorithms live once, in the Rust core compiled to WebAssembly. The library orchestrates:
// workers run stage 1 over their own slices (the bytes [a - W, b) decide the candidates of the
// positions [a, b), whatever else is cut where) and fingerprint chunks; the coordinator feeds the
// slices' candidates to the core's stage 2 in file order and emits chunks in file order
// (P-Dedupe's ordered parallel fingerprinting). The main thread never holds a whole Blob/file.
// This file is the public API.

import { hex } from './hex.js'
import { stage1Job } from '../../common/protocol.js'
import { newTable, type HintTable } from './rapid.js'
import { simdSupported, type Flavor } from '../../common/wasm.js'
import { optInt, optOneOf, options, optString, shown } from './check.js'
import { iterable, type Chunk, type ChunkIterable } from './emitter.js'
import { chunkRandom, chunkRapid, chunkStream } from './loops.js'
import { checkChunkOptions, DEFAULT_PROFILE, resolve, setMinSpan, type ChunkOptions } from './options.js'
import { need, parseProfile } from './runtime.js'
import { blobCloneable, sourceOf } from './sources.js'
import { startPool } from './workers.js'

// The files behind this one: runtime.ts (init, the wasm instance, profiles), options.ts (the
// options and their resolution), workers.ts (pools), sources.ts (inputs), emitter.ts (chunks in
// order, fingerprint jobs), loops.ts (the chunk loops), rapid.ts (RapidCDC), pool.ts (workers).
export { simdSupported, type Flavor }
export { HintTable, CRITERIA, nativeBlockSize } from './rapid.js'
export type { Criterion, RapidOptions, RapidResult, RapidStats, RecipeSource, CacheSpec, TableOptions } from './rapid.js'
export type { Chunk, ChunkIterable } from './emitter.js'
export type { ChunkOptions, HashName } from './options.js'
export { MIN_SPAN, MIN_SEGMENT_SIZE } from './options.js'
export { init, info, parseProfile, type InitInfo } from './runtime.js'
export { createPool, type WorkerPool } from './workers.js'
export { createChunker, type Chunker } from './loops.js'

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

/**
 * Chunks `input` (Uint8Array, Blob/File, ReadableStream of Uint8Array, or a path on Node/Deno) and
 * yields `{offset, length, hash}` in file order. Same boundaries and digests as the native CLI.
 */
export function chunk(input: Uint8Array | Blob | ReadableStream<Uint8Array> | string, opts: ChunkOptions = {}): ChunkIterable {
  need()
  opts = checkChunkOptions(opts)
  if (opts.rapid) return chunkRapid(input, opts)
  if (typeof ReadableStream !== 'undefined' && input instanceof ReadableStream) return iterable(chunkStream(input, opts))
  if (typeof Blob !== 'undefined' && input instanceof Blob && !blobCloneable(input)) return iterable(chunkStream(input.stream(), opts, true))
  const src = sourceOf(input as Uint8Array | Blob | string)
  return iterable(chunkRandom(src, opts))
}

/** Collects every chunk (convenience for small inputs and tests). */
export async function chunkAll(input: Parameters<typeof chunk>[0], opts: ChunkOptions = {}): Promise<Chunk[]> {
  const out: Chunk[] = []
  for await (const b of chunk(input, opts).batches()) for (const c of b) out.push(c)
  return out
}

/** @internal Test hooks, not part of the API: they may change or go without notice. */
export const __test = {
  /**
   * Sets the smallest stage-1 job (default MIN_SPAN) and returns the previous one: tests
   * that check odd, tiny jobs give the same chunks lower it.
   */
  minSpan(n: number): number {
    return setMinSpan(n)
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

// The store client (web/src/client/): push only novel chunks, pull verified, list.
export { createClient, type Client, type ClientOptions, type FileVersion } from './client/client.js'
export { StoreError } from './client/errors.js'
export type { PushOptions, PushProgress, PushResult, ChunkInfo } from './client/push.js'
export type { ManyInput, PushManyOptions, PushManyProgress, PushManyResult, PushManyFailure } from './client/many.js'
export type { PullOptions, PullInfo } from './client/pull.js'
export type { RetryEvent } from './client/http.js'
export type { PushInput } from './client/input.js'
export type { PendingPush, Resumed } from './client/journal.js'
