// Many files and big files from the library (issues #33, #32) against a real `cutpoint serve`
// (tests/js/store.ts): `pushMany` as one pipeline (shared queries and packs, batch commits,
// requests counted by a fetch wrapper), per-file failures, a store without `batch`; `push` of
// a file whose recipe passes the parts threshold at a small `--max-recipe` (committed in parts,
// restored byte-identical, a re-push sends only the changed parts), the limits checked before
// a byte is sent; `cutpoint-js push FILE...` and `push DIR`.
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { randomBytes } from 'node:crypto'
import { spawnSync } from 'node:child_process'
import { join } from 'node:path'
import * as cp from '@cutpoint/web'
import { haveCutpoint, startStore, type Store } from './store'
import { root } from './helpers'

const dir = mkdtempSync(join(tmpdir(), 'cutpoint-many-'))
let store: Store
let small: Store // --max-recipe 16k: parts
let tiny: Store // --max-recipe 2k

async function bytesOf(s: ReadableStream<Uint8Array>): Promise<Buffer> {
  const parts: Uint8Array[] = []
  for await (const p of s as any) parts.push(p)
  return Buffer.concat(parts)
}

/** A fetch that counts requests by `METHOD /path-tail` and can hide features of `GET /v1`. */
function counting(hide: string[] = []) {
  const log: string[] = []
  const f: typeof fetch = async (url, init) => {
    const u = new URL(String(url))
    log.push(`${init?.method ?? 'GET'} ${u.pathname.replace(/^\/v1\/ns\/[^/]+\//, '')}`)
    const res = await fetch(url, init)
    if (u.pathname === '/v1' && hide.length) {
      const v = await res.json()
      v.features = (v.features ?? []).filter((x: string) => !hide.includes(x))
      return new Response(JSON.stringify(v), { status: 200, headers: { 'content-type': 'application/json' } })
    }
    return res
  }
  return { fetch: f, log }
}

beforeAll(async () => {
  if (!haveCutpoint()) throw new Error('build native/target/release/cutpoint first (cargo build --release -p cutpoint-cli)')
  await cp.init()
  store = await startStore()
  small = await startStore({ args: ['--max-recipe', '16k'] })
  tiny = await startStore({ args: ['--max-recipe', '2k'] })
})

afterAll(async () => {
  await store?.stop()
  await small?.stop()
  await tiny?.stop()
  rmSync(dir, { recursive: true, force: true })
})

/** `n` small files (1 byte to 24 KiB; every 10th a copy of an earlier one), as paths and bytes. */
function smallFiles(sub: string, n: number, seed: number) {
  const d = join(dir, sub)
  mkdirSync(d, { recursive: true })
  const out: { path: string; name: string; data: Buffer }[] = []
  for (let i = 0; i < n; i++) {
    const data = i % 10 === 9 ? out[i - 5].data : randomBytes(1 + ((i * 7919 + seed) % (24 << 10)))
    const path = join(d, `f${String(i).padStart(4, '0')}.bin`)
    writeFileSync(path, data)
    out.push({ path, name: `${sub}/f${i}`, data })
  }
  return out
}

