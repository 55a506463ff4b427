// A store that stops answering (issue #34), in Node: the library's `list`, `push` and `pull`,
// and `cutpoint-js`, through the fault proxy (tests/js/fault-proxy.ts) on 127.0.0.1 in front of
// a real `cutpoint serve`: a store that never answers, one that stalls mid-answer, one that
// stalls mid-upload, one that loses a commit's answer, and each stalling once then recovering.
// Timeouts of 1 s and 2 retries here: each gives up within its tries with a message naming the
// store, the request and the wait (exit code 1, no partial file), or completes byte-identical,
// a resumed pull reading no verified byte twice.
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { spawn } from 'node:child_process'
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import * as cp from '@cutpoint/web'
import { root } from './helpers'
import { resumed, startFaultProxy, type FaultProxy } from './fault-proxy'
import { haveCutpoint, startStore, type Store } from './store'

const dir = mkdtempSync(join(tmpdir(), 'cutpoint-stall-'))
let store: Store
let proxy: FaultProxy

function data(n: number, seed: number): Uint8Array {
  const b = new Uint8Array(n)
  let s = (seed * 2654435761) >>> 0 || 1
  for (let i = 0; i < n; i++) {
    s ^= s << 13
    s ^= s >>> 17
    s ^= s << 5
    b[i] = s & 0xff
  }
  return b
}

async function bytesOf(s: ReadableStream<Uint8Array>): Promise<Buffer> {
  const parts: Uint8Array[] = []
  for await (const p of s as any) parts.push(p)
  return Buffer.concat(parts)
}

const client = (ns: string, extra: Partial<cp.ClientOptions> = {}) => cp.createClient({ store: proxy.url, namespace: ns, timeout: 1000, retries: 2, ...extra })
const direct = (ns: string) => cp.createClient({ store: store.url, namespace: ns })

async function failure(p: Promise<unknown>): Promise<{ e: any; ms: number }> {
  const t0 = performance.now()
  try {
    await p
  } catch (e) {
    return { e, ms: performance.now() - t0 }
  }
  throw new Error('it did not fail')
}

beforeAll(async () => {
  if (!haveCutpoint()) throw new Error('build native/target/release/cutpoint first')
  await cp.init()
  store = await startStore()
  proxy = await startFaultProxy(store.url)
})
afterAll(async () => {
  await proxy?.close()
  await store?.stop()
  rmSync(dir, { recursive: true, force: true })
})

describe('the library in Node, through a stalling store', () => {
  it('list: gives up on a store that never answers; gets through one that stalls once', async () => {
    await proxy.stall('silent')
    const c = client('ls')
    const { e, ms } = await failure(c.list())
    expect(e).toBeInstanceOf(cp.StoreError)
    expect(e.code).toBe('network')
    expect(e.message).toContain(`${proxy.url}: GET /v1/ns/ls/files: no answer for 1 s (gave up after 3 tries)`)
    expect(ms).toBeGreaterThanOrEqual(3000)
    expect(ms).toBeLessThan(30_000)
    const d = direct('ls')
    await d.push(data(100_000, 1), { name: 'small' })
    await d.close()
    await proxy.stallOnce({ answer: 0 })
    const retried: cp.RetryEvent[] = []
    const c2 = client('ls', { onRetry: (r) => retried.push(r) })
    const files = await c2.list()
    expect(files.map((f) => f.name)).toEqual(['small'])
    expect(retried.find((r) => r.timedOut)).toMatchObject({ request: 'GET /v1/ns/ls/files', timedOut: true, waited: 1000, attempts: 3 })
    await c.close()
    await c2.close()
  })

  it('pull: gives up on answers that stall; resumes after one stall from where its verified bytes end', async () => {
    const bytes = data(8 << 20, 2)
    const d = direct('pull')
    await d.push(bytes, { name: 'big' })
    await d.close()
    const c = client('pull')
    await proxy.stall({ answer: 1 << 20 })
    const { e, ms } = await failure(c.pull('big').then(bytesOf))
    expect(e).toBeInstanceOf(cp.StoreError)
    expect(e.code).toBe('network')
    expect(e.message).toContain(`${proxy.url}: GET /v1/ns/pull/files/big?version=1: no answer for 1 s at byte`)
    expect(e.message).toContain('(gave up after 3 tries)')
    expect(ms).toBeLessThan(30_000)
    await proxy.stallOnce({ answer: 3 << 20 })
    const since = proxy.seq()
    const got = await bytesOf(await c.pull('big'))
    expect(Buffer.compare(got, Buffer.from(bytes))).toBe(0)
    const { ranges, stalled, last, from, after } = resumed(proxy.conns, since)
    expect([ranges, stalled, last]).toEqual([1, true, true])
    expect(from).toBeGreaterThan(0)
    // The Range request's answer is the file from `from` on (and a head): no byte before it again.
    const rest = bytes.length - from
    expect(after).toBeGreaterThanOrEqual(rest)
    expect(after).toBeLessThan(rest + 4096)
    await c.close()
  })

  // Compression 'auto' (the default) reads and compresses ahead; 'off' sends raw packs.
  it.each(['auto', 'off'] as const)('push (compression %s): gives up on uploads that stall, commits nothing; completes after one stall', async (compression) => {
    const bytes = data(2 << 20, 3)
    const ns = `push-${compression}`
    await proxy.stall({ upload: 100 << 10 })
    // Packs of 128 KiB: each upload passes the stall's 100 KiB, so none gets through (with 64 KiB
    // packs the first pack on each new connection did, and the push could end without a failure).
    const c = client(ns, { packSize: 128 << 10, compression })
    const { e, ms } = await failure(c.push(bytes, { name: 'up' }))
    expect(e).toBeInstanceOf(cp.StoreError)
    expect(e.code).toBe('network')
    expect(e.message).toMatch(new RegExp(`${proxy.url}: POST /v1/ns/${ns}/(packs|query): no answer for \\d+(\\.\\d+)? s \\(gave up after 3 tries\\)`))
    expect(ms).toBeLessThan(60_000)
    await proxy.stall('off')
    const d = direct(ns)
    expect(await d.list()).toEqual([])
    await proxy.stallOnce({ upload: 100 << 10 })
    const r = await c.push(bytes, { name: 'up' })
    expect(r.version).toBe(1)
    expect(proxy.conns.some((x) => x.stalled)).toBe(true)
    expect(Buffer.compare(await bytesOf(await d.pull('up')), Buffer.from(bytes))).toBe(0)
    await c.close()
    await d.close()
  })

  it('uploads the client gave up on are let go at the store: no 503 busy after many stalls', async () => {
    // Each stalled upload the client gives up on must free its slot at the store (16 per token)
    // at once, not when the store's body timeout (30 s) cuts it: 24 stalled uploads in 3 rounds,
    // then a push straight to the store is taken (each push stalls in its first pack, of 128 KiB).
    await proxy.stall({ upload: 100 << 10 })
    const c = client('slots', { retries: 0, packSize: 128 << 10 })
    for (let round = 0; round < 3; round++) {
      const fails = await Promise.all(Array.from({ length: 8 }, (_, k) => failure(c.push(data(200_000, 100 + round * 8 + k), { name: `s${round}-${k}` }))))
      for (const { e } of fails) expect([e.code, e.message]).toEqual(['network', expect.stringMatching(/no answer for/)])
    }
    await proxy.stall('off')
    const d = direct('slots')
    expect((await d.push(data(100_000, 99), { name: 'after' })).version).toBe(1)
    await c.close()
    await d.close()
  })

  it("a commit whose answer is lost is read back, not committed twice", async () => {
    const d = direct('commit')
    const a = data(200_000, 4)
    await d.push(a, { name: 'c' })
    const b = a.slice()
    b.fill(7, 10, 20)
    await proxy.stallOnce('commit')
    const c = client('commit')
    const r = await c.push(b, { name: 'c' })
    expect(r.version).toBe(2)
    expect(proxy.conns.some((x) => x.stalled)).toBe(true)
    expect((await d.list()).map((f) => f.version)).toEqual([1, 2])
    expect(Buffer.compare(await bytesOf(await d.pull('c')), Buffer.from(b))).toBe(0)
    await c.close()
    await d.close()
  })
})

