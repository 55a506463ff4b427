// The library's store client in Node against a real `cutpoint serve` (tests/js/store.ts): push /
// pull round trips for every input kind, the same numbers and recipes as the native
// `cutpoint push --json`, dedup on re-push, 1%-modified versions, RapidCDC, abort and resume,
// retries, and bad input (wrong token, unreachable store, unreadable file, bad profile, a
// store that names chunks it was not asked about, a restore that does not verify).
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { randomBytes } from 'node:crypto'
import { join } from 'node:path'
import * as cp from '@cutpoint/web'
import { cutpoint, haveCutpoint, nativePush, startStore, type Store } from './store'

const dir = mkdtempSync(join(tmpdir(), 'cutpoint-client-'))
let store: Store
let ref: Store // a second store for the native CLI, in the same state as `store`
const v = (i: number) => join(dir, `v${i}.bin`)
const writeTmp = (name: string, data: Uint8Array) => {
  const f = join(dir, name)
  writeFileSync(f, data)
  return f
}

async function bytesOf(s: ReadableStream<Uint8Array>): Promise<Buffer> {
  const parts: Uint8Array[] = []
  for await (const p of s as any) parts.push(p)
  return Buffer.concat(parts)
}

beforeAll(async () => {
  if (!haveCutpoint()) throw new Error('build native/target/release/cutpoint first (cargo build --release -p cutpoint-cli)')
  await cp.init()
  // A 24 MiB base and two versions, each with 40 edits of 100 bytes (about 1-2% of chunks).
  const g = cutpoint(['gen', '--out', dir, '--size', '24m', '--versions', '2', '--mods', '40', '--mod-size', '100', '--seed', '7'])
  expect(g.status, g.stderr).toBe(0)
  store = await startStore()
  ref = await startStore()
})

afterAll(async () => {
  await store?.stop()
  await ref?.stop()
  rmSync(dir, { recursive: true, force: true })
})

const pick = (r: Record<string, any>) => ({
  bytes: r.bytes,
  chunks: r.chunks,
  novel_chunks: r.novel_chunks,
  novel_bytes: r.novel_bytes,
  sent_bytes: r.sent_bytes,
  pack_bytes: r.pack_bytes,
  packs: r.packs,
  recipe_bytes: r.recipe_bytes,
  delta_base: r.delta_base,
  version: r.version,
  digest: r.digest,
})
const snake = (r: cp.PushResult) => ({
  bytes: r.bytes,
  chunks: r.chunks,
  novel_chunks: r.novelChunks,
  novel_bytes: r.novelBytes,
  sent_bytes: r.sentBytes,
  pack_bytes: r.packBytes,
  packs: r.packs,
  recipe_bytes: r.recipeBytes,
  delta_base: r.deltaBase ?? null,
  version: r.version,
  digest: r.digest,
})

