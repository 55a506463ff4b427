// The edge store (edge/: a Worker over R2 and a Durable Object per namespace, in workerd through
// miniflare) against the same protocol suite as `cutpoint serve`: one suite, two targets. The
// native CLI and the library (createClient) push and pull through each; bad packs, restores and
// tokens get the answers PROTOCOL.md gives, on both.
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { randomBytes } from 'node:crypto'
import { join } from 'node:path'
import { request } from 'node:http'
import { blake3 } from 'hash-wasm'
import * as cp from '@cutpoint/web'
import { cutpoint, haveCutpoint, nativePush, startStore, type Store } from './store'
import { startEdge } from './edge-store'

const dir = mkdtempSync(join(tmpdir(), 'cutpoint-edge-test-'))
const file = (name: string, data: Uint8Array) => {
  const f = join(dir, name)
  writeFileSync(f, data)
  return f
}

beforeAll(async () => {
  if (!haveCutpoint()) throw new Error('build native/target/release/cutpoint first (cargo build --release -p cutpoint-cli)')
  await cp.init()
})
afterAll(() => rmSync(dir, { recursive: true, force: true }))

async function bytesOf(s: ReadableStream<Uint8Array>): Promise<Buffer> {
  const parts: Uint8Array[] = []
  for await (const p of s as any) parts.push(p)
  return Buffer.concat(parts)
}

// A framed pack (PROTOCOL.md 3.1), written out here only to damage it on purpose.
async function chunkPack(chunks: Uint8Array[]): Promise<{ body: Buffer; ids: Buffer[] }> {
  const header = Buffer.alloc(16)
  header.write('CPPACK\x00\x01', 0, 'latin1')
  header[8] = 1 // blake3
  const parts: Buffer[] = [header]
  const ids: Buffer[] = []
  for (const c of chunks) {
    const id = Buffer.from(await blake3(c), 'hex')
    ids.push(id)
    const head = Buffer.alloc(36)
    head.writeUInt32LE(c.length, 0)
    id.copy(head, 4)
    parts.push(head, Buffer.from(c))
  }
  const end = Buffer.alloc(36)
  end.writeBigUInt64LE(BigInt(chunks.length), 4)
  parts.push(end)
  return { body: Buffer.concat(parts), ids }
}

/** The status of a POST announcing `length` bytes and sending none (a store refuses it at once). */
function announced(url: string, length: number): Promise<number> {
  return new Promise((resolve, reject) => {
    const req = request(url, { method: 'POST', headers: { 'content-length': String(length) } }, (res) => {
      res.resume()
      resolve(res.statusCode!)
      req.destroy()
    })
    req.on('error', reject)
    req.flushHeaders()
  })
}

const targets: [string, typeof startStore][] = [
  ['cutpoint serve', startStore],
  ['edge store (workerd)', startEdge],
]

