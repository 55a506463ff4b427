// Shared by the library (web/src) and the worker (worker/).
// Loads one of the two WebAssembly builds (simd128 or plain) once per realm (page, worker).
// The choice is a feature test (`WebAssembly.validate` on a tiny SIMD module) unless forced.
// The simd128 build comes in two variants from the same source with the same results: where the
// engine has relaxed SIMD (validated the same way) the loader takes the one built with it (its
// stage-1 lookups are `i8x16.relaxed_swizzle`, one `pshufb` on x64); CUTPOINT_WASM_RELAXED=0
// (environment in Node, or a global in a page) keeps the plain simd128 variant.

export type Flavor = 'simd128' | 'plain'

/** The wasm-bindgen glue's exports we use (see wasm/src/lib.rs). */
export interface WasmModule {
  buildId(): string
  backends(): string[]
  defaultBackend(profile?: string | null): string
  parseProfile(profile: string): {
    canonical: string
    family: string
    window: number
    min: number
    avg: number
    max: number
    twoClasses: boolean
    free(): void
  }
  Stage1: new (profile: string, backend: string, capacity: number) => WasmStage1
  Stage2: new (profile: string) => WasmStage2
  Hasher: new (alg: string, capacity: number) => WasmHasher
  digest(alg: string, bytes: Uint8Array): Uint8Array
  referenceCuts(profile: string, bytes: Uint8Array): Float64Array
  RapidTable: new (profile: string, hash: string, listLen: number, maxEntries: number) => WasmRapidTable
  RapidRun: new (table: WasmRapidTable, profile: string, hash: string, criterion: string, block: number, backend: string, recipe: boolean) => WasmRapidRun
  hintCacheVersion(): number
  // The store's wire format (native/core/src/protocol), for the client (web/src/client/).
  packHeader(hash: string, headsFirst?: boolean, zstd?: boolean): Uint8Array
  packMaxHeadsFirst(): number
  fitPackTarget(want: number, maxChunk: number, maxPack: number): number
  fitPackChunks(storeMax?: number): number
  packFrameHead(len: number, id: Uint8Array, compressed?: boolean): Uint8Array
  /** A compressed frame's data (raw length + zstd frame), or undefined where it saves < 1/16. */
  compressChunk(data: Uint8Array, level: number): Uint8Array | undefined
  /** The zstd level of a compression setting ('auto', 'max'; undefined for 'off'). */
  compressionLevel(mode: string): number | undefined
  /** [chunks compressed together, the sample tried after a group where none compressed]. */
  compressGroupSizes(): Uint32Array
  CompressSampler: new () => WasmCompressSampler
  /** Per chunk a u32 LE stored length (bit 31: compressed), then the compressed frames' data. */
  compressGroup(data: Uint8Array, lengths: Uint32Array, level: number): Uint8Array
  packEnd(count: number): Uint8Array
  packedLen(lengths: Uint32Array): number
  maxQueryIds(): number
  queryEncode(ids: Uint8Array): Uint8Array
  queryDecode(body: Uint8Array, asked: number): Uint8Array
  validateNamespace(ns: string): void
  validateName(name: string): void
  encodeSegment(s: string): string
  StoreRecipe: { new (profile: string, hash: string): WasmStoreRecipe; parse(bytes: Uint8Array): WasmStoreRecipe }
  // Recipe parts and batch commits (PROTOCOL.md 3.7, 4.14).
  PartSink: new (profile: string, hash: string, maxRecipe: number | undefined, partsOk: boolean) => WasmPartSink
  /** A push's window on its base version's parts (`?parts=1` text; undefined: it names none, or another profile/fingerprint). */
  BaseParts: { of(recipe: Uint8Array, profile: string, hash: string, deltas: boolean): WasmBaseParts | undefined; windowBytes(): number }
  StoreBatch: new () => WasmStoreBatch
  minPartText(hash: string): number
  recipeFloor(len: number, maxChunk: number): number
  maxBatchFiles(): number
  /** Whether a recipe's text names parts (`?parts=1`): no delta base then. */
  recipeHasParts(bytes: Uint8Array): boolean
}
/** A recipe cut into parts as it is chunked (wasm/src/lib.rs `PartSink`: the core's `PartCutter`). */
export interface WasmPartSink {
  readonly inParts: boolean
  readonly count: number
  readonly bytes: number
  readonly ready: number
  readonly parts: number
  readonly closedEntries: number
  /** The file offset where the open part starts. */
  readonly partStart: number
  /** Returns whether the recipe is (now) in parts. */
  add(ids: Uint8Array, sizes: Uint32Array): boolean
  /** As add; each part closed gets its part delta against `base` where one is shorter (PROTOCOL.md 3.8). */
  addWith(ids: Uint8Array, sizes: Uint32Array, base: WasmBaseParts): boolean
  takePart(): WasmPartOut | undefined
  seal(): string
  /** As seal; the last part gets its part delta against `base`. */
  sealWith(base: WasmBaseParts): string
  recipeText(): Uint8Array
  free(): void
}
/** One part (wasm/src/lib.rs `PartOut`). */
export interface WasmPartOut {
  readonly text: Uint8Array
  readonly id: string
  readonly count: number
  readonly bytes: number
  /** Its part delta against a base part, where `addWith`/`sealWith` found a shorter one. */
  readonly delta: Uint8Array | undefined
  free(): void
}
/** A push's window on its base version's parts (wasm/src/lib.rs `BaseParts`: the core's `PartWindow`). */
export interface WasmBaseParts {
  /** Drops the parts ending at or before `lo`; the line numbers of the parts to read now (starting before `hi`), in order. */
  advance(lo: number, hi: number): Uint32Array
  lineId(i: number): string
  /** Line `i`'s part as the store sent it; throws where it does not hash to its id or parse. */
  load(i: number, text: Uint8Array): void
  skip(): void
  /** One byte per id (back to back): 1 where a loaded base part holds it. */
  known(ids: Uint8Array): Uint8Array
  readonly size: number
  readonly readBytes: number
  readonly unreadable: number
  free(): void
}
/** A batch commit body being built (wasm/src/lib.rs `StoreBatch`: the core's `BatchWriter`). */
export interface WasmStoreBatch {
  readonly count: number
  add(name: string, body: Uint8Array): void
  lenWith(name: string, bodyLen: number): number
  finish(): Uint8Array
  free(): void
}
/** The clients' sampling rule over the compression groups of one input (wasm/src/lib.rs `CompressSampler`). */
export interface WasmCompressSampler {
  first(n: number): number
  tryRest(anyFirst: boolean): boolean
  record(any: boolean): void
  free(): void
}
/** A file recipe (wasm/src/lib.rs `StoreRecipe`: the core's `Recipe`, file digest and delta encoder). */
export interface WasmStoreRecipe {
  readonly profile: string
  readonly hash: string
  readonly count: number
  readonly bytes: number
  readonly digestHex: string
  add(ids: Uint8Array, sizes: Uint32Array): void
  ids(from: number, to: number): Uint8Array
  sizes(from: number, to: number): Uint32Array
  digestMatches(): boolean
  seal(): string
  text(): Uint8Array
  delta(base: WasmStoreRecipe, baseVersion: number): Uint8Array
  free(): void
}
/** The core's hint table (wasm/src/lib.rs `RapidTable`). */
export interface WasmRapidTable {
  readonly profile: string
  readonly hash: string
  readonly listLen: number
  readonly size: number
  addRecipe(bytes: Uint8Array): number
  loadCache(bytes: Uint8Array): number
  exportCache(maxBytes: number): Uint8Array
  free(): void
}
/** The core's RapidCDC over one input pushed in pieces (wasm/src/lib.rs `RapidRun`). */
export interface WasmRapidRun {
  readonly criterion: string
  readonly backend: string
  readonly demand: number
  readonly done: boolean
  readonly tableSize: number
  push(bytes: Uint8Array): void
  end(): void
  run(max: number): number
  /** Fallback blocks of at least this many positions get their stage 1 from the caller (0: none). */
  externalStage1(minPositions: number): void
  /** `[a, q)`: the positions whose stage-1 candidates are awaited; empty when none are. */
  needed(): Float64Array
  /** A copy of the input bytes `[a, b)` the run holds. */
  bytes(a: number, b: number): Uint8Array
  /** Where the input bytes `[a, b)` lie in wasm memory (valid until the next call into the run). */
  bytesPtr(a: number, b: number): number
  supplyCandidates(a: number, b: number, strict: Uint32Array, loose: Uint32Array): void
  /** Stage 1 of the awaited positions `[a, b)` in this instance instead (same chunks). */
  scanStage1(a: number, b: number): void
  offsets(): Float64Array
  lengths(): Uint32Array
  digests(): Uint8Array
  found(): Uint8Array
  stats(): Float64Array
  recipe(): Uint8Array
  finish(table: WasmRapidTable): void
  free(): void
}
export interface WasmStage1 {
  readonly backend: string
  readonly capacity: number
  inputPtr(): number
  scan(len: number, p: number, q: number, laneSegment: number): void
  strictOffsets(): Uint32Array
  looseOffsets(): Uint32Array
  free(): void
}
export interface WasmStage2 {
  feed(p: number, q: number, strict: Uint32Array, loose: Uint32Array): Float64Array
  finish(n: number): Float64Array
  readonly start: number
  free(): void
}
export interface WasmHasher {
  readonly capacity: number
  inputPtr(): number
  reserve(capacity: number): void
  digests(lengths: Uint32Array): Uint8Array
  free(): void
}