describe('push and pull through the library', () => {
  it('the same numbers as `cutpoint push --json` (first push, versions as deltas, re-push), and round trips both ways', async () => {
    const c = cp.createClient({ store: store.url })
    try {
      const stages = new Set<string>()
      let chunkInfos = 0
      let novelInfos = 0
      for (const i of [0, 1, 2]) {
        const r = await c.push(v(i), {
          name: 'data.bin',
          onProgress: (p) => stages.add(p.stage),
          onChunks: (cs) => {
            chunkInfos += cs.length
            novelInfos += cs.filter((x) => x.novel).length
          },
        })
        const n = nativePush(ref, v(i), 'data.bin')
        expect(snake(r), `version ${i}`).toEqual(pick(n))
        if (i > 0) {
          expect(r.deltaBase).toBe(i)
          // A 1%-modified version: what travels is within 1.05x its novel bytes.
          expect(r.novelBytes).toBeGreaterThan(0)
          expect(r.novelBytes).toBeLessThan(r.bytes * 0.05)
          expect(r.sentBytes).toBeLessThanOrEqual(1.05 * r.novelBytes)
        }
      }
      expect(chunkInfos).toBeGreaterThan(0)
      expect(novelInfos).toBeGreaterThan(0)
      expect([...stages]).toEqual(expect.arrayContaining(['chunking', 'uploading', 'committing', 'done']))
      // Re-push: nothing but the queries' answers... no chunk bytes at all.
      const again = await c.push(v(2), { name: 'data.bin' })
      expect(again.novelChunks).toBe(0)
      expect(again.packBytes).toBe(0)
      expect(again.version).toBe(4)
      // The store's recipes are the same in both stores (same chunk ids, same digests).
      const mine = await c.list()
      const theirs = JSON.parse(cutpoint(['ls', '--json'], ref).stdout)
      expect(mine.slice(0, 3).map((f) => [f.version, f.bytes, f.chunks, f.digest])).toEqual(theirs.map((f: any) => [f.version, f.bytes, f.chunks, f.digest]))
      // The library pulls back what it pushed, and what the native CLI pushed (into `ref`).
      expect((await bytesOf(await c.pull('data.bin', { version: 2 }))).equals(readFileSync(v(1)))).toBe(true)
      const cr = cp.createClient({ store: ref.url })
      expect((await bytesOf(await cr.pull('data.bin'))).equals(readFileSync(v(2)))).toBe(true)
      await cr.close()
      // The native CLI pulls what the library pushed.
      const out = join(dir, 'native-pulled.bin')
      const p = cutpoint(['pull', 'data.bin', '--version', '1', '-o', out], store)
      expect(p.status, p.stderr).toBe(0)
      expect(readFileSync(out).equals(readFileSync(v(0)))).toBe(true)
    } finally {
      await c.close()
    }
  })

  it('every input kind (path, Blob, Uint8Array, ReadableStream) gives the same recipe', async () => {
    const c = cp.createClient({ store: store.url, namespace: 'inputs', concurrency: 1, packSize: 1 << 20 })
    try {
      const bytes = new Uint8Array(readFileSync(v(1)))
      const a = await c.push(v(1), { name: 'path' })
      expect(a.novelChunks).toBe(a.chunks) // a fresh namespace: all novel (random data repeats no chunk)
      // (Node's file-backed Blobs, fs.openAsBlob, cannot be sent to worker_threads: a Blob of bytes.)
      const blob = new Blob([bytes])
      const b = await c.push(blob, { name: 'blob' })
      const u = await c.push(bytes, { name: 'u8' })
      // A stream in odd piece sizes.
      let at = 0
      const s = new ReadableStream<Uint8Array>({
        pull(ctl) {
          if (at >= bytes.length) return ctl.close()
          const n = 1000 + ((at * 7) % 300000)
          ctl.enqueue(bytes.slice(at, at + n))
          at += n
        },
      })
      const st = await c.push(s, { name: 'stream' })
      for (const r of [b, u, st]) {
        expect(r.digest).toBe(a.digest)
        expect(r.chunks).toBe(a.chunks)
        expect(r.novelChunks).toBe(0)
      }
      // A novel stream (the stream path's packing): the second version of a name from a stream.
      const bytes2 = new Uint8Array(readFileSync(v(2)))
      const s2 = new ReadableStream<Uint8Array>({
        start(ctl) {
          for (let o = 0; o < bytes2.length; o += 65536) ctl.enqueue(bytes2.slice(o, o + 65536))
          ctl.close()
        },
      })
      const st2 = await c.push(s2, { name: 'stream' })
      const ref2 = nativePush(ref, v(2), 'fresh-check', ['--ns', 'inputs-ref'])
      expect(st2.chunks).toBe(ref2.chunks)
      expect(st2.novelBytes).toBeGreaterThan(0)
      expect((await bytesOf(await c.pull('stream'))).equals(Buffer.from(bytes2))).toBe(true)
    } finally {
      await c.close()
    }
  })

  it('an empty input, a one-byte input, and names with / and spaces (one URL segment)', async () => {
    const c = cp.createClient({ store: store.url, namespace: 'edge' })
    try {
      const e = await c.push(new Uint8Array(0), { name: 'dir/empty file' })
      expect([e.version, e.bytes, e.chunks, e.novelChunks]).toEqual([1, 0, 0, 0])
      expect((await bytesOf(await c.pull('dir/empty file'))).length).toBe(0)
      const one = await c.push(new Uint8Array([42]), { name: 'dir/ä b?c#d' })
      expect([one.bytes, one.chunks, one.novelChunks]).toEqual([1, 1, 1])
      expect([...(await bytesOf(await c.pull('dir/ä b?c#d')))]).toEqual([42])
      // A download link (the store's restore, with ranges).
      const link = await c.fileUrl('dir/ä b?c#d', 1)
      expect(link).toBe(`${store.url}/v1/ns/edge/files/dir%2F%C3%A4%20b%3Fc%23d?version=1`)
      const ranged = await fetch(link, { headers: { range: 'bytes=0-0' } })
      expect(ranged.status).toBe(206)
      expect([...new Uint8Array(await ranged.arrayBuffer())]).toEqual([42])
      const names = (await c.list()).map((f) => f.name)
      expect(names).toEqual(['dir/empty file', 'dir/ä b?c#d'])
      // The native CLI finds them under the same names.
      const out = join(dir, 'one.bin')
      const p = cutpoint(['pull', 'dir/ä b?c#d', '--ns', 'edge', '-o', out], store)
      expect(p.status, p.stderr).toBe(0)
      expect([...readFileSync(out)]).toEqual([42])
    } finally {
      await c.close()
    }
  })

  it('warm(): workers started ahead; a push made while they start waits for them and gives the same numbers', async () => {
    const cold = cp.createClient({ store: store.url, namespace: 'warm-cold', workers: 2 })
    const warm = cp.createClient({ store: store.url, namespace: 'warm', workers: 2 })
    try {
      const blob = new Blob([readFileSync(v(0))])
      const want = await cold.push(blob, { name: 'f' })
      const w1 = warm.warm()
      expect(warm.warm()).toBe(w1) // one warm-up at a time
      const got = await warm.push(blob, { name: 'f' }) // while the warm-up runs
      await w1
      await warm.warm() // again: a one-byte run on the workers already started
      const again = await warm.push(blob, { name: 'g' })
      expect([got.bytes, got.chunks, got.novelChunks, got.novelBytes, got.packs, got.digest]).toEqual([want.bytes, want.chunks, want.novelChunks, want.novelBytes, want.packs, want.digest])
      expect(want.novelChunks).toBeGreaterThan(0)
      // Another name in the same namespace: every chunk is there already, none is sent again.
      expect([again.bytes, again.chunks, again.novelChunks, again.packs, again.digest]).toEqual([want.bytes, want.chunks, 0, 0, want.digest])
      await cp.createClient({ store: store.url, workers: 0 }).warm() // no workers: nothing to start
      const bad = cp.createClient({ store: store.url, profile: 'gear:8k:2k:64k' })
      await expect(bad.warm()).rejects.toThrow(/profile|min|avg/i)
      await bad.close()
      // Closed while its workers start: the warm-up stops them and says so (none left running).
      const early = cp.createClient({ store: store.url, workers: 2 })
      const w2 = early.warm()
      await early.close()
      await expect(w2).rejects.toThrow(/closed/)
    } finally {
      await cold.close()
      await warm.close()
    }
    await expect(warm.warm()).rejects.toThrow(/closed/)
  })

  it('RapidCDC: the base recipe gives hints; the same numbers as `cutpoint push --rapid`', async () => {
    const c = cp.createClient({ store: store.url, namespace: 'rapid', workers: 2 })
    try {
      for (const i of [0, 1]) {
        const r = await c.push(v(i), { name: 'r.bin', rapid: 'ff+rwt' })
        const n = nativePush(ref, v(i), 'r.bin', ['--ns', 'rapid', '--rapid', 'ff+rwt', '--threads', '2'])
        expect(snake(r), `version ${i}`).toEqual(pick(n))
        expect(r.hintedChunks).toBe(n.hinted_chunks)
        if (i === 1) expect(r.hintedChunks).toBeGreaterThan(r.chunks / 2)
      }
      expect((await bytesOf(await c.pull('r.bin'))).equals(readFileSync(v(1)))).toBe(true)
    } finally {
      await c.close()
    }
  })

  it('an abort mid-push commits nothing; the push again sends only what the store lacks', async () => {
    const c = cp.createClient({ store: store.url, namespace: 'abort', concurrency: 1, packSize: 256 << 10 })
    try {
      const ac = new AbortController()
      let sentAtAbort = 0
      await expect(
        c.push(v(0), {
          name: 'cut.bin',
          signal: ac.signal,
          onProgress: (p) => {
            if (p.sentBytes > 4 << 20 && !ac.signal.aborted) {
              sentAtAbort = p.sentBytes
              ac.abort()
            }
          },
        }),
      ).rejects.toThrow(/abort/i)
      expect(sentAtAbort).toBeGreaterThan(0)
      expect(await c.list()).toEqual([])
      const r = await c.push(v(0), { name: 'cut.bin' })
      expect(r.version).toBe(1)
      // The packs that went before the abort are not sent again.
      expect(r.novelBytes).toBeLessThan(r.bytes - (3 << 20))
      expect(r.novelBytes).toBeGreaterThan(0)
      expect((await bytesOf(await c.pull('cut.bin'))).equals(readFileSync(v(0)))).toBe(true)
      // And the native CLI finds nothing more to send.
      const n = nativePush(store, v(0), 'cut.bin', ['--ns', 'abort'])
      expect(n.novel_chunks).toBe(0)
    } finally {
      await c.close()
    }
  })

  it('retries a query and a pack upload after a network failure (same numbers)', async () => {
    let failQuery = 1
    let failPack = 1
    const flaky: typeof fetch = async (url, init) => {
      const u = String(url)
      if (u.endsWith('/query') && failQuery-- > 0) throw new TypeError('fetch failed (test: connection reset)')
      if (u.endsWith('/packs') && failPack-- > 0) throw new TypeError('fetch failed (test: connection reset)')
      return fetch(url, init)
    }
    const c = cp.createClient({ store: store.url, namespace: 'flaky', fetch: flaky })
    try {
      const r = await c.push(v(2), { name: 'f.bin' })
      const n = nativePush(ref, v(2), 'f.bin', ['--ns', 'flaky'])
      expect(snake(r)).toEqual(pick(n))
      expect(failQuery).toBeLessThan(0)
      expect(failPack).toBeLessThan(0)
    } finally {
      await c.close()
    }
  })
})