describe('pushMany', () => {
  it('pushes a few hundred small files in a handful of requests; each restores byte-identical', async () => {
    const files = smallFiles('a', 300, 1)
    const c = counting()
    const client = cp.createClient({ store: store.url, fetch: c.fetch })
    try {
      const seen = new Set<string>()
      const m = await client.pushMany(
        files.map((f) => ({ input: f.path, name: f.name })),
        { onProgress: (p) => seen.add(`${p.index}:${p.stage}`) },
      )
      expect(m.committed).toBe(300)
      expect(m.failed).toBe(0)
      expect(m.results.length).toBe(300)
      m.results.forEach((r, i) => {
        expect('error' in r ? r.error : undefined).toBeUndefined()
        const p = r as cp.PushResult
        expect(p.name).toBe(files[i].name)
        expect(p.version).toBe(1)
        expect(p.bytes).toBe(files[i].data.length)
      })
      // Copies of earlier files add nothing novel.
      expect((m.results[9] as cp.PushResult).novelBytes).toBe(0)
      expect(m.novelBytes).toBeLessThan(m.bytes)
      // Shared queries, shared packs, one batch: requests per file ≤ 0.05.
      expect(c.log.filter((l) => l === 'POST commits').length).toBe(1)
      expect(c.log.filter((l) => l.startsWith('PUT ')).length).toBe(0)
      expect(c.log.length / 300, c.log.join('\n')).toBeLessThanOrEqual(0.05)
      expect(m.commitRequests).toBe(1)
      // Per-file progress: each file chunked, queued and done.
      for (const s of ['chunking', 'queued', 'done']) expect(seen.has(`17:${s}`)).toBe(true)
      // Each version restores byte-identical.
      for (const i of [0, 1, 9, 150, 299]) expect((await bytesOf(await client.pull(files[i].name))).equals(files[i].data)).toBe(true)
      const listed = await client.list()
      expect(listed.filter((v) => v.name.startsWith('a/')).length).toBe(300)
      // Again, unchanged: nothing novel, new versions, as few requests.
      const n0 = c.log.length
      const m2 = await client.pushMany(files.map((f) => ({ input: f.path, name: f.name })))
      expect(m2.committed).toBe(300)
      expect(m2.novelBytes).toBe(0)
      expect((m2.results[0] as cp.PushResult).version).toBe(2)
      expect((c.log.length - n0) / 300).toBeLessThanOrEqual(0.05)
    } finally {
      await client.close()
    }
  })

  it('a bad name, a missing file and a stream fail alone; the others are committed', async () => {
    const files = smallFiles('b', 6, 2)
    const client = cp.createClient({ store: store.url })
    try {
      const m = await client.pushMany([
        { input: files[0].path, name: files[0].name },
        { input: files[1].path, name: 'bad//name' },
        { input: files[2].path, name: files[2].name },
        { input: join(dir, 'no-such-file'), name: 'b/missing' },
        { input: new Blob([files[3].data]).stream(), name: 'b/stream' },
        { input: new Uint8Array(files[4].data), name: files[4].name },
      ])
      expect(m.committed).toBe(3)
      expect(m.failed).toBe(3)
      const err = (i: number) => (m.results[i] as cp.PushManyFailure).error
      expect(err(1)).toBeInstanceOf(cp.StoreError)
      expect(err(1).code).toBe('usage')
      expect(err(3).code).toBe('io')
      expect(err(4).code).toBe('usage')
      for (const i of [0, 2, 5]) expect('version' in m.results[i]).toBe(true)
      expect((await bytesOf(await client.pull(files[4].name))).equals(files[4].data)).toBe(true)
      expect((await bytesOf(await client.pull(files[2].name))).equals(files[2].data)).toBe(true)
    } finally {
      await client.close()
    }
  })

  it('a store without batch: one PUT per file, the same versions', async () => {
    const files = smallFiles('c', 12, 3)
    const c = counting(['batch'])
    const client = cp.createClient({ store: store.url, fetch: c.fetch })
    try {
      const m = await client.pushMany(files.map((f) => ({ input: new Blob([f.data]), name: f.name })))
      expect(m.committed).toBe(12)
      expect(c.log.filter((l) => l === 'POST commits').length).toBe(0)
      expect(c.log.filter((l) => l.startsWith('PUT files/')).length).toBe(12)
      expect(c.log.filter((l) => l === 'POST packs').length).toBe(1)
      for (const f of files) expect((await bytesOf(await client.pull(f.name))).equals(f.data)).toBe(true)
    } finally {
      await client.close()
    }
  })

  it('batches are cut within max_batch_files and max_recipe_bytes', async () => {
    // --max-recipe 2k: a batch holds a few recipes (each ~200-700 bytes).
    const files = smallFiles('d', 20, 4)
    const c = counting()
    const client = cp.createClient({ store: tiny.url, fetch: c.fetch })
    try {
      const m = await client.pushMany(files.map((f) => ({ input: f.path, name: f.name })))
      expect(m.committed).toBe(20)
      const batches = c.log.filter((l) => l === 'POST commits').length
      expect(batches).toBeGreaterThan(1)
      expect(batches).toBeLessThan(20)
      for (const f of files.slice(0, 3)) expect((await bytesOf(await client.pull(f.name))).equals(f.data)).toBe(true)
    } finally {
      await client.close()
    }
  })
})

