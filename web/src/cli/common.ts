// What the CLI's subcommands share: failures and their exit codes (as the native CLI's:
// 0 success; 1 an input could not be read or written, or a store request failed; 2 bad usage or
// options; 3 restored data did not verify), the store flags, sizes, and the progress bar.
import process from 'node:process'
import { StoreError } from '../client/errors.js'

export class Fail extends Error {
  constructor(
    readonly code: number,
    message: string,
  ) {
    super(message)
  }
}

export const usageFail = (m: string) => new Fail(2, m)

/** A library error as a failure with the native CLI's exit code. */
export function failOf(e: unknown): Fail {
  if (e instanceof Fail) return e
  const msg = String((e as any)?.message ?? e).replace(/^cutpoint: /, '')
  if (e instanceof StoreError) return new Fail(e.code === 'usage' ? 2 : e.code === 'verify' ? 3 : 1, msg)
  // The library's option checks (profile, workers, ...) throw TypeErrors or say what is invalid.
  if (e instanceof TypeError || /profile|unknown|must be|invalid/i.test(msg)) return new Fail(2, msg)
  return new Fail(1, msg)
}

export const DEFAULT_STORE = 'http://127.0.0.1:7373'

export const storeFlags = {
  store: { type: 'string' },
  ns: { type: 'string' },
  token: { type: 'string' },
  timeout: { type: 'string' },
  retries: { type: 'string' },
} as const

/**
 * The store flags as `createClient` options: `--store`, `--ns`, `--token`, `--timeout SECS`
 * (idle timeout, default 60) and `--retries N` (default 3, as the native CLI's), each with its
 * `CUTPOINT_*` variable.
 */
export function storeOf(v: { store?: string; ns?: string; token?: string; timeout?: string; retries?: string }) {
  const timeout = v.timeout ?? process.env.CUTPOINT_TIMEOUT ?? '60'
  const secs = Number(timeout)
  if (!(timeout.trim() !== '' && secs > 0 && secs <= 86400)) throw usageFail(`--timeout '${timeout}' is not a number of seconds between 0 and 86400 (e.g. 60 or 1.5)`)
  const retries = v.retries ?? process.env.CUTPOINT_RETRIES ?? '3'
  const n = Number(retries)
  if (!(retries.trim() !== '' && Number.isInteger(n) && n >= 0 && n <= 20)) throw usageFail(`--retries '${retries}' is not a number of retries (0..20)`)
  return {
    store: v.store ?? process.env.CUTPOINT_STORE ?? DEFAULT_STORE,
    namespace: v.ns ?? process.env.CUTPOINT_NS ?? 'default',
    token: v.token ?? (process.env.CUTPOINT_TOKEN || undefined),
    timeout: Math.max(1, Math.round(secs * 1000)),
    retries: n,
  }
}

export const engineFlags = {
  profile: { type: 'string', short: 'p' },
  threads: { type: 'string', short: 't' },
  hash: { type: 'string' },
} as const

export function engineOf(v: { profile?: string; threads?: string; hash?: string }, needHash = false) {
  let workers: number | undefined
  if (v.threads !== undefined) {
    const n = Number(v.threads)
    if (!Number.isInteger(n) || n < 0 || n > 256) throw usageFail(`--threads '${v.threads}' is not a number of threads (0..256)`)
    workers = n === 0 ? undefined : n
  }
  const hash = v.hash ?? 'blake3'
  if (!['blake3', 'sha256', 'none'].includes(hash)) throw usageFail(`--hash '${hash}': one of blake3, sha256, none`)
  if (needHash && hash === 'none') throw usageFail('a push needs chunk fingerprints: --hash blake3 or sha256')
  return { profile: v.profile, workers, hash: hash as 'blake3' | 'sha256' | 'none' }
}

/** `8m`, `64k`, `4096` (as the native CLI's sizes: k/m/g are powers of 1024). */
export function parseSize(s: string): number | undefined {
  const m = /^\s*(\d+)\s*([kmg]?)\s*$/i.exec(s)
  if (!m) return undefined
  return Number(m[1]) * { '': 1, k: 1 << 10, m: 1 << 20, g: 1 << 30 }[m[2].toLowerCase() as '' | 'k' | 'm' | 'g']
}

/** Bytes for people: 1.5 MiB. */
export function human(n: number): string {
  const U = ['B', 'KiB', 'MiB', 'GiB', 'TiB']
  let v = n
  let i = 0
  while (v >= 1024 && i + 1 < U.length) {
    v /= 1024
    i++
  }
  return i === 0 ? `${n} B` : `${v.toFixed(1)} ${U[i]}`
}

/** A progress bar on standard error, only on a terminal (never with --json). */
export function progressBar(show: boolean, label: string) {
  const tty = show && !!process.stderr.isTTY
  let last = 0
  return {
    update(done: number, total: number | undefined, rate: number, msg = '') {
      if (!tty) return
      const now = Date.now()
      if (now - last < 100) return
      last = now
      const width = Math.max(10, Math.min(40, (process.stderr.columns ?? 80) - 70))
      const frac = total ? Math.min(1, done / total) : 0
      const bar = total ? '#'.repeat(Math.round(frac * width)).padEnd(width, '-') : ''
      const line = `${label} ${human(done)}${total !== undefined ? `/${human(total)}` : ''} ${(rate / 1e6).toFixed(0)} MB/s ${bar} ${msg}`
      process.stderr.write(`\r\x1b[2K${line.slice(0, (process.stderr.columns ?? 120) - 1)}`)
    },
    clear() {
      if (tty) process.stderr.write('\r\x1b[2K')
    },
  }
}