describe('commit', () => {
  it('a commit whose answer was lost is not made twice (the client reads the latest version first)', async () => {
    let lose = 1
    let puts = 0
    const lossy: typeof fetch = async (url, init) => {
      const res = await fetch(url, init)
      if (init?.method === 'PUT') {
        puts++
        if (lose-- > 0) {
          await res.body?.cancel()
          throw new TypeError('fetch failed (test: the answer was lost)')
        }
      }
      return res
    }
    const c = cp.createClient({ store: store.url, namespace: 'lost', fetch: lossy })
    try {
      const r = await c.push(v(0), { name: 'once.bin' })
      expect(r.version).toBe(1)
      expect(puts).toBe(1)
      expect((await c.list()).map((f) => f.version)).toEqual([1])
      // A commit that did not reach the store is sent again.
      let drop = 1
      const dropping: typeof fetch = async (url, init) => {
        if (init?.method === 'PUT' && drop-- > 0) throw new TypeError('fetch failed (test: connection refused)')
        return fetch(url, init)
      }
      const d = cp.createClient({ store: store.url, namespace: 'lost', fetch: dropping })
      const r2 = await d.push(v(1), { name: 'once.bin' })
      expect(r2.version).toBe(2)
      expect(drop).toBeLessThan(0)
      expect((await d.list()).map((f) => f.version)).toEqual([1, 2])
      await d.close()
    } finally {
      await c.close()
    }
  })
})

