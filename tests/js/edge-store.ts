// The edge store (edge/: the Worker over R2 and Durable Objects) in the real runtime, workerd
// through miniflare (`node edge/dev.mjs`), on 127.0.0.1 with a free port, its state in a fresh
// temporary directory; the same `Store` shape as tests/js/store.ts's `cutpoint serve`, so that
// one suite runs against both. `stop()` SIGKILLs the whole process group (node and workerd).
import { spawn, spawnSync } from 'node:child_process'
import { existsSync, mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { createInterface } from 'node:readline'
import { root } from './helpers'
import { cutpointBin, type Store } from './store'

export function haveEdge(): boolean {
  return existsSync(`${root}edge/pkg/cutpoint_edge_wasm_bg.wasm`) &&
    (existsSync(`${root}edge/node_modules/miniflare`) || existsSync(`${root}node_modules/miniflare`))
}

/**
 * Starts the edge store; `tokens` as in `startStore` (made by `cutpoint token`). `instances` > 1:
 * that many Workers over the same R2 bucket and Durable Objects; `others` holds the URLs of the
 * second and later ones.
 */
export async function startEdge(opts: { data?: string; tokens?: Record<string, string>; instances?: number; origins?: string[]; fault?: string; args?: string[] } = {}): Promise<Store & { others: string[] }> {
  if (!haveEdge()) throw new Error('the edge store is not built: run `bash scripts/build-edge.sh` (and npm ci)')
  const data = opts.data ?? mkdtempSync(join(tmpdir(), 'cutpoint-edge-'))
  const args = [`${root}edge/dev.mjs`, '--port', '0', '--dir', data, '--instances', String(opts.instances ?? 1)]
  for (const o of opts.origins ?? []) args.push('--cors-origin', o)
  if (opts.fault) args.push('--test-fault', opts.fault)
  // As startStore's: flags both take (`--max-recipe`, `--max-uploads-per-token`).
  args.push(...(opts.args ?? []))
  const others: string[] = []
  const tokens: Record<string, string> = {}
  if (opts.tokens) {
    const file = `${data}.tokens`
    rmSync(file, { force: true })
    for (const [k, grant] of Object.entries(opts.tokens)) {
      const [ns, mode] = grant.split(':')
      const r = spawnSync(cutpointBin, ['token', '--ns', ns, '--tokens', file, ...(mode === 'r' ? ['--read-only'] : [])], { encoding: 'utf8' })
      if (r.status !== 0) throw new Error(`cutpoint token: ${r.stderr}`)
      tokens[k] = r.stdout.trim()
    }
    args.push('--tokens', file)
  }
  // Its own process group, so that stop() reaches workerd (miniflare's child) too.
  const child = spawn(process.execPath, args, { stdio: ['ignore', 'pipe', 'pipe'], detached: true })
  let stderr = ''
  child.stderr!.on('data', (b) => (stderr += b))
  let url: string | undefined
  await new Promise<string>((resolve, reject) => {
    const rl = createInterface({ input: child.stdout! })
    const timer = setTimeout(() => reject(new Error(`the edge store did not start in 60 s: ${stderr}`)), 60_000)
    rl.on('line', (line) => {
      const m = /(http:\/\/127\.0\.0\.1:\d+)/.exec(line)
      if (!m) {
        clearTimeout(timer)
        reject(new Error(`unexpected line from the edge store: ${line} ${stderr}`))
      } else if (url === undefined) {
        url = m[1]
      } else {
        others.push(m[1])
      }
      if (url !== undefined && others.length + 1 === (opts.instances ?? 1)) {
        clearTimeout(timer)
        rl.removeAllListeners('line')
        resolve(url)
      }
    })
    child.once('exit', (code) => {
      clearTimeout(timer)
      reject(new Error(`the edge store exited (${code}) before listening: ${stderr}`))
    })
  })
  child.stdout!.resume()
  const exited = new Promise<void>((r) => child.once('exit', () => r()))
  return {
    url: url!,
    others,
    data,
    tokens,
    child,
    async stop(keep = false) {
      if (child.exitCode === null && child.signalCode === null) {
        try {
          process.kill(-child.pid!, 'SIGKILL')
        } catch {
          child.kill('SIGKILL')
        }
      }
      await exited
      if (!keep && !opts.data) {
        rmSync(data, { recursive: true, force: true })
        rmSync(`${data}.tokens`, { force: true })
      }
    },
  }
}