export interface Wasm {
  mod: WasmModule
  memory: WebAssembly.Memory
  flavor: Flavor
  /** Whether this is the relaxed-SIMD variant of the simd128 build. */
  relaxed: boolean
  /** The compiled module: workers are sent it instead of fetching and compiling again. */
  module: WebAssembly.Module
  /** A view of `len` bytes of wasm memory at `ptr` (make a new one after any call that may grow memory). */
  view(ptr: number, len: number): Uint8Array
}

// (module (func (result v128) i32.const 0 i8x16.splat i8x16.popcnt)) — as wasm-feature-detect.
const SIMD_PROBE = new Uint8Array([
  0, 97, 115, 109, 1, 0, 0, 0, 1, 5, 1, 96, 0, 1, 123, 3, 2, 1, 0, 10, 10, 1, 8, 0, 65, 0, 253, 15, 253, 98, 11,
])

/** Whether this engine runs WebAssembly simd128. */
let simd: boolean | undefined
export function simdSupported(): boolean {
  // Asked once: every chunk() resolves its flavor, and validating the probe took ~1 ms a call
  // in Chromium (a push of 1,000 small files chunks 1,000 times).
  if (simd === undefined) {
    try {
      simd = WebAssembly.validate(SIMD_PROBE)
    } catch {
      simd = false
    }
  }
  return simd
}

