// Versioned data and native reference output for the RapidCDC tests (Node and Chromium):
// `cutpoint gen` writes a base file and versions; the native CLI writes the base recipe, hint
// caches and the RapidCDC chunks (`cutpoint chunk --rapid C --format jsonl`) of each case.
import { execFileSync, spawnSync } from 'node:child_process'
import { copyFileSync, existsSync, mkdtempSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { root } from './helpers'

export const CRITERIA = ['ff', 'ff+mt', 'ff+rwt', 'ff+rwt+fpt'] as const
/** Threads of the native runs; the JS runs use as many workers (same largest fallback block). */
export const THREADS = 2

export interface Row {
  offset: number
  length: number
  hash: string
}

/** What the native CLI reports on stderr for `chunk --rapid`. */
export interface NativeStats {
  chunks: number
  hinted: number
  rolled: number
  hits: number[]
  misses: number[]
  fallbacks: number
  fromCache: number
}

let built = false

/**
 * The native CLI, built from this tree first (a no-op when it is up to date): the wasm module was
 * just built from the same core, and a stale binary would compare two versions of RapidCDC.
 */
export function nativeCli(): string {
  const bin = `${root}native/target/release/cutpoint`
  if (!built) {
    execFileSync('cargo', ['build', '--release', '-p', 'cutpoint-cli'], { cwd: `${root}native`, stdio: 'inherit' })
    built = true
  }
  if (!existsSync(bin)) throw new Error(`no ${bin}`)
  return bin
}

export function run(args: string[]): { stdout: string; stderr: string; status: number | null } {
  const r = spawnSync(nativeCli(), args, { encoding: 'utf8', maxBuffer: 1 << 28 })
  return { stdout: r.stdout, stderr: r.stderr, status: r.status }
}

function ok(args: string[]): { stdout: string; stderr: string } {
  const r = run(args)
  if (r.status !== 0) throw new Error(`cutpoint ${args.join(' ')}: exit ${r.status}: ${r.stderr}`)
  return r
}

export function parseStats(stderr: string): NativeStats {
  const m = /(\d+) chunks \((\d+) hinted\), (\d+) positions rolled.*hits \[([\d, ]*)\], misses \[([\d, ]*)\], fallbacks (\d+); hints: (\d+) from the cache/.exec(stderr)
  if (!m) throw new Error(`no statistics in: ${stderr}`)
  const list = (s: string) => s.split(',').filter((x) => x.trim()).map(Number)
  return { chunks: +m[1], hinted: +m[2], rolled: +m[3], hits: list(m[4]), misses: list(m[5]), fallbacks: +m[6], fromCache: +m[7] }
}

/** `cutpoint chunk [--rapid ...] --format jsonl`: the rows and (with --rapid) the statistics. */
export function nativeChunks(file: string, extra: string[] = []): { rows: Row[]; stats?: NativeStats } {
  const r = ok(['chunk', file, '--format', 'jsonl', '--threads', String(THREADS), ...extra])
  const rows = r.stdout.trim().split('\n').filter(Boolean).map((l) => JSON.parse(l))
  return { rows, stats: extra.includes('--rapid') ? parseStats(r.stderr) : undefined }
}

export interface Dataset {
  dir: string
  v0: string
  v1: string
  v2: string
  /** Recipe of v0 (regular chunks), written by `stats --rapid ff+rwt+fpt --save-recipe`. */
  recipe: string
  /** Hint cache after v0, per criterion (`chunk v0 --rapid C --hints`). */
  cache: Record<string, string>
  /** A hint cache of another profile (rabin:4k:8k:12k). */
  wrongCache: string
}

/** Generates the data set and the native artifacts (about 1-2 s). */
export function makeDataset(size = '6m', mods = 30): Dataset {
  const dir = mkdtempSync(`${tmpdir()}/cutpoint-rapid-`)
  ok(['gen', '--out', dir, '--size', size, '--versions', '2', '--mods', String(mods), '--seed', '7'])
  const d: Dataset = { dir, v0: `${dir}/v0.bin`, v1: `${dir}/v1.bin`, v2: `${dir}/v2.bin`, recipe: `${dir}/v0.recipe`, cache: {}, wrongCache: `${dir}/rabin.hints` }
  ok(['stats', '--rapid', 'ff+rwt+fpt', '--no-compare', '--threads', String(THREADS), '--save-recipe', d.recipe, d.v0])
  for (const c of CRITERIA) {
    d.cache[c] = `${dir}/v0.${c}.hints`
    ok(['chunk', d.v0, '--rapid', c, '--threads', String(THREADS), '--hints', d.cache[c]])
  }
  ok(['stats', '--rapid', 'ff', '--no-compare', '-p', 'rabin:4k:8k:12k', '--hints', d.wrongCache, d.v0])
  return d
}

/** A copy of a cache file (the native `chunk --hints` writes its cache back). */
export function copy(file: string, to: string): string {
  copyFileSync(file, to)
  return to
}