/** cutpoint-js, spawned (not spawnSync: the proxy runs in this process). */
function js(args: string[]): Promise<{ status: number | null; stdout: string; stderr: string; ms: number }> {
  const t0 = performance.now()
  return new Promise((resolve) => {
    const child = spawn(process.execPath, [`${root}web/dist/web/src/cli/main.js`, ...args, '--store', proxy.url, '--timeout', '1', '--retries', '2'], {
      cwd: dir,
      env: { ...process.env, CUTPOINT_TOKEN: '' },
    })
    let stdout = ''
    let stderr = ''
    child.stdout.on('data', (b) => (stdout += b))
    child.stderr.on('data', (b) => (stderr += b))
    const kill = setTimeout(() => child.kill('SIGKILL'), 100_000)
    child.on('close', (status) => {
      clearTimeout(kill)
      resolve({ status, stdout, stderr, ms: performance.now() - t0 })
    })
  })
}

describe('cutpoint-js through a stalling store', () => {
  it('ls and pull give up with exit code 1 and the message; pull leaves no partial file', async () => {
    await proxy.stall('silent')
    const ls = await js(['ls', '--ns', 'cli'])
    expect(ls.status, ls.stderr).toBe(1)
    expect(ls.stderr).toContain(`${proxy.url}: GET /v1/ns/cli/files: no answer for 1 s (gave up after 3 tries)`)
    expect(ls.ms).toBeLessThan(30_000)
    await proxy.stall('off')
    const bytes = data(6 << 20, 5)
    const d = direct('cli')
    await d.push(bytes, { name: 'f.bin' })
    await d.close()
    await proxy.stall({ answer: 1 << 20 })
    const out = join(dir, 'out.bin')
    const pull = await js(['pull', 'f.bin', '--ns', 'cli', '-o', out])
    expect(pull.status, pull.stderr).toBe(1)
    expect(pull.stderr).toContain(`${proxy.url}: GET /v1/ns/cli/files/f.bin?version=1: no answer for 1 s at byte`)
    expect(existsSync(out)).toBe(false)
    expect(readdirSync(dir).filter((n) => n.includes('partial'))).toEqual([])
    await proxy.stallOnce({ answer: 2 << 20 })
    const ok = await js(['pull', 'f.bin', '--ns', 'cli', '-o', out])
    expect(ok.status, ok.stderr).toBe(0)
    expect(Buffer.compare(readFileSync(out), Buffer.from(bytes))).toBe(0)
    writeFileSync(join(dir, 'done'), '')
  })
})