const g = globalThis as any
export const isDeno = typeof g.Deno !== 'undefined'
export const isNode = !isDeno && typeof g.process?.versions?.node === 'string'

// (module (func (result v128) i32.const 0 i8x16.splat i32.const 0 i8x16.splat i8x16.relaxed_swizzle))
const RELAXED_PROBE = new Uint8Array([
  0, 97, 115, 109, 1, 0, 0, 0, 1, 5, 1, 96, 0, 1, 123, 3, 2, 1, 0, 10, 15, 1, 13, 0, 65, 0, 253, 15, 65, 0, 253, 15, 253,
  128, 2, 11,
])

/** An environment variable where there is one and reading it is allowed (Deno without --allow-env throws). */
function envVar(name: string): string | undefined {
  try {
    return g.process?.env?.[name]
  } catch {
    return undefined
  }
}

/** Whether the simd128 build loads in its relaxed-SIMD variant here (see the top of this file). */
export function relaxedSimdSupported(): boolean {
  if (String(envVar('CUTPOINT_WASM_RELAXED') ?? g.CUTPOINT_WASM_RELAXED ?? '') === '0') return false
  try {
    return WebAssembly.validate(RELAXED_PROBE)
  } catch {
    return false
  }
}

/** Which build `flavor` ('auto' or undefined: by feature test) resolves to; throws if unusable. */
export function resolveFlavor(flavor?: Flavor | 'auto'): Flavor {
  if (!flavor || flavor === 'auto') return simdSupported() ? 'simd128' : 'plain'
  if (flavor !== 'simd128' && flavor !== 'plain') {
    throw new Error(`cutpoint: unknown wasm build '${flavor}' (known: simd128, plain, auto)`)
  }
  if (flavor === 'simd128' && !simdSupported()) {
    throw new Error('cutpoint: this engine has no WebAssembly simd128; use the plain build')
  }
  return flavor
}

