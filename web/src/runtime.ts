// The wasm instance of this thread: `init()` loads it, everything else asks `need()` for it;
// and the profile strings it parses.
import { loadWasm, resolveFlavor, type Flavor, type Wasm } from '../../common/wasm.js'
import { optOneOf, options, shown } from './check.js'

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

export function need(): Wasm {
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


export function optWasm(v: unknown): Flavor | 'auto' | undefined {
  return optOneOf('wasm', v, ['simd128', 'plain', 'auto'] as const)
}
