// Messages between the coordinator (web/src) and the workers (worker/). Every type is prefixed
// `cutpoint:`. This directory (common/) holds what both sides use: this protocol and the wasm
// loader; web/src and worker/ import it, and neither imports the other's files.
import type { Flavor } from './wasm.js'

/** Where a worker reads its slices from. */
export type SourceDesc =
  /** A Blob or File: the worker reads `blob.slice(start, end)` itself. */
  | { kind: 'blob'; blob: Blob }
  /** A file by path (Node, Deno): the worker opens it and reads at offsets. */
  | { kind: 'path'; path: string }
  /** Bytes in a SharedArrayBuffer: the worker copies its slice out. */
  | { kind: 'shared'; bytes: Uint8Array }
  /** The coordinator sends each job's bytes (streams, ordinary Uint8Arrays). */
  | { kind: 'message' }

export interface InitMsg {
  type: 'cutpoint:init'
  id: number
  flavor: Flavor
  /** The compiled wasm module (not sent to Deno workers, which compile their own). */
  module?: WebAssembly.Module
  profile: string
  backend: string
  hash: string
  /** How SHA-256 is computed: 'auto' (WebCrypto where the worker has it, else wasm), 'wasm', 'webcrypto'. */
  hashImpl: 'auto' | 'wasm' | 'webcrypto'
  /** Largest stage-1 slice in bytes (span + window). */
  capacity: number
  source: SourceDesc
}

/** Stage 1 of positions `[a, b)`, from the bytes `[start, b)` (`start = max(0, a - W)`). */
export interface Stage1Msg {
  type: 'cutpoint:stage1'
  id: number
  start: number
  a: number
  b: number
  /** Lane segment within the slice (0: the kernel splits it over its lanes). */
  lane: number
  bytes?: Uint8Array
  /** Keep the slice's bytes under this key for a later hash job on the same worker (read once). */
  retain?: number
}

/** Digests of consecutive chunks starting at `start` with these lengths. */
export interface HashMsg {
  type: 'cutpoint:hash'
  id: number
  start: number
  lengths: Uint32Array
  bytes?: Uint8Array
  /** The retained slice that holds these chunks' bytes (from its start on); dropped afterwards. */
  slice?: number
  /**
   * Chunks of this job (indices into `lengths`, ascending) also compressed at `level` while
   * their bytes are here (`compressGroup`): a push's compression sample, tried ahead so that
   * the chunks are not read from the file a second time (see push.ts `trialOf`).
   */
  trial?: { level: number; idx: Uint32Array }
}

/** Drops a retained slice. */
export interface ReleaseMsg {
  type: 'cutpoint:release'
  id: number
  slice: number
}

/**
 * Novel chunks of a push compressed (PROTOCOL.md 3.1; wasm `compressGroup`), of these `lengths`:
 * `bytes` holds them one after another, or (a File/Blob pushed from a browser) the worker reads
 * them itself from `blob` at `offsets` (no read, copy or transfer of them on the page's thread).
 */
export interface CompressMsg {
  type: 'cutpoint:compress'
  id: number
  level: number
  lengths: Uint32Array
  bytes?: Uint8Array
  blob?: Blob
  /** Each chunk's offset in `blob`. */
  offsets?: Float64Array
}

/** @internal Test hook, not part of the API: the worker dies (uncaught error) while handling this. */
export interface CrashMsg {
  type: 'cutpoint:crash'
  id: number
}

/**
 * Many small inputs chunked whole, each on its own (stage 1, stage 2 and fingerprints in the
 * worker): one message for many files, bytes moved to the worker or Blobs/Files it reads itself
 * (their size looked up and their bytes read there, not on the page's thread). A Blob over `max`
 * bytes is only measured; each input chunked must fit the worker's stage-1 buffer (`capacity`).
 */
export interface ManyMsg {
  type: 'cutpoint:many'
  id: number
  files: (Uint8Array | Blob)[]
  max: number
}

export type Request = InitMsg | Stage1Msg | HashMsg | ReleaseMsg | CompressMsg | ManyMsg | CrashMsg

/** `Omit` over each member of a union (the plain `Omit` of a union keeps only the common keys). */
export type OmitEach<T, K extends PropertyKey> = T extends unknown ? Omit<T, K> : never
/** A request before the pool numbers it. */
export type Job = OmitEach<Request, 'id'>

/**
 * The stage-1 job over the positions `[a, b)` of a slice read from `start = max(0, a - window)`:
 * with `bytes` (the slice, moved to the worker) or without (the worker reads its source);
 * `retain`: the worker keeps the bytes under this key for a later hash job.
 */
export function stage1Job(
  a: number,
  b: number,
  window: number,
  lane: number,
  bytesOf?: (start: number, end: number) => Uint8Array | undefined,
  retain?: number,
): { msg: OmitEach<Stage1Msg, 'id'>; transfer: ArrayBuffer[] } {
  const start = Math.max(0, a - window)
  const bytes = bytesOf?.(start, b)
  const msg: OmitEach<Stage1Msg, 'id'> = { type: 'cutpoint:stage1', start, a, b, lane, bytes }
  if (retain !== undefined) msg.retain = retain
  return { msg, transfer: bytes ? [bytes.buffer as ArrayBuffer] : [] }
}

export interface ReadyRes {
  type: 'cutpoint:ready'
  id: number
  buildId: string
  backend: string
}
export interface Stage1Res {
  type: 'cutpoint:stage1'
  id: number
  strict: Uint32Array
  loose: Uint32Array
}
export interface HashRes {
  type: 'cutpoint:hash'
  id: number
  digests: Uint8Array
  /** The `trial` chunks' `compressGroup` output (as CompressRes's `out`). */
  trial?: Uint8Array
}
/** Per chunk a u32 LE stored length (bit 31: compressed), then the compressed frames' data. */
export interface CompressRes {
  type: 'cutpoint:compress'
  id: number
  out: Uint8Array
  /** The request's `bytes`, given back (moved) for the next job's: no fresh buffer per job. */
  bytes?: Uint8Array
  /** A job that reads `blob` could not read it (the file changed or went): nothing compressed. */
  error?: string
}
export interface ErrorRes {
  type: 'cutpoint:error'
  id: number
  message: string
}
export interface ReleasedRes {
  type: 'cutpoint:release'
  id: number
}
/**
 * Per input of a `cutpoint:many`: its size; its cut offsets (chunk ends, from 0) and its chunks'
 * digests end to end (absent: a Blob over `max`, or one that could not be read: `errors`); a
 * Blob's bytes as read (moved back: the caller reads novel chunks from them).
 */
export interface ManyRes {
  type: 'cutpoint:many'
  id: number
  sizes: number[]
  cuts: (Float64Array | undefined)[]
  digests: (Uint8Array | undefined)[]
  bytes: (Uint8Array | undefined)[]
  errors: (string | undefined)[]
}
export type Response = ReadyRes | Stage1Res | HashRes | ReleasedRes | CompressRes | ManyRes | ErrorRes

/** A worker's answer to one request, with the buffers it moves back. */
export interface Answer {
  res: Response
  transfer: ArrayBuffer[]
}

/** What a worker does with the requests (worker/handler.ts); the pool runs one in its own thread for `workers: 0`. */
export interface RequestHandler {
  handle(msg: Request): Promise<Answer>
  close(): Promise<void>
}