const cache = new Map<Flavor, Promise<Wasm>>()

/** Loads (once) and returns the wasm build; `module`: an already compiled one (in workers). */
export function loadWasm(flavor?: Flavor | 'auto', module?: WebAssembly.Module): Promise<Wasm> {
  const f = resolveFlavor(flavor)
  let p = cache.get(f)
  if (!p) {
    p = doLoad(f, module)
    p.catch(() => cache.delete(f))
    cache.set(f, p)
  }
  return p
}

async function readBytes(url: URL): Promise<Uint8Array> {
  if (isDeno) return await g.Deno.readFile(url)
  const fsName = 'node:fs/promises'
  const fs = await import(/* @vite-ignore */ fsName)
  return new Uint8Array(await fs.readFile(url))
}

async function doLoad(f: Flavor, compiled?: WebAssembly.Module): Promise<Wasm> {
  // Literal paths so bundlers (Vite) emit both builds as assets.
  let mod: any
  let url: URL
  const relaxed = f === 'simd128' && relaxedSimdSupported()
  if (relaxed) {
    // @ts-ignore — generated by wasm-bindgen at build time
    mod = await import('../wasm/simd128-relaxed/cutpoint_wasm.js')
    url = new URL('../wasm/simd128-relaxed/cutpoint_wasm_bg.wasm', import.meta.url)
  } else if (f === 'simd128') {
    // @ts-ignore — generated by wasm-bindgen at build time
    mod = await import('../wasm/simd128/cutpoint_wasm.js')
    url = new URL('../wasm/simd128/cutpoint_wasm_bg.wasm', import.meta.url)
  } else {
    // @ts-ignore — generated by wasm-bindgen at build time
    mod = await import('../wasm/plain/cutpoint_wasm.js')
    url = new URL('../wasm/plain/cutpoint_wasm_bg.wasm', import.meta.url)
  }
  let module = compiled
  if (!module) {
    if (isNode || isDeno || url.protocol === 'file:') {
      module = await WebAssembly.compile((await readBytes(url)) as Uint8Array<ArrayBuffer>)
    } else {
      const res = await fetch(url)
      if (!res.ok) throw new Error(`cutpoint: cannot load ${url}: HTTP ${res.status}`)
      module = (res.headers.get('content-type') ?? '').startsWith('application/wasm')
        ? await WebAssembly.compileStreaming(res)
        : await WebAssembly.compile(await res.arrayBuffer())
    }
  }
  const exports: any = mod.initSync({ module })
  const memory: WebAssembly.Memory = exports.memory
  return {
    mod: mod as WasmModule,
    memory,
    flavor: f,
    relaxed,
    module,
    view: (ptr, len) => new Uint8Array(memory.buffer, ptr, len),
  }
}
