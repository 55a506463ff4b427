// Shared by the restic comparison steps (restic.mjs, folder.mjs): restic pinned by
// scripts/install.sh, `cutpoint serve` on a fresh directory, commands timed without blocking the
// event loop (the counting proxy lives in this process), sizes of directories, and a counting
// HTTP proxy in front of the store (requests and body bytes, by kind).
import { spawn, spawnSync } from 'node:child_process'
import { existsSync, readdirSync, lstatSync, createReadStream } from 'node:fs'
import { createServer, request, Agent } from 'node:http'
import os from 'node:os'

export const root = new URL('../../', import.meta.url).pathname
export const cli = `${root}native/target/release/cutpoint`
export const log = (l) => process.stderr.write(`${l}\n`)
export const RESTIC_VERSION = '0.18.1'
// The TypeScript releases of issue #28's comparison (restic.mjs, browser-comp.mjs): patch steps
// (5.0.2 → 5.0.3 → 5.0.4, 5.9.2 → 5.9.3) and the last patch of each minor release between.
export const RELEASES = (process.env.CUTPOINT_RESTIC_RELEASES ?? '5.0.2 5.0.3 5.0.4 5.1.3 5.2.2 5.3.3 5.4.5 5.5.4 5.6.3 5.7.3 5.8.3 5.9.2 5.9.3').split(/\s+/).filter(Boolean)
export const emit = (row) => process.stdout.write(`${JSON.stringify(row)}\n`)

/** The pinned restic (scripts/install.sh builds it with `go install`), or `{ reason }`. */
export function findRestic() {
  const gobin = process.env.CUTPOINT_GOBIN ?? `${os.homedir()}/go/bin`
  const cands = [process.env.CUTPOINT_RESTIC, `${gobin}/restic`, ...(process.env.PATH ?? '').split(':').map((d) => `${d}/restic`)].filter(Boolean)
  for (const c of cands) {
    if (!existsSync(c)) continue
    const v = spawnSync(c, ['version'], { encoding: 'utf8' })
    const line = (v.stdout ?? '').trim().split('\n')[0]
    if (v.status === 0 && line.includes(`restic ${RESTIC_VERSION}`)) return { exe: c, version: line }
    log(`restic at ${c} is not ${RESTIC_VERSION}: ${line || v.error?.message}`)
  }
  return { reason: `restic ${RESTIC_VERSION} not found (scripts/install.sh builds it into ${gobin} with go install; CUTPOINT_RESTIC=PATH picks another)` }
}

/** `cutpoint push --help` as text (what this build accepts). */
export function pushHelp() {
  return spawnSync(cli, ['push', '--help'], { encoding: 'utf8' }).stdout ?? ''
}

/**
 * Runs a command to its end without blocking: `{ s, out, err, code }`; a non-zero exit throws,
 * and so does a command still running after `timeoutS` (killed).
 */
export function run(cmd, args, { env = {}, cwd, allowFail = false, timeoutS = 900 } = {}) {
  return new Promise((resolve, reject) => {
    const t0 = performance.now()
    const p = spawn(cmd, args, { cwd, env: { ...process.env, ...env }, stdio: ['ignore', 'pipe', 'pipe'] })
    const out = []
    const err = []
    let timedOut = false
    const timer = setTimeout(() => {
      timedOut = true
      p.kill('SIGKILL')
    }, timeoutS * 1000)
    p.stdout.on('data', (d) => out.push(d))
    p.stderr.on('data', (d) => err.push(d))
    p.on('error', (e) => (clearTimeout(timer), reject(e)))
    p.on('close', (code) => {
      clearTimeout(timer)
      const r = { s: (performance.now() - t0) / 1000, out: Buffer.concat(out).toString('utf8'), err: Buffer.concat(err).toString('utf8'), code }
      const what = `${cmd.replace(root, '')} ${args.slice(0, 3).join(' ')}…`
      if (timedOut) reject(new Error(`${what} still running after ${timeoutS} s: killed`))
      else if (code !== 0 && !allowFail) reject(new Error(`${what} exited with ${code}: ${r.err.trim().split('\n').slice(-3).join(' / ')}`))
      else resolve(r)
    })
  })
}

/** Starts `cutpoint serve --data DIR` on 127.0.0.1 (a free port, or `port`): `{ url, stop() }`. */
export function startStore(dir, port = 0) {
  return new Promise((resolve, reject) => {
    const p = spawn(cli, ['serve', '--data', dir, '--listen', `127.0.0.1:${port}`], { stdio: ['ignore', 'pipe', 'pipe'] })
    let buf = ''
    let done = false
    p.stderr.on('data', (d) => process.stderr.write(d))
    p.stdout.on('data', (d) => {
      buf += d
      const m = buf.match(/listening on (http:\/\/127\.0\.0\.1:\d+)/)
      if (m && !done) {
        done = true
        resolve({
          url: m[1],
          pid: p.pid,
          stop: () => new Promise((res) => (p.exitCode !== null ? res() : (p.once('exit', () => res()), p.kill('SIGTERM')))),
        })
      }
    })
    p.on('error', reject)
    p.on('exit', (c) => done || reject(new Error(`cutpoint serve exited with ${c} before it listened`)))
  })
}