describe('push in parts', () => {
  it('a file over the threshold is committed in parts; a re-push sends only the changed parts', async () => {
    const file = randomBytes(4 << 20)
    const c = counting()
    const client = cp.createClient({ store: small.url, namespace: 't', fetch: c.fetch })
    try {
      const r = await client.push(file, { name: 'f' })
      expect(r.parts).toBeGreaterThan(1)
      expect(r.partsSent).toBe(r.parts)
      expect(r.recipeBytes).toBeLessThanOrEqual(16 << 10)
      expect((await bytesOf(await client.pull('f'))).equals(file)).toBe(true)
      const t = await (await fetch(`${small.url}/v1/ns/t/recipes/f?parts=1`)).text()
      expect(t).toContain('\npart ')
      // The digest is the whole file's (as if committed whole): the same ETag rules.
      expect(t).toContain(`digest ${r.digest}`)
      // A small edit in the middle: the parts away from it are found present.
      const file2 = Buffer.from(file)
      file2.fill(7, 2 << 20, (2 << 20) + 100)
      const r2 = await client.push(file2, { name: 'f' })
      expect(r2.version).toBe(2)
      expect(r2.deltaBase).toBeUndefined()
      expect(r2.partsSent).toBeGreaterThanOrEqual(1)
      expect(r2.partsSent * 2).toBeLessThan(r2.parts)
      expect(r2.novelBytes).toBeLessThan(file.length / 8)
      expect((await bytesOf(await client.pull('f'))).equals(file2)).toBe(true)
      expect((await bytesOf(await client.pull('f', { version: 1 }))).equals(file)).toBe(true)
    } finally {
      await client.close()
    }
  })

  it('a push in parts holds a bounded id table at any length (forgets ids once in parts)', async () => {
    // Small chunks (256 B on average) make many ids from a few MiB; the default store commits a
    // recipe of more than 65,536 entries in parts, and from then on the push's id table holds
    // at most ID_TABLE_MAX (65,536) of the input's ids, counted by `idsHeld`.
    const client = cp.createClient({ store: store.url, namespace: 'ids', profile: 'gear:64:256:1k', compression: 'off' })
    try {
      const short = randomBytes(24 << 20)
      const long = randomBytes(72 << 20)
      const a = await client.push(short, { name: 'short' })
      const b = await client.push(long, { name: 'long' })
      expect(a.parts).toBeGreaterThan(1)
      expect(b.parts).toBeGreaterThan(1)
      expect(b.chunks).toBeGreaterThan(3 * 65536)
      expect(b.chunks).toBeGreaterThan(2 * a.chunks)
      expect(a.idsHeld).toBeLessThanOrEqual(65536 + 2048)
      expect(b.idsHeld).toBeLessThanOrEqual(65536 + 2048)
      expect((await bytesOf(await client.pull('long'))).equals(long)).toBe(true)
      // Ids asked again after the table was replaced: all found present.
      const again = await client.push(long, { name: 'long' })
      expect(again.novelChunks).toBe(0)
      expect(again.partsSent).toBe(0)
      expect(again.idsHeld).toBeLessThanOrEqual(65536 + 2048)
    } finally {
      await client.close()
    }
  }, 180_000)

  it('a re-push sends every changed part as a part delta, also the parts closed before the recipe passed the parts threshold', async () => {
    // The default store: a recipe goes to parts past 65,536 entries, ~76 MiB of 1.2 KiB chunks
    // here, so its first parts (~6 MiB each) close while it is still whole and wait in the sink;
    // their deltas must be made when they close, while their base parts are in the window
    // (64 MiB behind the open part), not when they are taken out (in a 1 GiB re-push from a
    // browser 11 of 25 parts went whole that way).
    const client = cp.createClient({ store: store.url, namespace: 'early', profile: 'gear:512:1k:4k', compression: 'off' })
    try {
      const v1 = randomBytes(100 << 20)
      const r1 = await client.push(v1, { name: 'f' })
      expect(r1.parts).toBeGreaterThan(10)
      const v2 = Buffer.from(v1)
      for (let k = 0; k < 25; k++) randomBytes(64).copy(v2, k * (4 << 20) + 4321)
      const r2 = await client.push(v2, { name: 'f' })
      expect(r2.partsSent).toBeGreaterThan(10)
      expect(r2.partsDelta).toBe(r2.partsSent)
      expect(r2.knownFromBase).toBeGreaterThan(r2.chunks - 4 * r2.novelChunks)
      // ~40 KB novel in ~1.2 KiB chunks; deltas of a few hundred bytes each on top (a part
      // sent whole is ~380 KB).
      expect(r2.sentBytes).toBeLessThan(1.5 * r2.novelBytes)
      expect((await bytesOf(await client.pull('f'))).equals(v2)).toBe(true)
    } finally {
      await client.close()
    }
  }, 240_000)

  it('pushMany commits a big file in parts and the small ones in a batch', async () => {
    const big = randomBytes(1 << 20)
    const files = smallFiles('p', 5, 5)
    const client = cp.createClient({ store: small.url, namespace: 'm' })
    try {
      const m = await client.pushMany([...files.map((f) => ({ input: f.path, name: f.name })), { input: big, name: 'big' }])
      expect(m.committed).toBe(6)
      expect((m.results[5] as cp.PushResult).parts).toBeGreaterThan(1)
      expect((await bytesOf(await client.pull('big'))).equals(big)).toBe(true)
      for (const f of files) expect((await bytesOf(await client.pull(f.name))).equals(f.data)).toBe(true)
    } finally {
      await client.close()
    }
  })

  it('a limit the client cannot meet is refused before a byte is sent', async () => {
    const file = randomBytes(3 << 20)
    // A store without parts (hidden) whose max_recipe_bytes is below the file's shortest recipe.
    const c = counting(['parts'])
    const client = cp.createClient({ store: tiny.url, fetch: c.fetch })
    try {
      const e = await client.push(file, { name: 'x' }).catch((e) => e)
      expect(e).toBeInstanceOf(cp.StoreError)
      expect(e.status).toBe(413)
      expect(e.message).toMatch(/max_recipe_bytes of 2048.*nothing was sent/)
      expect(c.log.filter((l) => l === 'POST packs' || l === 'POST query').length).toBe(0)
    } finally {
      await client.close()
    }
    // With parts the same store takes a small file whose whole recipe is over its limit; a big
    // one's recipe of part lines is refused before its commit is sent, with the limit named.
    const c2 = counting()
    const client2 = cp.createClient({ store: tiny.url, fetch: c2.fetch })
    try {
      const s = randomBytes(256 << 10)
      const r = await client2.push(s, { name: 's' })
      expect(r.parts).toBeGreaterThan(1)
      expect((await bytesOf(await client2.pull('s'))).equals(s)).toBe(true)
      const e = await client2.push(file, { name: 'x' }).catch((e) => e)
      expect(e).toBeInstanceOf(cp.StoreError)
      expect(e.status).toBe(413)
      expect(e.message).toMatch(/max_recipe_bytes of 2048.*nothing was committed/)
      expect(c2.log.filter((l) => l === 'PUT files/x').length).toBe(0)
    } finally {
      await client2.close()
    }
  })
})