describe.each(targets)('%s', (_label, start) => {
  let store: Store
  let auth: Store
  const ns = (s: Store, n: string) => `${s.url}/v1/ns/${n}`

  beforeAll(async () => {
    store = await start()
    auth = await start({ tokens: { a: 'ns-a:rw', ar: 'ns-a:r', b: 'ns-b:rw' } })
  })
  afterAll(async () => {
    await store?.stop()
    await auth?.stop()
  })

  it('GET /v1 announces protocol 1 and limits a client fits its packs to', async () => {
    const v = await (await fetch(`${store.url}/v1`)).json()
    expect(v).toMatchObject({ service: 'cutpoint', protocol: 1, auth: 'open' })
    expect(v.limits.max_pack_bytes).toBeGreaterThan(1 << 20)
    expect(v.limits.max_query_ids).toBe(16384)
  })

  it('native CLI round trips: empty, 1 B, random; a re-push sends no chunk bytes, a 1% edit little', () => {
    const big = randomBytes(3 << 20)
    const cases: [string, Uint8Array][] = [['empty', new Uint8Array(0)], ['one', new Uint8Array([42])], ['odd name é.bin', big]]
    for (const [i, [name, data]] of cases.entries()) {
      const f = file(`in-${i}`, data)
      const r = nativePush(store, f, name)
      expect(r.bytes).toBe(data.length)
      const out = join(dir, 'out')
      const p = cutpoint(['pull', name, '-o', out], store)
      expect(p.status, p.stderr).toBe(0)
      expect(readFileSync(out).equals(Buffer.from(data))).toBe(true)
    }
    const f = file('big', big)
    const again = nativePush(store, f, 'odd name é.bin')
    expect(again.version).toBe(2)
    expect(again.novel_chunks).toBe(0)
    expect(again.pack_bytes).toBe(0)
    // One edit of 100 bytes: a few chunks and a delta, not the file.
    big.fill(7, 1_000_000, 1_000_100)
    const edited = nativePush(store, file('big', big), 'odd name é.bin')
    expect(edited.version).toBe(3)
    expect(edited.novel_bytes).toBeLessThan(200_000)
    expect(edited.sent_bytes).toBeLessThan(edited.novel_bytes + 20_000)
    const out = join(dir, 'out3')
    expect(cutpoint(['pull', 'odd name é.bin', '-o', out], store).status).toBe(0)
    expect(readFileSync(out).equals(big)).toBe(true)
    const ls = cutpoint(['ls', '--json'], store)
    expect(ls.status, ls.stderr).toBe(0)
    expect(ls.stdout).toContain('odd name é.bin')
  })

  it('the library pushes what the native CLI pulls, and pulls what it pushed', async () => {
    const c = cp.createClient({ store: store.url, namespace: 'lib' })
    const data = randomBytes(2 << 20)
    const r = await c.push(data, { name: 'from-lib' })
    expect(r.bytes).toBe(data.length)
    const out = join(dir, 'lib-out')
    const p = cutpoint(['pull', 'from-lib', '--ns', 'lib', '-o', out], store)
    expect(p.status, p.stderr).toBe(0)
    expect(readFileSync(out).equals(data)).toBe(true)
    const f = file('native-in', randomBytes(1 << 20))
    nativePush(store, f, 'from-native', ['--ns', 'lib'])
    expect((await bytesOf(await c.pull('from-native'))).equals(readFileSync(f))).toBe(true)
    const again = await c.push(data, { name: 'from-lib' })
    expect(again.novelChunks).toBe(0)
  })

  it('bad packs get 400 and store nothing; a pack over the limit 413', async () => {
    const chunks = [randomBytes(5000), randomBytes(7000)]
    const { body, ids } = await chunkPack(chunks)
    const post = (b: Uint8Array) => fetch(`${ns(store, 'bad')}/packs`, { method: 'POST', body: b })
    const wrong = Buffer.from(body)
    wrong[16 + 36 + 10] ^= 1 // a byte of the first chunk: its hash is not its id
    const truncated = body.subarray(0, body.length - 50)
    const after = Buffer.concat([body, Buffer.from([0])])
    const sha = Buffer.from(body)
    sha[8] = 2 // another algorithm than the ids'
    for (const b of [wrong, truncated, after, sha]) {
      const r = await post(b)
      expect(r.status).toBe(400)
      expect((await r.json()).code).toBe('bad_request')
    }
    const q = await fetch(`${ns(store, 'bad')}/query`, { method: 'POST', body: Buffer.concat(ids) })
    expect(q.status).toBe(200)
    expect(Buffer.from(await q.arrayBuffer()).equals(Buffer.concat(ids))).toBe(true) // still missing
    const v = await (await fetch(`${store.url}/v1`)).json()
    // Announced over the limit: 413 before the body is read (none is sent here).
    expect(await announced(`${ns(store, 'bad')}/packs`, v.limits.max_pack_bytes + 1)).toBe(413)
    // The good pack is taken, then its chunks are present.
    const ok = await post(body)
    expect(ok.status).toBe(200)
    expect(await ok.json()).toMatchObject({ chunks: 2, stored: 2, duplicates: 0 })
    const q2 = await fetch(`${ns(store, 'bad')}/query`, { method: 'POST', body: Buffer.concat(ids) })
    expect((await q2.arrayBuffer()).byteLength).toBe(0)
    const c = cp.createClient({ store: store.url, namespace: 'bad' })
    expect((await c.list()).length).toBe(0)
  })

  it('restore: Range (206), past the end (416), ETag (304), HEAD, 404', async () => {
    const data = randomBytes(300_000)
    nativePush(store, file('r', data), 'ranged', ['--ns', 'r'])
    const u = `${ns(store, 'r')}/files/ranged`
    const r = await fetch(u, { headers: { range: 'bytes=1000-1999' } })
    expect(r.status).toBe(206)
    expect(r.headers.get('content-range')).toBe(`bytes 1000-1999/${data.length}`)
    expect(Buffer.from(await r.arrayBuffer()).equals(data.subarray(1000, 2000))).toBe(true)
    const tail = await fetch(u, { headers: { range: 'bytes=-10' } })
    expect(Buffer.from(await tail.arrayBuffer()).equals(data.subarray(data.length - 10))).toBe(true)
    const past = await fetch(u, { headers: { range: `bytes=${data.length}-` } })
    expect(past.status).toBe(416)
    expect(past.headers.get('content-range')).toBe(`bytes */${data.length}`)
    const etag = r.headers.get('etag')!
    expect((await fetch(u, { headers: { 'if-none-match': etag } })).status).toBe(304)
    const h = await fetch(u, { method: 'HEAD' })
    expect(h.status).toBe(200)
    expect(h.headers.get('content-length')).toBe(String(data.length))
    expect((await fetch(`${ns(store, 'r')}/files/nothing`)).status).toBe(404)
    expect((await fetch(`${u}?version=9`)).status).toBe(404)
    const del = await fetch(u, { method: 'DELETE' })
    expect(await del.json()).toEqual({ deleted: 1 })
    expect((await fetch(u)).status).toBe(404)
    // A deleted latest version's number is not given again.
    expect(nativePush(store, file('r', data), 'ranged', ['--ns', 'r']).version).toBe(2)
  })

  it('tokens and namespaces stay apart', async () => {
    const f = file('t', randomBytes(100_000))
    const a = cutpoint(['push', f, '--name', 'secret', '--ns', 'ns-a', '--token', auth.tokens.a], auth)
    expect(a.status, a.stderr).toBe(0)
    const get = (n: string, token?: string, method = 'GET') =>
      fetch(`${ns(auth, n)}/files/secret`, { method, headers: token ? { authorization: `Bearer ${token}` } : {} })
    expect((await get('ns-a')).status).toBe(401)
    expect((await get('ns-a', 'not-a-token')).status).toBe(401)
    expect((await get('ns-a', auth.tokens.b)).status).toBe(403)
    expect((await get('ns-a', auth.tokens.ar)).status).toBe(200)
    expect((await get('ns-a', auth.tokens.ar, 'DELETE')).status).toBe(403)
    expect((await get('ns-b', auth.tokens.b)).status).toBe(404) // b's namespace has no such file
    const q = await fetch(`${ns(auth, 'ns-b')}/files`, { headers: { authorization: `Bearer ${auth.tokens.b}` } })
    expect((await q.json()).files).toEqual([])
    const body = (await get('ns-a', auth.tokens.a, 'DELETE'))
    expect(body.status).toBe(200)
  })
})