describe('a damaged store', () => {
  it('a damaged latest recipe is no base: the push commits its whole recipe, and pulling it is an error', async () => {
    const c = cp.createClient({ store: store.url, namespace: 'damaged' })
    try {
      expect((await c.push(v(0), { name: 'dmg.bin' })).version).toBe(1)
      const f = join(store.data, 'objects', 'ns', 'damaged', 'recipes', Buffer.from('dmg.bin').toString('hex'), '000000000001')
      const text = readFileSync(f)
      writeFileSync(f, text.subarray(0, text.length >> 1))
      const r = await c.push(v(1), { name: 'dmg.bin' })
      expect(r.version).toBe(2)
      expect(r.deltaBase).toBeUndefined()
      expect(Buffer.compare(await bytesOf(await c.pull('dmg.bin')), readFileSync(v(1)))).toBe(0)
      const e: any = await c.pull('dmg.bin', { version: 1 }).then(bytesOf).catch((e) => e)
      expect(e).toBeInstanceOf(cp.StoreError)
      expect(e.code).toBe('damaged')
    } finally {
      await c.close()
    }
  })
})

describe('bad input', () => {
  it('a wrong token, a read-only token, no token', async () => {
    const s = await startStore({ tokens: { rw: 'team:rw', ro: 'team:r' } })
    try {
      const good = cp.createClient({ store: s.url, namespace: 'team', token: s.tokens.rw })
      const r = await good.push(v(0), { name: 'x' })
      expect(r.version).toBe(1)
      await good.close()
      for (const [token, status] of [['cp_wrong', 401], [undefined, 401], [s.tokens.ro, 403]] as const) {
        const c = cp.createClient({ store: s.url, namespace: 'team', token })
        const e: any = await c.push(v(1), { name: 'x' }).catch((e) => e)
        expect(e).toBeInstanceOf(cp.StoreError)
        expect(e.status).toBe(status)
        expect(e.message).toMatch(status === 401 ? /401.*token/ : /403/)
        await c.close()
      }
      // The read-only token reads.
      const ro = cp.createClient({ store: s.url, namespace: 'team', token: s.tokens.ro })
      expect((await ro.list()).map((f) => f.version)).toEqual([1])
      await ro.close()
    } finally {
      await s.stop()
    }
  })

  it("packs within the store's --max-pack whatever packSize; a limit below one chunk is a usage error", async () => {
    const s = await startStore({ args: ['--max-pack', '1m'] })
    try {
      const c = cp.createClient({ store: s.url, packSize: 8 << 20, workers: 0 })
      const data = new Uint8Array(randomBytes(6 << 20))
      // Packs over the limit would be refused (413): the push succeeding is the check.
      const r = await c.push(data, { name: 'a' })
      expect(r.packs).toBeGreaterThanOrEqual(6)
      expect(r.packBytes / r.packs).toBeLessThanOrEqual(1 << 20)
      expect(Buffer.compare(await bytesOf(await c.pull('a')), Buffer.from(data))).toBe(0)
      // As the native client: the same pack target, so the same bytes sent.
      const n = nativePush(s, writeTmp('a6.bin', data), 'a', ['--pack-size', '8m', '--ns', 'native'])
      expect(n.packs).toBe(r.packs)
      await c.close()
    } finally {
      await s.stop()
    }
    const tiny = await startStore({ args: ['--max-pack', '32k'] })
    try {
      // Refused before the file is opened or the client's workers are taken: a second push
      // (a Uint8Array) gets the same answer, and nothing is stored.
      const c = cp.createClient({ store: tiny.url, workers: 1 })
      await c.warm()
      for (const input of [v(0), new Uint8Array(1000)]) {
        const e: any = await c.push(input, { name: 'x' }).catch((e) => e)
        expect(e).toBeInstanceOf(cp.StoreError)
        expect(e.code).toBe('usage')
        expect(e.message).toMatch(/at most 32768 bytes.*--max-pack/)
      }
      expect(await c.list()).toEqual([])
      await c.close()
    } finally {
      await tiny.stop()
    }
  })

  it("packs within the store's --max-pack-chunks (the core's rule, as the native client)", async () => {
    const s = await startStore({ args: ['--max-pack-chunks', '100'] })
    try {
      const c = cp.createClient({ store: s.url, workers: 0 })
      // ~770 chunks of the default profile: a pack of more than 100 would be refused (413).
      const data = new Uint8Array(randomBytes(6 << 20))
      const r = await c.push(data, { name: 'a' })
      expect(r.packs).toBeGreaterThanOrEqual(7)
      expect(Buffer.compare(await bytesOf(await c.pull('a')), Buffer.from(data))).toBe(0)
      const n = nativePush(s, writeTmp('c6.bin', data), 'a', ['--ns', 'native'])
      expect(n.packs).toBe(r.packs)
      await c.close()
    } finally {
      await s.stop()
    }
  })

  it('an unreachable store, an unreadable file, a directory, a bad profile, a bad name, a missing version', async () => {
    const dead = await startStore()
    const url = dead.url
    await dead.stop()
    const c = cp.createClient({ store: url, retries: 1 })
    const e1: any = await c.push(v(0), { name: 'x' }).catch((e) => e)
    expect(e1).toBeInstanceOf(cp.StoreError)
    expect(e1.code).toBe('network')
    expect(e1.message).toMatch(/cannot reach the store/)
    await c.close()

    const ok = cp.createClient({ store: store.url, namespace: 'bad' })
    const e2: any = await ok.push(join(dir, 'no-such-file'), { name: 'x' }).catch((e) => e)
    expect(e2.code).toBe('io')
    expect(e2.message).toMatch(/no-such-file/)
    const e3: any = await ok.push(dir, { name: 'x' }).catch((e) => e)
    expect(e3.code).toBe('io')
    const e5: any = await ok.push(new Uint8Array(10), { name: '../x' }).catch((e) => e)
    expect(e5.code).toBe('usage')
    const e6: any = await ok.pull('nothing-here').catch((e) => e)
    expect(e6.status).toBe(404)
    await ok.close()
    const bp = cp.createClient({ store: store.url, namespace: 'bad', profile: 'gear:8k:2k:64k' })
    const e7: any = await bp.push(new Uint8Array(10), { name: 'x' }).catch((e) => e)
    expect(e7.code).toBe('usage')
    expect(e7.message).toMatch(/profile|min|avg/i)
    await bp.close()
    // Nothing was stored by any of these.
    expect(JSON.parse(cutpoint(['ls', '--json', '--ns', 'bad'], store).stdout)).toEqual([])
  })

  it('a store that names chunks it was not asked about, or that the input lacks, is a protocol error; nothing is committed', async () => {
    const stranger = randomBytes(32)
    // The real store's query answer (every id: the namespace is empty) with its first id
    // replaced by one nobody asked about.
    const lyingQuery: typeof fetch = async (url, init) => {
      const res = await fetch(url, init)
      if (!String(url).endsWith('/query')) return res
      const body = Buffer.from(await res.arrayBuffer())
      stranger.copy(body, 0)
      return new Response(body, { status: res.status, headers: res.headers })
    }
    const q = cp.createClient({ store: store.url, namespace: 'liar', fetch: lyingQuery })
    const e1: any = await q.push(v(0), { name: 'q.bin' }).catch((e) => e)
    expect(e1).toBeInstanceOf(cp.StoreError)
    expect(e1.code).toBe('protocol')
    expect(e1.message).toContain(`names chunk ${stranger.toString('hex')} as missing, which was not asked`)
    await q.close()
    // A commit answered 409 for a chunk the input does not have (and for a malformed id).
    for (const missing of [stranger.toString('hex'), 'not-an-id']) {
      let puts = 0
      const lyingCommit: typeof fetch = async (url, init) => {
        if (init?.method !== 'PUT') return fetch(url, init)
        puts++
        return new Response(JSON.stringify({ error: 'missing chunks', missing: [missing] }), { status: 409, headers: { 'content-type': 'application/json' } })
      }
      const c = cp.createClient({ store: store.url, namespace: 'liar', fetch: lyingCommit })
      const e2: any = await c.push(v(1), { name: 'c.bin' }).catch((e) => e)
      expect(e2).toBeInstanceOf(cp.StoreError)
      expect(e2.code).toBe('protocol')
      expect(e2.message).toContain(`asks for chunk ${missing}, which the input lacks`)
      expect(puts).toBe(1)
      await c.close()
    }
    expect(JSON.parse(cutpoint(['ls', '--json', '--ns', 'liar'], store).stdout)).toEqual([])
  })

  it('a restore that does not verify errors the stream', async () => {
    const c0 = cp.createClient({ store: store.url, namespace: 'verify' })
    await c0.push(v(0), { name: 'y' })
    await c0.close()
    // A fetch that flips one byte in the middle of the restore body (the store is real).
    const tamper: typeof fetch = async (url, init) => {
      const res = await fetch(url, init)
      if (!/\/files\//.test(String(url)) || init?.method !== 'GET') return res
      let seen = 0
      const t = new TransformStream<Uint8Array, Uint8Array>({
        transform(b, ctl) {
          const mid = 5 << 20
          if (seen <= mid && mid < seen + b.length) {
            b = b.slice()
            b[mid - seen] ^= 1
          }
          seen += b.length
          ctl.enqueue(b)
        },
      })
      return new Response(res.body!.pipeThrough(t), { status: res.status, headers: res.headers })
    }
    const c = cp.createClient({ store: store.url, namespace: 'verify', fetch: tamper })
    const e: any = await bytesOf(await c.pull('y')).catch((e) => e)
    expect(e).toBeInstanceOf(cp.StoreError)
    expect(e.code).toBe('verify')
    expect(e.message).toMatch(/does not match its fingerprint/)
    await c.close()
  })
})