describe('cutpoint-js push of many files', () => {
  const js = (args: string[]) => spawnSync(process.execPath, [join(root, 'web/dist/web/src/cli/main.js'), ...args], { encoding: 'utf8' })

  it('push DIR and push FILE...: a line per file and the totals; --json per file', () => {
    const files = smallFiles('cli/sub', 8, 6)
    writeFileSync(join(dir, 'cli', 'top.bin'), randomBytes(1000))
    const r = js(['push', join(dir, 'cli'), '--store', store.url, '--ns', 'cli'])
    expect(r.status, r.stderr).toBe(0)
    const lines = r.stdout.trim().split('\n')
    expect(lines.length).toBe(10)
    expect(lines[0]).toMatch(/^top\.bin -> version 1: /)
    expect(lines[1]).toMatch(/^sub\/f0000\.bin -> version 1: /)
    expect(lines[9]).toMatch(/^9 files: 9 committed, .* sent in \d+ packs and 1 commit requests/)
    const j = js(['push', files[0].path, files[1].path, '--store', store.url, '--ns', 'cli', '--json'])
    expect(j.status, j.stderr).toBe(0)
    const objs = j.stdout.trim().split('\n').map((l) => JSON.parse(l))
    expect(objs.map((o) => o.name)).toEqual(['f0000.bin', 'f0001.bin'])
    expect(objs[0].version).toBe(1)
    expect(objs[0].bytes).toBe(files[0].data.length)
    expect(readFileSync(files[1].path).length).toBe(objs[1].bytes)
  })

  it('a file that fails is reported on stderr and the exit status is non-zero; the others are committed', () => {
    const files = smallFiles('cli2', 2, 7)
    const r = js(['push', files[0].path, join(dir, 'cli2'), '--store', store.url, '--ns', 'cli2', '--name', 'x'])
    expect(r.status).toBe(2) // --name with several files
    const bad = join(dir, 'cli2', 'bad name\u0001.bin')
    writeFileSync(bad, 'x')
    const r2 = js(['push', join(dir, 'cli2'), '--store', store.url, '--ns', 'cli2'])
    expect(r2.status).not.toBe(0)
    expect(r2.stderr).toMatch(/bad name/)
    expect(r2.stdout).toMatch(/f0000\.bin -> version 1/)
    expect(r2.stdout).toMatch(/3 files: 2 committed, 1 failed/)
  })
})
