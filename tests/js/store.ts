// A real `cutpoint serve` for the JavaScript tests (Node, Deno, Playwright): started on
// 127.0.0.1 with a free port (`--listen 127.0.0.1:0`, the address read from its first line,
// as native/cli/tests/store.rs does) over a fresh temporary directory, and stopped by `stop()`.
// Also the native CLI (`cutpoint(...)`) to compare the JavaScript client with.
import { spawn, spawnSync, type ChildProcess } from 'node:child_process'
import { existsSync, mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { createInterface } from 'node:readline'
import { root } from './helpers'

/** The native binary (`cargo build --release -p cutpoint-cli`; scripts/build.sh builds it). */
export const cutpointBin = process.env.CUTPOINT_BIN ?? `${root}native/target/release/cutpoint`

export function haveCutpoint(): boolean {
  return existsSync(cutpointBin)
}

export interface Store {
  /** `http://127.0.0.1:PORT` */
  url: string
  /** The data directory. */
  data: string
  /** Tokens by name, when started with `tokens` (see `startStore`). */
  tokens: Record<string, string>
  child: ChildProcess
  /** Kills the server (SIGKILL) and waits for it; `keep` keeps the data directory. */
  stop(keep?: boolean): Promise<void>
}

/**
 * Starts `cutpoint serve` on 127.0.0.1:0. `data`: an existing directory (a restart), else a new
 * temporary one. `tokens`: `{ name: 'ns:rw' }` writes a tokens file with one token per entry
 * (made by `cutpoint token`) and starts the store with `--tokens`. `origins`: the pages' origins
 * (`--cors-origin`), for tests that call the store from Chromium.
 */
export async function startStore(opts: { data?: string; tokens?: Record<string, string>; args?: string[]; origins?: string[] } = {}): Promise<Store> {
  if (!haveCutpoint()) throw new Error(`${cutpointBin} is missing: build it with \`cargo build --release -p cutpoint-cli\` in native/`)
  const data = opts.data ?? mkdtempSync(join(tmpdir(), 'cutpoint-store-'))
  const args = ['serve', '--data', data, '--listen', '127.0.0.1:0', ...(opts.args ?? [])]
  // The web pages allowed to call the store (an open store answers none by default).
  for (const o of opts.origins ?? []) args.push('--cors-origin', o)
  const tokens: Record<string, string> = {}
  if (opts.tokens) {
    const file = `${data}.tokens`
    for (const [k, grant] of Object.entries(opts.tokens)) {
      const [ns, mode] = grant.split(':')
      const r = spawnSync(cutpointBin, ['token', '--ns', ns, '--tokens', file, ...(mode === 'r' ? ['--read-only'] : [])], { encoding: 'utf8' })
      if (r.status !== 0) throw new Error(`cutpoint token: ${r.stderr}`)
      tokens[k] = r.stdout.trim()
    }
    args.push('--tokens', file)
  }
  const child = spawn(cutpointBin, args, { stdio: ['ignore', 'pipe', 'pipe'] })
  let stderr = ''
  child.stderr!.on('data', (b) => (stderr += b))
  const url = await new Promise<string>((resolve, reject) => {
    const rl = createInterface({ input: child.stdout! })
    const timer = setTimeout(() => reject(new Error(`cutpoint serve did not start in 30 s: ${stderr}`)), 30_000)
    rl.once('line', (line) => {
      clearTimeout(timer)
      const m = /^cutpoint serve: listening on (\S+)/.exec(line.trim())
      if (m) resolve(m[1])
      else reject(new Error(`unexpected first line from cutpoint serve: ${line} ${stderr}`))
    })
    child.once('exit', (code) => {
      clearTimeout(timer)
      reject(new Error(`cutpoint serve exited (${code}) before listening: ${stderr}`))
    })
  })
  // Keep reading stdout so that the server never blocks on a full pipe.
  child.stdout!.resume()
  const exited = new Promise<void>((r) => child.once('exit', () => r()))
  return {
    url,
    data,
    tokens,
    child,
    async stop(keep = false) {
      if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL')
      await exited
      if (!keep && !opts.data) {
        rmSync(data, { recursive: true, force: true })
        rmSync(`${data}.tokens`, { force: true })
      }
    },
  }
}

/** Runs the native CLI; `--store URL` is added when `store` is given. */
export function cutpoint(args: string[], store?: Store, env: Record<string, string> = {}) {
  const r = spawnSync(cutpointBin, [...args, ...(store ? ['--store', store.url] : [])], {
    encoding: 'utf8',
    env: { ...process.env, CUTPOINT_TOKEN: '', ...env },
    maxBuffer: 256 << 20,
    timeout: 300_000,
  })
  return { status: r.status, stdout: r.stdout, stderr: r.stderr }
}

/** `cutpoint push --json` of one file: its JSON report. */
export function nativePush(store: Store, file: string, name: string, extra: string[] = []): Record<string, any> {
  const r = cutpoint(['push', file, '--name', name, '--json', ...extra], store)
  if (r.status !== 0) throw new Error(`cutpoint push failed (${r.status}): ${r.stderr}`)
  return JSON.parse(r.stdout.trim().split('\n').pop()!)
}