/** Bytes of every regular file under `dir` (apparent sizes), and how many files. */
export function dirBytes(dir) {
  let bytes = 0
  let files = 0
  const walk = (d) => {
    for (const e of readdirSync(d, { withFileTypes: true })) {
      const p = `${d}/${e.name}`
      if (e.isDirectory()) walk(p)
      else if (e.isFile()) {
        bytes += lstatSync(p).size
        files++
      }
    }
  }
  if (existsSync(dir)) walk(dir)
  return { bytes, files }
}

/** A `cutpoint serve --data DIR` directory: all of it, its objects (packs, recipes) and the index. */
export function storeBytes(dir) {
  const all = dirBytes(dir)
  const objects = dirBytes(`${dir}/objects`).bytes
  const index = existsSync(dir) ? readdirSync(dir).filter((f) => f.startsWith('index.sqlite')).reduce((a, f) => a + lstatSync(`${dir}/${f}`).size, 0) : 0
  return { bytes: all.bytes, files: all.files, objects, index }
}

/** Size of `gzip -6 -c FILE` (the gzip binary, its output counted, not kept). */
export function gzipSize(file) {
  return new Promise((resolve, reject) => {
    const p = spawn('gzip', ['-6', '-c'], { stdio: ['pipe', 'pipe', 'inherit'] })
    let n = 0
    p.stdout.on('data', (d) => (n += d.length))
    p.on('error', reject)
    p.on('close', (c) => (c === 0 ? resolve(n) : reject(new Error(`gzip exited with ${c}`))))
    createReadStream(file).pipe(p.stdin)
  })
}

/** Byte-for-byte comparison of two files (`cmp -s`). */
export async function sameBytes(a, b) {
  return (await run('cmp', ['-s', a, b], { allowFail: true })).code === 0
}

// ---- restic --------------------------------------------------------------------------------------
/** A restic repository in `dir` (default settings: repository version 2, compression auto). */
export async function resticRepo(exe, dir) {
  const env = { RESTIC_PASSWORD: 'cutpoint-bench', RESTIC_REPOSITORY: `${dir}/repo`, RESTIC_CACHE_DIR: `${dir}/cache`, RESTIC_PROGRESS_FPS: '0.2' }
  await run(exe, ['init'], { env })
  return {
    dir: `${dir}/repo`,
    /** `restic backup --json`: `{ s, summary }` (summary: restic's own message, data_added_packed...). */
    async backup(paths, { cwd } = {}) {
      const r = await run(exe, ['backup', '--json', '--host', 'cutpoint-bench', ...paths], { env, cwd })
      const summary = r.out.split('\n').filter((l) => l.startsWith('{')).map((l) => JSON.parse(l)).find((m) => m.message_type === 'summary')
      if (!summary) throw new Error('restic backup printed no summary')
      return { s: r.s, summary }
    },
    /** `restic restore latest --target DIR` (timed). */
    async restore(target) {
      return (await run(exe, ['restore', 'latest', '--target', target], { env })).s
    },
  }
}

// ---- counting proxy ------------------------------------------------------------------------------
/** What a request is, by method and path (the store's routes, PROTOCOL.md §4). */
export function requestKind(method, url) {
  const path = url.split('?')[0]
  if (path === '/v1') return 'hello'
  const m = path.match(/^\/v1\/ns\/[^/]+\/([^/]+)(\/.*)?$/)
  if (!m) return 'other'
  const [, res, rest] = m
  if (res === 'query') return 'query'
  if (res === 'packs') return 'pack'
  if (res === 'commits') return 'commit-batch'
  if (res === 'parts') return rest === '/query' ? 'part-query' : method === 'POST' ? 'part' : 'part-get'
  if (res === 'files') return method === 'PUT' ? 'commit' : method === 'GET' && rest ? 'restore' : `files-${method.toLowerCase()}`
  if (res === 'recipes') return 'recipe-get'
  return res
}

/**
 * An HTTP proxy on 127.0.0.1 (a free port) forwarding every request to `upstream` and counting
 * requests (by kind), request body bytes and response body bytes. `{ url, counts, reset(), close() }`.
 */
export function countingProxy(upstream) {
  const up = new URL(upstream)
  const agent = new Agent({ keepAlive: true, maxSockets: 64 })
  const fresh = () => ({ requests: 0, by_kind: {}, request_body_bytes: 0, response_body_bytes: 0 })
  const state = { counts: fresh() }
  const srv = createServer((req, res) => {
    const c = state.counts
    const kind = requestKind(req.method, req.url)
    c.requests++
    c.by_kind[kind] = (c.by_kind[kind] ?? 0) + 1
    const fwd = request({ host: up.hostname, port: up.port, method: req.method, path: req.url, headers: req.headers, agent }, (ur) => {
      res.writeHead(ur.statusCode, ur.statusMessage, ur.headers)
      ur.on('data', (d) => (c.response_body_bytes += d.length))
      ur.pipe(res)
    })
    fwd.on('error', (e) => {
      if (!res.headersSent) res.writeHead(502).end(String(e.message))
      else res.destroy()
    })
    req.on('data', (d) => (c.request_body_bytes += d.length))
    req.pipe(fwd)
  })
  return new Promise((resolve) =>
    srv.listen(0, '127.0.0.1', () =>
      resolve({
        url: `http://127.0.0.1:${srv.address().port}`,
        get counts() {
          return state.counts
        },
        reset() {
          const c = state.counts
          state.counts = fresh()
          return c
        },
        close: () => new Promise((r) => (srv.closeAllConnections?.(), agent.destroy(), srv.close(() => r()))),
      }),
    ),
  )
}
