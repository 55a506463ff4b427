// The edge store (edge/: a Worker over R2 and a Durable Object per namespace, in workerd through
// miniflare) against the same protocol suite as `cutpoint serve`: one suite, two targets. The
// native CLI and the library (createClient) push and pull through each; bad packs, restores and
// tokens get the answers PROTOCOL.md gives, on both.
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { mkdtempSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { randomBytes } from 'node:crypto'
import { join } from 'node:path'
import { request } from 'node:http'
import { spawn } from 'node:child_process'
import { blake3 } from 'hash-wasm'
import * as cp from '@cutpoint/web'
import { cutpoint, cutpointBin, haveCutpoint, nativePush, startStore, type Store } from './store'
import { startEdge } from './edge-store'
// @ts-expect-error: a JavaScript module without types
import { openBucket } from '../../edge/dev.mjs'
import { connect, createServer } from 'node:net'
import { mkdirSync } from 'node:fs'
import { dirname } from 'node:path'
import { homedir } from 'node:os'

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

/**
 * fetch over a connection of its own (no keep-alive): workerd closes an idle connection while a
 * test blocks in spawnSync (a CLI push), and fetch would then send on the closed socket.
 */
function fetch1(url: string, init: { method?: string; body?: string | Uint8Array; headers?: Record<string, string> } = {}): Promise<Response> {
  return new Promise((resolve, reject) => {
    const req = request(url, { method: init.method ?? 'GET', headers: init.headers, agent: false }, (res) => {
      const parts: Buffer[] = []
      res.on('data', (d) => parts.push(d))
      res.on('end', () => {
        const empty = res.statusCode === 204 || res.statusCode === 304
        resolve(new Response(empty ? null : Buffer.concat(parts), { status: res.statusCode, headers: res.headers as Record<string, string> }))
      })
      res.on('error', reject)
    })
    req.on('error', reject)
    req.end(init.body)
  })
}

const targets: [string, typeof startStore][] = [
  ['cutpoint serve', startStore],
  ['edge store (workerd)', startEdge],
]

describe.each(targets)('%s', (_label, start) => {
  let store: Store
  let auth: Store
  // A small recipe limit (a file of a few MiB is committed in parts) and 2 uploads per token.
  let small: Store
  const ns = (s: Store, n: string) => `${s.url}/v1/ns/${n}`

  beforeAll(async () => {
    store = await start()
    auth = await start({ tokens: { a: 'ns-a:rw', ar: 'ns-a:r', b: 'ns-b:rw' } })
    small = await start({ args: ['--max-recipe', '16k', '--max-uploads-per-token', '2'] })
  })
  afterAll(async () => {
    await store?.stop()
    await auth?.stop()
    await small?.stop()
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

  it('big packs (20 MiB, streamed through a temporary object at the edge) round trip', () => {
    const data = randomBytes(24 << 20)
    const r = nativePush(store, file('bigpack', data), 'bigpack', ['--pack-size', '20m'])
    expect(r.packs).toBe(2)
    const out = join(dir, 'bigpack-out')
    expect(cutpoint(['pull', 'bigpack', '-o', out], store).status).toBe(0)
    expect(readFileSync(out).equals(data)).toBe(true)
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
    expect(r.headers.get('content-length')).toBe('1000')
    const whole = await fetch(u)
    expect(whole.headers.get('content-length')).toBe(String(data.length))
    expect(Buffer.from(await whole.arrayBuffer()).equals(data)).toBe(true)
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

  it('gc removes the chunks no recipe names once their version is deleted, and keeps the others', async () => {
    const a = file('gc-a', randomBytes(500_000))
    const b = file('gc-b', randomBytes(500_000))
    nativePush(store, a, 'a', ['--ns', 'gc'])
    nativePush(store, b, 'b', ['--ns', 'gc'])
    const text = await (await fetch(`${ns(store, 'gc')}/recipes/a`)).text()
    const ids = Buffer.concat(text.split('\n').filter((l) => /^[0-9a-f]{64} /.test(l)).map((l) => Buffer.from(l.slice(0, 64), 'hex')))
    expect(ids.length).toBeGreaterThan(0)
    expect((await fetch(`${ns(store, 'gc')}/gc?grace=x`, { method: 'POST' })).status).toBe(400)
    const kept = await (await fetch(`${ns(store, 'gc')}/gc?grace=0`, { method: 'POST' })).json()
    expect(kept).toMatchObject({ packs_deleted: 0, chunks_removed: 0 })
    expect((await fetch(`${ns(store, 'gc')}/files/a`, { method: 'DELETE' })).status).toBe(200)
    const r = await fetch(`${ns(store, 'gc')}/gc?grace=0`, { method: 'POST' })
    expect(r.status).toBe(200)
    const rep = await r.json()
    expect(rep.packs_deleted).toBe(1)
    expect(rep.chunks_removed).toBe(ids.length / 32)
    const q = await fetch(`${ns(store, 'gc')}/query`, { method: 'POST', body: ids })
    expect(Buffer.from(await q.arrayBuffer()).equals(ids)).toBe(true) // all gone
    const out = join(dir, 'gc-out')
    expect(cutpoint(['pull', 'b', '--ns', 'gc', '-o', out], store).status).toBe(0)
    expect(readFileSync(out).equals(readFileSync(b))).toBe(true)
    const ck = await (await fetch(`${ns(store, 'gc')}/check`)).json()
    expect(ck).toMatchObject({ versions: 1, problems: [] })
    expect(ck.packs).toBeGreaterThan(0)
    expect(ck.chunks).toBeGreaterThan(0)
  })

  it('gc rewrites a pack whose live chunks are under half of it: the dead go, the live restore', async () => {
    // Two files pushed together share one pack; the bigger one deleted leaves it mostly dead.
    const a = file('rw-a', randomBytes(3 << 20))
    const b = file('rw-b', randomBytes(700_000))
    const p = cutpoint(['push', a, b, '--ns', 'rw', '--no-cache', '--json'], store)
    expect(p.status, p.stderr).toBe(0)
    const packs = p.stdout.trim().split('\n').map((l) => JSON.parse(l).packs).filter((n) => n !== undefined)
    expect(Math.max(...packs)).toBe(1)
    const text = await (await fetch(`${ns(store, 'rw')}/recipes/rw-a`)).text()
    const ids = Buffer.concat(text.split('\n').filter((l) => /^[0-9a-f]{64} /.test(l)).map((l) => Buffer.from(l.slice(0, 64), 'hex')))
    expect((await fetch(`${ns(store, 'rw')}/files/rw-a`, { method: 'DELETE' })).status).toBe(200)
    const rep = await (await fetch(`${ns(store, 'rw')}/gc?grace=0`, { method: 'POST' })).json()
    expect(rep).toMatchObject({ packs_deleted: 0, packs_rewritten: 1, chunks_removed: ids.length / 32 })
    expect(rep.bytes_freed).toBeGreaterThan(3 << 20)
    const q = await fetch(`${ns(store, 'rw')}/query`, { method: 'POST', body: ids })
    expect(Buffer.from(await q.arrayBuffer()).equals(ids)).toBe(true) // all gone
    const out = join(dir, 'rw-out')
    expect(cutpoint(['pull', 'rw-b', '--ns', 'rw', '-o', out], store).status).toBe(0)
    expect(readFileSync(out).equals(readFileSync(b))).toBe(true)
    expect((await (await fetch(`${ns(store, 'rw')}/check`)).json()).problems).toEqual([])
    // Nothing left to rewrite.
    expect(await (await fetch(`${ns(store, 'rw')}/gc?grace=0`, { method: 'POST' })).json()).toMatchObject({ packs_rewritten: 0, chunks_removed: 0 })
  })

  it('batch commits (POST commits): pushMany sends one batch; each file stands alone; a framing error commits nothing', async () => {
    const v = await (await fetch(`${store.url}/v1`)).json()
    expect(v.features).toContain('batch')
    expect(v.limits.max_batch_files).toBe(4096)
    const files = Array.from({ length: 40 }, (_, i) => ({ name: `m/f${i}`, data: i % 10 === 9 ? Buffer.from('same') : randomBytes(1 + i * 397) }))
    const log: string[] = []
    const fetchLog: typeof fetch = (url, init) => {
      log.push(`${init?.method ?? 'GET'} ${new URL(String(url)).pathname.replace(/^\/v1\/ns\/[^/]+\//, '')}`)
      return fetch(url, init)
    }
    const client = cp.createClient({ store: store.url, namespace: 'many', fetch: fetchLog })
    try {
      const m = await client.pushMany(files.map((f) => ({ input: new Uint8Array(f.data), name: f.name })))
      expect(m.committed).toBe(40)
      expect(log.filter((l) => l === 'POST commits').length).toBe(1)
      expect(log.filter((l) => l.startsWith('PUT ')).length).toBe(0)
      for (const i of [0, 9, 39]) expect((await bytesOf(await client.pull(files[i].name))).equals(files[i].data)).toBe(true)
    } finally {
      await client.close()
    }
    // By hand: a good recipe (twice: two versions), a bad name, a damaged recipe, a delta
    // against a version that is not there; each answered on its own, in order.
    const recipe = Buffer.from(await (await fetch(`${ns(store, 'many')}/recipes/${encodeURIComponent('m/f3')}`)).arrayBuffer())
    const damaged = Buffer.from(recipe.toString('latin1').replace(/digest [0-9a-f]{4}/, 'digest 0000'), 'latin1')
    const line = (k: string) => recipe.toString('latin1').split('\n').find((l) => l.startsWith(`${k} `))
    const delta = Buffer.from(`cutpoint-delta 1\nbase 7\n${line('profile')}\n${line('hash')}\n${line('digest')}\n= 0 1\n${line('end')}\n`)
    const entry = (name: string, body: Buffer) => Buffer.concat([Buffer.from(`file ${name} ${body.length}\n`), body])
    const batch = Buffer.concat([Buffer.from('cutpoint-batch 1\n'), entry('x%2Fa', recipe), entry('bad%2F%2Fname', recipe),
      entry('x%2Fb', damaged), entry('x%2Fa', recipe), entry('x%2Fc', delta), Buffer.from('end 5\n')])
    const r = await fetch(`${ns(store, 'many')}/commits`, { method: 'POST', body: batch })
    expect(r.status).toBe(200)
    const res = (await r.json()).results
    expect(res.map((x: any) => [x.name, x.status])).toEqual([['x/a', 201], ['bad//name', 400], ['x/b', 400], ['x/a', 201], ['x/c', 404]])
    expect([res[0].version, res[3].version]).toEqual([1, 2])
    const listed = await (await fetch(`${ns(store, 'many')}/files`)).json()
    expect(listed.files.filter((f: any) => f.name.startsWith('x/')).map((f: any) => [f.name, f.version])).toEqual([['x/a', 1], ['x/a', 2]])
    // A framing error (a length past the end): 400, nothing committed.
    const bad = Buffer.concat([Buffer.from('cutpoint-batch 1\n'), entry('y%2Fa', recipe), Buffer.from(`file y%2Fb 99999\n`), recipe, Buffer.from('end 2\n')])
    const rb = await fetch(`${ns(store, 'many')}/commits`, { method: 'POST', body: bad })
    expect(rb.status).toBe(400)
    const after = await (await fetch(`${ns(store, 'many')}/files`)).json()
    expect(after.files.some((f: any) => f.name.startsWith('y/'))).toBe(false)
    // The native CLI pushes a directory through batches and restores it.
    const d = mkdtempSync(join(dir, 'tree-'))
    for (let i = 0; i < 12; i++) writeFileSync(join(d, `t${i}.bin`), randomBytes(100 + i * 1000))
    const p = cutpoint(['push', '--no-cache', '--store', store.url, '--ns', 'many', '--name', 'tree', d])
    expect(p.status, p.stderr).toBe(0)
    const out = join(dir, 'tree-out.bin')
    const g = cutpoint(['pull', 'tree/t7.bin', '-o', out, '--store', store.url, '--ns', 'many'])
    expect(g.status, g.stderr).toBe(0)
    expect(readFileSync(out).equals(readFileSync(join(d, 't7.bin')))).toBe(true)
  })

  it('recipe parts: a few MiB committed in parts by the CLI and the library, restored; bad parts refused; gc keeps what parts name', async () => {
    const v = await (await fetch1(`${small.url}/v1`)).json()
    expect(v.features).toContain('parts')
    expect(v.limits.max_recipe_bytes).toBe(16384)
    const u = (p: string) => `${ns(small, 'parts')}/${p}`
    const partLines = async (name: string) =>
      (await (await fetch1(u(`recipes/${name}?parts=1`))).text()).split('\n').filter((l) => l.startsWith('part '))
    // The native CLI: several parts; pulled byte-identical; a re-push sends no chunk and no part.
    const data = randomBytes(4 << 20)
    const f = file('parts.bin', data)
    const first = nativePush(small, f, 'big', ['--ns', 'parts', '--no-cache'])
    expect(first.novel_bytes).toBe(data.length)
    const lines = await partLines('big')
    expect(lines.length).toBeGreaterThanOrEqual(3)
    const out = join(dir, 'parts-out')
    const p = cutpoint(['pull', 'big', '--ns', 'parts', '-o', out], small)
    expect(p.status, p.stderr).toBe(0)
    expect(readFileSync(out).equals(data)).toBe(true)
    const again = nativePush(small, f, 'big', ['--ns', 'parts', '--no-cache'])
    expect([again.version, again.novel_bytes, again.pack_bytes]).toEqual([2, 0, 0])
    // The expanded recipe (no part lines, every chunk line) and a range across parts.
    const expanded = (await (await fetch1(u('recipes/big'))).text()).split('\n')
    expect(expanded.some((l) => l.startsWith('part '))).toBe(false)
    const count = lines.reduce((n, l) => n + Number(l.split(' ')[2]), 0)
    expect(expanded.filter((l) => /^[0-9a-f]{64} /.test(l)).length).toBe(count)
    expect(expanded).toContain(`end ${count} ${data.length}`)
    const span = Number(lines[0].split(' ')[3])
    const r = await fetch1(u('files/big'), { headers: { range: `bytes=${span - 1000}-${span + 999}` } })
    expect(r.status).toBe(206)
    expect(Buffer.from(await r.arrayBuffer()).equals(data.subarray(span - 1000, span + 1000))).toBe(true)
    // The library: in parts too, pulled by the CLI and by itself.
    const c = cp.createClient({ store: small.url, namespace: 'parts' })
    try {
      const lib = randomBytes(3 << 20)
      expect((await c.push(lib, { name: 'lib' })).bytes).toBe(lib.length)
      expect((await partLines('lib')).length).toBeGreaterThanOrEqual(2)
      expect((await bytesOf(await c.pull('lib'))).equals(lib)).toBe(true)
      expect((await bytesOf(await c.pull('big'))).equals(data)).toBe(true)
      const o2 = join(dir, 'parts-lib-out')
      expect(cutpoint(['pull', 'lib', '--ns', 'parts', '-o', o2], small).status).toBe(0)
      expect(readFileSync(o2).equals(lib)).toBe(true)
    } finally {
      await c.close()
    }
    // parts/query and GET parts/{id}: the stored ones found, their text hashes to their id.
    const ids = lines.map((l) => l.split(' ')[1])
    const unknown = randomBytes(32)
    const q = await fetch1(u('parts/query'), { method: 'POST', body: Buffer.concat([...ids.map((i) => Buffer.from(i, 'hex')), unknown]) })
    expect(Buffer.from(await q.arrayBuffer()).equals(unknown)).toBe(true)
    const text = Buffer.from(await (await fetch1(u(`parts/${ids[0]}`))).arrayBuffer())
    expect(await blake3(text)).toBe(ids[0])
    expect((await fetch1(u(`parts/${unknown.toString('hex')}`))).status).toBe(404)
    expect((await fetch1(u('parts/XYZ'))).status).toBe(400)
    // A part naming a chunk the namespace lacks: 409 missing_chunks, nothing stored.
    const ghost = randomBytes(32).toString('hex')
    const bad = await fetch1(u('parts'), { method: 'POST', body: `cutpoint-part 1\nhash blake3\n${ghost} 1000 - r\nend 1 1000\n` })
    expect(bad.status).toBe(409)
    expect(await bad.json()).toMatchObject({ code: 'missing_chunks', missing: [ghost] })
    // A commit naming a part that is not stored: 409 missing_parts; a wrong COUNT: 400.
    const stored = await (await fetch1(u('recipes/big?parts=1'))).text()
    const lost = unknown.toString('hex')
    const c1 = await fetch1(u('files/nope'), { method: 'PUT', body: stored.replace(ids[1], lost) })
    expect(c1.status).toBe(409)
    expect(await c1.json()).toMatchObject({ code: 'missing_parts', missing_parts: [lost] })
    const [, , n1, b1] = lines[1].split(' ')
    const wrong = stored.replace(lines[1], `part ${ids[1]} ${Number(n1) - 1} ${b1}`).replace(/\nend (\d+) /, (_m, n) => `\nend ${Number(n) - 1} `)
    expect((await fetch1(u('files/nope'), { method: 'PUT', body: wrong })).status).toBe(400)
    expect((await (await fetch1(u('files'))).json()).files.some((x: any) => x.name === 'nope')).toBe(false)
    // gc keeps the chunks named only through parts; once no version names them, parts and chunks go.
    const chunkIds = Buffer.concat(expanded.filter((l) => /^[0-9a-f]{64} /.test(l)).map((l) => Buffer.from(l.slice(0, 64), 'hex')))
    const kept = await (await fetch1(u('gc?grace=0'), { method: 'POST' })).json()
    expect(kept).toMatchObject({ packs_deleted: 0, chunks_removed: 0, parts_deleted: 0 })
    expect((await (await fetch1(u('query'), { method: 'POST', body: chunkIds })).arrayBuffer()).byteLength).toBe(0)
    expect((await (await fetch1(u('check'))).json())).toMatchObject({ versions: 3, problems: [] })
    const o3 = join(dir, 'parts-out3')
    expect(cutpoint(['pull', 'big', '--ns', 'parts', '-o', o3], small).status).toBe(0)
    expect(readFileSync(o3).equals(data)).toBe(true)
    expect((await fetch1(u('files/big'), { method: 'DELETE' })).status).toBe(200)
    const swept = await (await fetch1(u('gc?grace=0'), { method: 'POST' })).json()
    expect(swept.parts_deleted).toBeGreaterThanOrEqual(lines.length)
    expect(swept.chunks_removed).toBe(chunkIds.length / 32)
    const q2 = await fetch1(u('parts/query'), { method: 'POST', body: Buffer.from(ids[0], 'hex') })
    expect((await q2.arrayBuffer()).byteLength).toBe(32)
    expect((await (await fetch1(u('check'))).json()).problems).toEqual([])
  }, 180_000)

  it('uploads per token: past max_uploads_per_token a 503 busy with Retry-After at once; free again once they end', async () => {
    const packs = `${ns(small, 'slots')}/packs`
    // An upload that announces 1 MiB, sends its first bytes and then nothing.
    const ended: string[] = []
    const stall = () => {
      const req = request(packs, { method: 'POST', headers: { 'content-length': String(1 << 20) }, agent: false })
      req.on('error', (e) => ended.push(e.message))
      req.on('response', (res) => ended.push(String(res.statusCode)))
      req.write(Buffer.alloc(16))
      return req
    }
    // A one-byte pack: 400 when a slot is free (a bad pack), 503 when none is.
    const probe = async () => {
      const r = await fetch1(packs, { method: 'POST', body: new Uint8Array([1]) })
      return { status: r.status, retry: r.headers.get('retry-after'), body: await r.json() }
    }
    const until = async (want: number, refill?: () => void) => {
      for (let i = 0; i < 150; i++) {
        refill?.()
        const p = await probe()
        if (p.status === want) return p
        await new Promise((r) => setTimeout(r, 200))
      }
      throw new Error(`no ${want} in 30 s (the stalled uploads: ${ended.join(', ') || 'open'})`)
    }
    // A probe may reach the store before a stalled upload does and take its slot for a moment: the
    // upload that found no slot is answered 503 at once and is replaced by a new one, so that two
    // stalled uploads hold both slots when the probes go on.
    const stalled = [stall(), stall()]
    let answered = 0
    const refill = () => {
      for (; answered < ended.length; answered++) stalled.push(stall())
    }
    try {
      const busy = await until(503, refill)
      expect(busy.retry).toBe('2')
      expect(busy.body.code).toBe('busy')
      // Every rw request that takes a slot is refused alike, a commit too.
      expect((await fetch1(`${ns(small, 'slots')}/files/x`, { method: 'PUT', body: 'x' })).status).toBe(503)
    } finally {
      for (const s of stalled) s.destroy()
    }
    expect((await until(400)).body.code).toBe('bad_request')
    expect(nativePush(small, file('slots.bin', randomBytes(100_000)), 'after', ['--ns', 'slots']).version).toBe(1)
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

// Two Workers (separate isolates, as the platform runs many of one Worker) bound to one R2
// bucket and one Durable Object namespace: what one stored, the other finds, restores and builds
// on; commits of one name through both never share a version number.
describe('two edge Worker instances over one bucket', () => {
  it('see each other\'s chunks and versions', async () => {
    const two = await startEdge({ instances: 2 })
    try {
      expect(two.others.length).toBe(1)
      const [a, b] = [two, { ...two, url: two.others[0] }]
      const data = randomBytes(2 << 20)
      const f = file('two.bin', data)
      const first = nativePush(a, f, 'two')
      expect(first.novel_bytes).toBe(data.length)
      // B's existence query finds every chunk A stored; its push sends none.
      const again = nativePush(b, f, 'two', ['--no-cache'])
      expect(again.novel_bytes).toBe(0)
      expect(again.pack_bytes).toBe(0)
      expect(again.version).toBe(2)
      // A's library pull of B's version, B's native pull of A's: byte-identical.
      const client = cp.createClient({ store: b.url })
      try {
        expect((await bytesOf(await client.pull('two', { version: 1 }))).equals(data)).toBe(true)
      } finally {
        await client.close()
      }
      const out = join(dir, 'two-out.bin')
      expect(cutpoint(['pull', 'two', '--version', '2', '-o', out], a).status).toBe(0)
      expect(readFileSync(out).equals(data)).toBe(true)
      // Commits of one name through both at once: distinct numbers, every one listed by each.
      const pushes = await Promise.all([a, b, a, b].map((s, i) => new Promise<number>((resolve, reject) => {
        const p = spawn(cutpointBin, ['push', f, '--name', 'race', '--json', '--no-cache', '--store', s.url])
        let o = ''
        p.stdout.on('data', (d) => (o += d))
        p.on('close', (code) => (code === 0 ? resolve(JSON.parse(o.trim().split('\n').pop()!).version) : reject(new Error(`push ${i}: ${code}`))))
      })))
      expect([...pushes].sort()).toEqual([1, 2, 3, 4])
      for (const s of [a, b]) {
        const l = await (await fetch(`${s.url}/v1/ns/default/files`)).json()
        expect(l.files.filter((x: any) => x.name === 'race').map((x: any) => x.version)).toEqual([1, 2, 3, 4])
      }
    } finally {
      await two.stop()
    }
  })
})

// versitygw (an S3-compatible server; its posix backend: the bucket is a directory, each object a
// file under its key) on 127.0.0.1, as the native S3 tests start it.
const S3 = { key: 'cutpointtest', secret: 'cutpointtestsecret0123456789', bucket: 'cutpoint' }
async function startVersity(root: string): Promise<{ endpoint: string; bucketDir: string; stop: () => Promise<void> }> {
  const bin = process.env.CUTPOINT_VERSITYGW ?? join(process.env.CUTPOINT_GOBIN ?? join(homedir(), 'go/bin'), 'versitygw')
  const bucketDir = join(root, S3.bucket)
  mkdirSync(bucketDir, { recursive: true })
  const port = await new Promise<number>((resolve) => {
    const srv = createServer().listen(0, '127.0.0.1', () => {
      const p = (srv.address() as any).port
      srv.close(() => resolve(p))
    })
  })
  const child = spawn(bin, ['--access', S3.key, '--secret', S3.secret, '--port', `127.0.0.1:${port}`, 'posix', root], { stdio: 'ignore' })
  const exited = new Promise<void>((r) => child.once('exit', () => r()))
  for (let i = 0; ; i++) {
    const up = await new Promise<boolean>((resolve) => {
      const c = connect(port, '127.0.0.1', () => (c.end(), resolve(true)))
      c.on('error', () => resolve(false))
    })
    if (up) break
    if (i > 300 || child.exitCode !== null) throw new Error(`versitygw (${bin}) did not start`)
    await new Promise((r) => setTimeout(r, 100))
  }
  return { endpoint: `http://127.0.0.1:${port}`, bucketDir, stop: async () => {
    child.kill('SIGKILL')
    await exited
  } }
}

/** Every object of an edge store's (stopped) R2 bucket written into an S3 bucket's directory, key for key. */
async function r2ToS3(edgeDir: string, bucketDir: string): Promise<string[]> {
  const { bucket, dispose } = await openBucket(edgeDir)
  const keys: string[] = []
  try {
    let cursor: string | undefined
    do {
      const l = await bucket.list({ cursor })
      for (const o of l.objects) {
        const b = await bucket.get(o.key)
        const f = join(bucketDir, o.key)
        mkdirSync(dirname(f), { recursive: true })
        writeFileSync(f, Buffer.from(await b.arrayBuffer()))
        keys.push(o.key)
      }
      cursor = l.truncated ? l.cursor : undefined
    } while (cursor)
  } finally {
    await dispose()
  }
  return keys
}

/** Every object of an S3 bucket's directory put into a fresh edge state directory's R2 bucket, key for key. */
async function s3ToR2(bucketDir: string, edgeDir: string): Promise<string[]> {
  const { bucket, dispose } = await openBucket(edgeDir)
  const keys: string[] = []
  try {
    for (const f of readdirSync(bucketDir, { recursive: true }) as string[]) {
      const path = join(bucketDir, f)
      if (!f.startsWith('ns/') || !statSync(path).isFile()) continue // versitygw's own files start with '.'
      await bucket.put(f, new Uint8Array(readFileSync(path))) // a copy: a view into a shared buffer does not cross to workerd
      keys.push(f)
    }
  } finally {
    await dispose()
  }
  return keys
}

// One bucket, served by `cutpoint serve --data s3://` and by the edge store: what the edge
// stored (copied key for key from its R2 into a versitygw bucket) is listed, restored and found
// by serve; what serve stored (copied back into a fresh R2) is indexed by the edge's start (the
// namespace's Durable Object is empty: it builds its index from the bucket, every pack verified).
describe('one bucket, served by cutpoint serve --data s3:// and by the edge store', () => {
  it('each lists, restores and re-pushes (no chunk bytes) what the other stored', async () => {
    const root = mkdtempSync(join(tmpdir(), 'cutpoint-shared-bucket-'))
    const s3 = await startVersity(join(root, 's3'))
    const env0 = { ...process.env }
    Object.assign(process.env, { AWS_ACCESS_KEY_ID: S3.key, AWS_SECRET_ACCESS_KEY: S3.secret, AWS_REGION: 'us-east-1' })
    const stops: (() => Promise<void>)[] = [s3.stop]
    try {
      // (a) The edge stores a file (plain) and one in parts (a small recipe limit).
      const edgeDir = join(root, 'edge-a')
      const edge = await startEdge({ data: edgeDir, args: ['--max-recipe', '16k'] })
      stops.push(() => edge.stop(true))
      const one = randomBytes(3 << 20)
      const f1 = file('shared-1.bin', one)
      expect(nativePush(edge, f1, 'from-edge', ['--no-cache']).novel_bytes).toBe(one.length)
      const c = cp.createClient({ store: edge.url })
      const two = randomBytes(5 << 20)
      try {
        await c.push(two, { name: 'edge-parts' })
      } finally {
        await c.close()
      }
      expect((await (await fetch1(`${edge.url}/v1/ns/default/recipes/edge-parts?parts=1`)).text())).toMatch(/\npart [0-9a-f]{64} /)
      await edge.stop(true)
      const copied = await r2ToS3(edgeDir, s3.bucketDir)
      expect(copied.some((k) => k.startsWith('ns/default/packs/'))).toBe(true)
      expect(copied.some((k) => k.startsWith('ns/default/parts/'))).toBe(true)
      expect(copied.some((k) => k.includes('/tmp/'))).toBe(false)
      const serve = await startStore({ data: `s3://${S3.bucket}`, args: ['--s3-endpoint', s3.endpoint, '--cache', join(root, 'serve-cache')] })
      stops.push(() => serve.stop())
      const ls = JSON.parse(cutpoint(['ls', '--json'], serve).stdout)
      const listed = (Array.isArray(ls) ? ls : ls.files).map((v: any) => `${v.name}@${v.version}`).sort()
      expect(listed).toEqual(['edge-parts@1', 'from-edge@1'])
      for (const [name, data] of [['from-edge', one], ['edge-parts', two]] as const) {
        const out = join(dir, `shared-out-${name}`)
        const p = cutpoint(['pull', name, '-o', out], serve)
        expect(p.status, p.stderr).toBe(0)
        expect(readFileSync(out).equals(data)).toBe(true)
      }
      const again = nativePush(serve, f1, 'from-edge', ['--no-cache'])
      expect([again.version, again.novel_bytes, again.pack_bytes]).toEqual([2, 0, 0])
      // (b) serve stores a file; the bucket goes key for key into a fresh edge store's R2.
      const three = randomBytes(2 << 20)
      const f3 = file('shared-3.bin', three)
      expect(nativePush(serve, f3, 'from-serve', ['--no-cache']).novel_bytes).toBe(three.length)
      await serve.stop()
      const edgeDir2 = join(root, 'edge-b')
      const back = await s3ToR2(s3.bucketDir, edgeDir2)
      expect(back.length).toBeGreaterThanOrEqual(copied.length)
      // Built from the bucket a step of 2 objects a request: 503 busy (Retry-After) until it is done.
      const edge2 = await startEdge({ data: edgeDir2, args: ['--test-reindex-step', '2'] })
      stops.push(() => edge2.stop(true))
      let busy = 0
      let r2: Response
      for (;;) {
        r2 = await fetch1(`${edge2.url}/v1/ns/default/files`)
        if (r2.status !== 503) break
        expect(r2.headers.get('retry-after')).toBe('2')
        expect((await r2.json()).code).toBe('busy')
        expect(++busy).toBeLessThan(back.length)
      }
      expect(busy).toBeGreaterThanOrEqual(2) // several packs and four recipes: several steps
      const l2 = await r2.json()
      expect(l2.files.map((v: any) => `${v.name}@${v.version}`)).toEqual(['edge-parts@1', 'from-edge@1', 'from-edge@2', 'from-serve@1'])
      for (const [name, data] of [['from-serve', three], ['from-edge', one], ['edge-parts', two]] as const) {
        const out = join(dir, `shared-back-${name}`)
        const p = cutpoint(['pull', name, '-o', out], edge2)
        expect(p.status, p.stderr).toBe(0)
        expect(readFileSync(out).equals(data)).toBe(true)
      }
      const again2 = nativePush(edge2, f3, 'from-serve', ['--no-cache'])
      expect([again2.version, again2.novel_bytes, again2.pack_bytes]).toEqual([2, 0, 0])
      expect((await (await fetch1(`${edge2.url}/v1/ns/default/check`)).json()).problems).toEqual([])
    } finally {
      for (const s of stops.reverse()) await s().catch(() => {})
      process.env = env0
      rmSync(root, { recursive: true, force: true })
    }
  }, 300_000)
})

// A crash between an object's R2 put and its index row (made by a test-only fault, which stops
// the request right there), then the runtime restarted over the same state without the fault:
// the namespace's start indexes the pack (a re-push sends no chunk) and lists the version whose
// recipe was put (it restores byte-identical; the next push gets the next number).
describe('edge store start-up reconcile', () => {
  it('indexes a pack and lists a version a crash left between the put and the index', async () => {
    const data = mkdtempSync(join(tmpdir(), 'cutpoint-edge-reconcile-'))
    const bytes = randomBytes(1 << 20)
    const f = file('reconcile.bin', bytes)
    const push = (s: Store, name: string) => cutpoint(['push', f, '--name', name, '--json', '--no-cache', '--retries', '0'], s)
    let s: Store | undefined
    try {
      s = await startEdge({ data, fault: 'pack-unindexed' })
      expect(push(s, 'p').status).not.toBe(0)
      await s.stop(true)
      s = await startEdge({ data })
      const again = nativePush(s, f, 'p', ['--no-cache'])
      expect(again.novel_bytes).toBe(0)
      expect(again.pack_bytes).toBe(0)
      await s.stop(true)
      // The recipe put (the commit point), its row not written.
      const other = randomBytes(1 << 20)
      const g = file('reconcile2.bin', other)
      s = await startEdge({ data, fault: 'recipe-unrowed' })
      expect(cutpoint(['push', g, '--name', 'r', '--json', '--no-cache', '--retries', '0'], s).status).not.toBe(0)
      await s.stop(true)
      s = await startEdge({ data })
      const l = await (await fetch(`${s.url}/v1/ns/default/files`)).json()
      expect(l.files.filter((x: any) => x.name === 'r').map((x: any) => x.version)).toEqual([1])
      const out = join(dir, 'reconcile-out.bin')
      expect(cutpoint(['pull', 'r', '-o', out], s).status).toBe(0)
      expect(readFileSync(out).equals(other)).toBe(true)
      expect(nativePush(s, g, 'r', ['--no-cache']).version).toBe(2)
      const c = await (await fetch(`${s.url}/v1/ns/default/check`)).json()
      expect(c.problems).toEqual([])
    } finally {
      await s?.stop(true)
      rmSync(data, { recursive: true, force: true })
    }
  })
})

// The runtime killed (SIGKILL of node and workerd) at random points during pushes, restarted
// over the same persisted state: every reported version restores byte-identical, every listed
// version restores to one of the inputs, a re-push of everything then makes the store whole, and
// a second one sends no chunk.
describe('edge store killed during pushes', () => {
  it('keeps every reported version and nothing half-committed', async () => {
    const data = mkdtempSync(join(tmpdir(), 'cutpoint-edge-kill-'))
    const inputs = [0, 1, 2, 3, 4, 5, 6, 7].map((i) => randomBytes((1 << 20) + i * 77_777))
    const paths = inputs.map((d, i) => file(`kill-${i}`, d))
    const reported: { name: string; version: number; i: number }[] = []
    let edge = await startEdge({ data })
    try {
      for (let round = 0; round < 4; round++) {
        // One push that completes (reported), then one of new data cut by the kill at a random point.
        const [j, i] = [2 * round, 2 * round + 1]
        const t0 = Date.now()
        reported.push({ name: `f${j}`, version: nativePush(edge, paths[j], `f${j}`).version, i: j })
        const took = Date.now() - t0 // the kill lands within a push of the same size, whatever the load
        const child = spawn(cutpointBin, ['push', paths[i], '--name', `f${i}`, '--json', '--retries', '0', '--store', edge.url],
          { stdio: ['ignore', 'pipe', 'pipe'] })
        let out = ''
        child.stdout.on('data', (b) => (out += b))
        const done = new Promise<number | null>((r) => child.once('exit', (c) => r(c)))
        await new Promise((r) => setTimeout(r, took * (0.1 + 0.8 * Math.random())))
        await edge.stop(true)
        if ((await done) === 0) reported.push({ name: `f${i}`, version: JSON.parse(out.trim().split('\n').pop()!).version, i })
        edge = await startEdge({ data })
      }
      console.log(`edge kill test: ${reported.length - 4} of 4 pushes reported before the kill`)
      for (const r of reported) {
        const o = join(dir, 'kill-out')
        const p = cutpoint(['pull', r.name, '--version', String(r.version), '-o', o], edge)
        expect(p.status, p.stderr).toBe(0)
        expect(readFileSync(o).equals(inputs[r.i])).toBe(true)
      }
      const listed = JSON.parse(cutpoint(['ls', '--json'], edge).stdout || '[]')
      for (const v of Array.isArray(listed) ? listed : listed.files ?? []) {
        const o = join(dir, 'kill-out')
        const p = cutpoint(['pull', v.name, '--version', String(v.version), '-o', o], edge)
        expect(p.status, p.stderr).toBe(0)
        expect(inputs.some((d) => readFileSync(o).equals(d))).toBe(true)
      }
      for (const [i, p] of paths.entries()) nativePush(edge, p, `f${i}`)
      for (const [i, p] of paths.entries()) expect(nativePush(edge, p, `f${i}`).novel_chunks).toBe(0)
    } finally {
      await edge.stop()
      rmSync(data, { recursive: true, force: true })
    }
  }, 400_000) // five starts of the runtime: slow on a loaded machine
})

// A pack damaged at rest (a byte flipped in miniflare's blob of it): check names it, and a restore
// stops early at the damaged chunk (the client sees a short body) instead of sending wrong bytes.
describe('edge store over a damaged pack', () => {
  it('check names the pack; the restore stops before the bad chunk', async () => {
    const edge = await startEdge()
    try {
      const data = randomBytes(300_000)
      nativePush(edge, file('dmg', data), 'dmg')
      expect((await (await fetch(`${edge.url}/v1/ns/default/check`)).json()).problems).toEqual([])
      const blobs = (readdirSync(join(edge.data, 'r2'), { recursive: true }) as string[])
        .map((f) => join(edge.data, 'r2', f)).filter((f) => statSync(f).isFile() && statSync(f).size > 290_000)
      expect(blobs.length).toBe(1) // the pack (recipes are a few KB)
      const b = readFileSync(blobs[0])
      b[5000] ^= 0xff
      writeFileSync(blobs[0], b)
      const ck = await (await fetch(`${edge.url}/v1/ns/default/check`)).json()
      expect(ck.problems.length).toBe(1)
      expect(ck.problems[0]).toMatch(/does not verify/)
      const r = await fetch(`${edge.url}/v1/ns/default/files/dmg`)
      const got = await r.arrayBuffer().then((a) => Buffer.from(a), () => null)
      expect(got === null || got.length < data.length).toBe(true)
      if (got) expect(got.equals(data.subarray(0, got.length))).toBe(true)
    } finally {
      await edge.stop()
    }
  })
})

// The edge store as one node of a shared bucket (PROTOCOL.md §6): another node's gc lock
// (`ns/<ns>/gc-lock`, put into R2 here as that node would) makes a commit answer 503 busy while
// it is younger than the lease, and is ignored (and taken over by a gc) once older; an edge gc
// rewrites `gc-epoch` and leaves no lock behind.
describe('edge store and the gc lock of a shared bucket', () => {
  it('a live lock refuses commits and gcs (503 busy); an expired one does not; a gc rewrites the epoch and removes its lock', async () => {
    const data = mkdtempSync(join(tmpdir(), 'cutpoint-edge-gclock-'))
    const bytes = randomBytes(300_000)
    const f = file('gclock.bin', bytes)
    let s: Store | undefined
    const withBucket = async (fn: (b: any) => Promise<void>) => {
      const { bucket, dispose } = await openBucket(data)
      try {
        await fn(bucket)
      } finally {
        await dispose()
      }
    }
    try {
      s = await startEdge({ data, args: ['--gc-settle', '0'] })
      expect(nativePush(s, f, 'a', ['--no-cache']).version).toBe(1)
      const recipe = await (await fetch1(`${s.url}/v1/ns/default/recipes/a`)).text()
      await s.stop(true)
      await withBucket(async (b) => {
        await b.put('ns/default/gc-lock', 'gc running (another node)\n')
        await b.put('ns/default/gc-epoch', 'before\n')
      })
      // A live lock (the default lease, 120 s): a commit and a gc are refused, nothing committed.
      s = await startEdge({ data, args: ['--gc-settle', '0'] })
      const busy = await fetch1(`${s.url}/v1/ns/default/files/b`, { method: 'PUT', body: recipe })
      expect(busy.status).toBe(503)
      expect(busy.headers.get('retry-after')).toBe('2')
      expect((await busy.json()).code).toBe('busy')
      const gcBusy = await fetch1(`${s.url}/v1/ns/default/gc?grace=0`, { method: 'POST' })
      expect(gcBusy.status).toBe(503)
      expect((await gcBusy.json()).code).toBe('busy')
      const l = await (await fetch1(`${s.url}/v1/ns/default/files`)).json()
      expect(l.files.map((v: any) => v.name)).toEqual(['a'])
      await s.stop(true)
      // The same lock past a lease of 1 s (a dead node's): commits ignore it, a gc takes it over.
      await new Promise((r) => setTimeout(r, 1500))
      s = await startEdge({ data, args: ['--gc-settle', '0', '--gc-lease', '1'] })
      const ok = await fetch1(`${s.url}/v1/ns/default/files/b`, { method: 'PUT', body: recipe })
      expect(ok.status, await ok.clone().text()).toBe(201)
      const gc = await fetch1(`${s.url}/v1/ns/default/gc?grace=0`, { method: 'POST' })
      expect(gc.status, await gc.clone().text()).toBe(200)
      const out = join(dir, 'gclock-out.bin')
      expect(cutpoint(['pull', 'b', '-o', out], s).status).toBe(0)
      expect(readFileSync(out).equals(bytes)).toBe(true)
      await s.stop(true)
      let epoch = ''
      await withBucket(async (b) => {
        expect(await b.head('ns/default/gc-lock')).toBeNull()
        epoch = await (await b.get('ns/default/gc-epoch')).text()
        expect(epoch).toMatch(/^[0-9a-f]{32}\n$/)
      })
      // A gc with no lock there: it takes one, rewrites the epoch again, and leaves none.
      s = await startEdge({ data, args: ['--gc-settle', '0'] })
      expect((await fetch1(`${s.url}/v1/ns/default/gc?grace=0`, { method: 'POST' })).status).toBe(200)
      await s.stop(true)
      await withBucket(async (b) => {
        expect(await b.head('ns/default/gc-lock')).toBeNull()
        const e2 = await (await b.get('ns/default/gc-epoch')).text()
        expect(e2).toMatch(/^[0-9a-f]{32}\n$/)
        expect(e2).not.toBe(epoch)
      })
    } finally {
      await s?.stop(true)
      rmSync(data, { recursive: true, force: true })
    }
  }, 120_000)
})

// Freshness (PROTOCOL.md §6): a pack and a recipe another node (`cutpoint serve --data s3://`)
// wrote into the bucket AFTER the edge built its namespace's index are seen: the existence query
// answers their chunks present, the version is listed, restores, and a re-push sends no chunk.
describe('edge store sees what another node of its bucket stored after its index was built', () => {
  it('query, list, restore and re-push see a later pack and recipe of cutpoint serve', async () => {
    const root = mkdtempSync(join(tmpdir(), 'cutpoint-edge-fresh-'))
    const s3 = await startVersity(join(root, 's3'))
    const env0 = { ...process.env }
    Object.assign(process.env, { AWS_ACCESS_KEY_ID: S3.key, AWS_SECRET_ACCESS_KEY: S3.secret, AWS_REGION: 'us-east-1' })
    const edgeDir = join(root, 'edge')
    let edge: Store | undefined
    const stops: (() => Promise<void>)[] = [s3.stop]
    try {
      // The edge's namespace is indexed (it stored a file itself).
      edge = await startEdge({ data: edgeDir })
      const mine = randomBytes(400_000)
      expect(nativePush(edge, file('fresh-mine.bin', mine), 'mine', ['--no-cache']).version).toBe(1)
      await edge.stop(true)
      // Another node stores a file in the (S3) bucket; its objects are then put into the edge's R2.
      const serve = await startStore({ data: `s3://${S3.bucket}`, args: ['--s3-endpoint', s3.endpoint, '--cache', join(root, 'serve-cache')] })
      stops.push(() => serve.stop())
      const theirs = randomBytes(1 << 20)
      const f = file('fresh-theirs.bin', theirs)
      expect(nativePush(serve, f, 'theirs', ['--no-cache']).novel_bytes).toBe(theirs.length)
      const text = await (await fetch1(`${serve.url}/v1/ns/default/recipes/theirs`)).text()
      const ids = Buffer.concat(text.split('\n').filter((l) => /^[0-9a-f]{64} /.test(l)).map((l) => Buffer.from(l.slice(0, 64), 'hex')))
      expect(ids.length).toBeGreaterThan(32)
      await serve.stop()
      const keys = await s3ToR2(s3.bucketDir, edgeDir)
      expect(keys.some((k) => k.startsWith('ns/default/packs/'))).toBe(true)
      edge = await startEdge({ data: edgeDir })
      // Not a reindex (the index was built): 200 at once, and the query finds every chunk.
      const q = await fetch1(`${edge.url}/v1/ns/default/query`, { method: 'POST', body: ids })
      expect(q.status).toBe(200)
      expect(Buffer.from(await q.arrayBuffer()).length).toBe(0)
      const l = await (await fetch1(`${edge.url}/v1/ns/default/files`)).json()
      expect(l.files.map((v: any) => `${v.name}@${v.version}`)).toEqual(['mine@1', 'theirs@1'])
      const out = join(dir, 'fresh-out.bin')
      const p = cutpoint(['pull', 'theirs', '-o', out], edge)
      expect(p.status, p.stderr).toBe(0)
      expect(readFileSync(out).equals(theirs)).toBe(true)
      const again = nativePush(edge, f, 'theirs', ['--no-cache'])
      expect([again.version, again.novel_bytes, again.pack_bytes]).toEqual([2, 0, 0])
    } finally {
      await edge?.stop(true).catch(() => {})
      for (const s of stops.reverse()) await s().catch(() => {})
      process.env = env0
      rmSync(root, { recursive: true, force: true })
    }
  }, 300_000)
})

// A stalled commit (PROTOCOL.md §6): another node's gc ran between the commit's check and its
// recipe put (a test-only fault rewrites gc-epoch and deletes a pack the recipe names, as that gc
// would). The commit is withdrawn: 409 with the missing ids, no version listed, and its number
// is not given again (a tombstone).
describe('edge store: a commit that a gc on another node overtook', () => {
  it('is withdrawn (409), not listed, and its number not given again', async () => {
    const data = mkdtempSync(join(tmpdir(), 'cutpoint-edge-stalled-'))
    const bytes = randomBytes(300_000)
    const f = file('stalled.bin', bytes)
    let s: Store | undefined
    try {
      s = await startEdge({ data, fault: 'gc-during-commit' })
      const p = cutpoint(['push', f, '--name', 'st', '--json', '--no-cache', '--retries', '0'], s)
      expect(p.status).not.toBe(0)
      expect(p.stderr).toMatch(/lacks [0-9]+ chunks/)
      const l = await (await fetch1(`${s.url}/v1/ns/default/files`)).json()
      expect(l.files).toEqual([])
      await s.stop(true)
      s = await startEdge({ data })
      expect((await (await fetch1(`${s.url}/v1/ns/default/files`)).json()).files).toEqual([])
      // Each withdrawn try (the client re-sends the missing chunks and commits again, a few
      // times) kept its number: the next version is past them.
      const again = nativePush(s, f, 'st', ['--no-cache'])
      expect(again.version).toBeGreaterThan(1)
      const out = join(dir, 'stalled-out.bin')
      expect(cutpoint(['pull', 'st', '-o', out], s).status).toBe(0)
      expect(readFileSync(out).equals(bytes)).toBe(true)
    } finally {
      await s?.stop(true)
      rmSync(data, { recursive: true, force: true })
    }
  }, 120_000)
})

// `POST parts/query` is answered from the namespace's Durable Object (its table of part ids),
// not by one R2 HEAD per id (PROTOCOL.md 4.12; the Worker counts its R2 calls for tests with
// --test-count-r2): a full query of present ids costs no R2 operation; misses cost at most 64
// HEADs; the table is rebuilt with the index from the bucket, follows gc, and learns of a part
// another node put into the bucket.
describe('edge store: parts/query from the namespace\'s Durable Object', () => {
  it('costs no R2 read for present ids and a bounded number for misses; rebuilt from the bucket; follows gc', async () => {
    const data = mkdtempSync(join(tmpdir(), 'cutpoint-edge-partsq-'))
    const args = ['--test-count-r2', '--max-recipe', '16k', '--gc-settle', '0']
    let s: Store | undefined
    const ops = async () => (await (await fetch1(`${s!.url}/v1/test/r2-ops`, { method: 'POST' })).json()) as Record<string, number>
    const query = async (body: Buffer) => {
      await ops() // reset
      const r = await fetch1(`${s!.url}/v1/ns/default/parts/query`, { method: 'POST', body })
      expect(r.status).toBe(200)
      return { missing: Buffer.from(await r.arrayBuffer()), ops: await ops() }
    }
    try {
      s = await startEdge({ data, args })
      const bytes = randomBytes(3 << 20)
      expect(nativePush(s, file('partsq.bin', bytes), 'pq', ['--no-cache']).version).toBe(1)
      const lines = (await (await fetch1(`${s.url}/v1/ns/default/recipes/pq?parts=1`)).text()).split('\n').filter((l) => l.startsWith('part '))
      expect(lines.length).toBeGreaterThanOrEqual(3)
      const ids = lines.map((l) => Buffer.from(l.split(' ')[1], 'hex'))
      const text0 = Buffer.from(await (await fetch1(`${s.url}/v1/ns/default/parts/${ids[0].toString('hex')}`)).arrayBuffer())
      // 16,384 present ids (the limit): answered from the table, no R2 call at all.
      const full = Buffer.concat(Array.from({ length: 16384 }, (_, k) => ids[k % ids.length]))
      const present = await query(full)
      expect(present.missing.length).toBe(0)
      expect(present.ops).toEqual({})
      // 1,000 unknown ids: every one answered missing, at most 64 of them looked for in R2.
      const unknown = randomBytes(1000 * 32)
      const miss = await query(Buffer.concat([ids[1], unknown]))
      expect(miss.missing.equals(unknown)).toBe(true)
      expect(miss.ops.head ?? 0).toBeGreaterThan(0)
      expect(miss.ops.head).toBeLessThanOrEqual(64)
      expect((miss.ops.get ?? 0) + (miss.ops.list ?? 0)).toBe(0)
      // The Durable Objects lost: the index, and the part ids with it, rebuilt from the bucket.
      await s.stop(true)
      rmSync(join(data, 'do'), { recursive: true, force: true })
      s = await startEdge({ data, args })
      let rebuilt: Response
      for (let t = 0; ; t++) {
        rebuilt = await fetch1(`${s.url}/v1/ns/default/parts/query`, { method: 'POST', body: Buffer.concat(ids) })
        if (rebuilt.status !== 503 || t > 20) break
        await new Promise((r) => setTimeout(r, 500))
      }
      expect(rebuilt.status).toBe(200)
      expect((await rebuilt.arrayBuffer()).byteLength).toBe(0)
      expect((await query(Buffer.concat(ids))).ops).toEqual({})
      // gc deletes the parts no version names: they are answered missing at once.
      expect((await fetch1(`${s.url}/v1/ns/default/files/pq`, { method: 'DELETE' })).status).toBe(200)
      const gc = await (await fetch1(`${s.url}/v1/ns/default/gc?grace=0`, { method: 'POST' })).json()
      // Every part is unnamed now: deleted, or (written in a second the gc's clock has not passed
      // yet: R2's times and the Worker's clock are read apart) kept in its grace and gone by
      // the next gc a second later. One named by no recipe is never kept past that.
      expect(gc.parts_deleted + gc.parts_in_grace).toBe(ids.length)
      if (gc.parts_in_grace > 0) {
        await new Promise((r) => setTimeout(r, 1100))
        const again = await (await fetch1(`${s.url}/v1/ns/default/gc?grace=0`, { method: 'POST' })).json()
        expect(again).toMatchObject({ parts_deleted: gc.parts_in_grace, parts_in_grace: 0 })
      }
      const gone = await query(Buffer.concat(ids))
      expect(gone.missing.equals(Buffer.concat(ids))).toBe(true)
      // A part another node put into the bucket since: a miss found there, and known from then on.
      await s.stop(true)
      const { bucket, dispose } = await openBucket(data)
      try {
        const id = ids[0].toString('hex')
        await bucket.put(`ns/default/parts/${id.slice(0, 2)}/${id}`, new Uint8Array(text0))
      } finally {
        await dispose()
      }
      s = await startEdge({ data, args })
      const found = await query(Buffer.concat(ids))
      expect(found.missing.equals(Buffer.concat(ids.slice(1)))).toBe(true)
      expect(found.ops.head).toBe(ids.length)
      const known = await query(ids[0])
      expect([known.missing.length, known.ops.head ?? 0]).toEqual([0, 0])
    } finally {
      await s?.stop(true)
      rmSync(data, { recursive: true, force: true })
    }
  }, 180_000)
})

/** The objects under `prefixes` of one stopped edge's R2 put into another's, key for key. */
async function r2ToR2(fromDir: string, toDir: string, prefixes: string[]): Promise<string[]> {
  const objects: [string, Uint8Array][] = []
  const from = await openBucket(fromDir)
  try {
    for (const prefix of prefixes) {
      const l = await from.bucket.list({ prefix })
      for (const o of l.objects) objects.push([o.key, new Uint8Array(await (await from.bucket.get(o.key)).arrayBuffer())])
    }
  } finally {
    await from.dispose()
  }
  const to = await openBucket(toDir)
  try {
    for (const [k, v] of objects) await to.bucket.put(k, v)
  } finally {
    await to.dispose()
  }
  return objects.map(([k]) => k)
}

// GET check refreshes from the bucket first (PROTOCOL.md §6, 4.10): a pack and a recipe another
// node stored after the edge built its namespace's index are checked (verified, counted, the
// version's chunks found), and a stored pack that does not verify is named, with nothing else
// asked of the edge before the check.
describe('edge store: check sees what another node of its bucket stored', () => {
  it('counts and verifies the other node\'s pack and version, and names a stored pack that does not verify', async () => {
    const root = mkdtempSync(join(tmpdir(), 'cutpoint-edge-check-'))
    const [mineDir, theirDir] = [join(root, 'mine'), join(root, 'theirs')]
    let s: Store | undefined
    try {
      s = await startEdge({ data: mineDir })
      expect(nativePush(s, file('check-mine.bin', randomBytes(400_000)), 'mine', ['--no-cache']).version).toBe(1)
      await s.stop(true)
      s = await startEdge({ data: theirDir })
      const theirs = randomBytes(500_000)
      expect(nativePush(s, file('check-theirs.bin', theirs), 'theirs', ['--no-cache']).version).toBe(1)
      await s.stop(true)
      const copied = await r2ToR2(theirDir, mineDir, ['ns/default/packs/', 'ns/default/recipes/'])
      const theirPacks = copied.filter((k) => k.startsWith('ns/default/packs/')).length
      expect(theirPacks).toBeGreaterThan(0)
      const junk = 'ee'.repeat(32)
      const { bucket, dispose } = await openBucket(mineDir)
      let minePacks = 0
      try {
        minePacks = (await bucket.list({ prefix: 'ns/default/packs/' })).objects.length - theirPacks
        await bucket.put(`ns/default/packs/ee/${junk}`, new Uint8Array(randomBytes(1000)))
      } finally {
        await dispose()
      }
      s = await startEdge({ data: mineDir })
      const rep = await (await fetch1(`${s.url}/v1/ns/default/check`)).json()
      expect(rep).toMatchObject({ packs: minePacks + theirPacks, versions: 2 })
      expect(rep.problems).toEqual([`pack ${junk} is stored but does not verify (not indexed)`])
      const out = join(dir, 'check-theirs-out.bin')
      expect(cutpoint(['pull', 'theirs', '-o', out], s).status).toBe(0)
      expect(readFileSync(out).equals(theirs)).toBe(true)
    } finally {
      await s?.stop(true)
      rmSync(root, { recursive: true, force: true })
    }
  }, 180_000)
})

// The gc lock is a lease (PROTOCOL.md §6): a gc running longer than the lease (here a settle of
// 8 s against a lease of 3 s, `--gc-settle`/`--gc-lease` of edge/dev.mjs) rewrites its lock every
// third of the lease, so that other nodes never take it for a dead node's. The runtime is
// SIGKILLed in the middle of such a gc: the lock it left was rewritten more than a lease after
// the gc began; the next gc, past the lease, takes it over and removes it.
describe('edge store: a gc longer than its lease', () => {
  it('renews its lock while it runs; a lock left by a killed gc is taken over past the lease', async () => {
    const data = mkdtempSync(join(tmpdir(), 'cutpoint-edge-lease-'))
    let s: Store | undefined
    const lock = async () => {
      const { bucket, dispose } = await openBucket(data)
      try {
        const o = await bucket.get('ns/default/gc-lock')
        return o && { uploaded: o.uploaded.getTime(), text: await o.text() }
      } finally {
        await dispose()
      }
    }
    try {
      s = await startEdge({ data, args: ['--gc-lease', '3', '--gc-settle', '8'] })
      expect(nativePush(s, file('lease.bin', randomBytes(200_000)), 'l', ['--no-cache']).version).toBe(1)
      const began = Date.now()
      const gc = fetch1(`${s.url}/v1/ns/default/gc?grace=0`, { method: 'POST' }).catch(() => null)
      await new Promise((r) => setTimeout(r, 6500))
      await s.stop(true) // in the settle: the lock is neither deleted nor renewed again
      expect(await gc).toBeNull()
      const left = await lock()
      expect(left).not.toBeNull()
      expect(left!.text).toMatch(/^gc running, renewed at \d+/)
      expect(left!.uploaded - began).toBeGreaterThan(3000)
      // Past the lease: a gc takes the lock over (a dead node's), runs, and removes it.
      await new Promise((r) => setTimeout(r, Math.max(0, left!.uploaded + 3500 - Date.now())))
      s = await startEdge({ data, args: ['--gc-lease', '3', '--gc-settle', '0'] })
      const again = await fetch1(`${s.url}/v1/ns/default/gc?grace=0`, { method: 'POST' })
      expect(again.status, await again.clone().text()).toBe(200)
      await s.stop(true)
      expect(await lock()).toBeNull()
    } finally {
      await s?.stop(true)
      rmSync(data, { recursive: true, force: true })
    }
  }, 120_000)
})

// An upload none of whose chunks is new (PROTOCOL.md §6, "Duplicates from races"): the edge,
// a node of a bucket others may share, leaves the pack in place (another node may be indexing
// the same pack) for gc, as `cutpoint serve --data s3://` does: it is answered by its id with
// nothing stored, counted by check, and deleted by a gc past its grace.
describe('edge store: a pack whose chunks were all there', () => {
  it('is left in place for gc, not deleted at once', async () => {
    let s: Store | undefined
    try {
      s = await startEdge()
      const u = (p: string) => `${s!.url}/v1/ns/dup/${p}`
      const [a, b] = [randomBytes(5000), randomBytes(7000)]
      const first = await chunkPack([a, b])
      const r1 = await (await fetch1(u('packs'), { method: 'POST', body: first.body })).json()
      expect(r1).toMatchObject({ chunks: 2, stored: 2, duplicates: 0 })
      const again = await chunkPack([b, a]) // the same chunks in another order: another pack
      const r2 = await (await fetch1(u('packs'), { method: 'POST', body: again.body })).json()
      expect(r2).toMatchObject({ chunks: 2, stored: 0, duplicates: 2, stored_bytes: 0 })
      expect(r2.pack).toMatch(/^[0-9a-f]{64}$/)
      expect(r2.pack).not.toBe(r1.pack)
      expect(await (await fetch1(u('check'))).json()).toMatchObject({ packs: 2, chunks: 2, problems: [] })
      // Within the grace both stay; past it (no recipe names them) both go.
      expect(await (await fetch1(u('gc'), { method: 'POST' })).json()).toMatchObject({ packs_deleted: 0, packs_in_grace: 2 })
      const gc = await (await fetch1(u('gc?grace=0'), { method: 'POST' })).json()
      expect(gc).toMatchObject({ packs_deleted: 2, bytes_freed: first.body.length + again.body.length })
      expect(await (await fetch1(u('check'))).json()).toMatchObject({ packs: 0, chunks: 0, problems: [] })
    } finally {
      await s?.stop()
    }
  }, 120_000)
})

describe('edge store: a pack with a group of chunks (codec 2, zstd-group)', () => {
  // The edge store does not index, restore or rewrite groups yet, and does not list
  // `zstd-group`: such a pack is refused whole (400), not indexed as if each member were its
  // group's whole frame (which would be stored and then fail every restore).
  it('is refused (400) and nothing of it is stored; codec 1 frames are taken', async () => {
    let s: Store | undefined
    try {
      s = await startEdge()
      const v = await (await fetch1(`${s.url}/v1`)).json()
      expect(v.features).not.toContain('zstd-group')
      const u = (p: string) => `${s!.url}/v1/ns/grp/${p}`
      // One compressible chunk (under the profile's minimum: the whole input) pushed by the
      // library with compression: its one compressed frame's data is the raw length and one
      // zstd frame, which is also a group's data for the same bytes cut in two.
      const whole = Buffer.from('group frames at the edge '.repeat(60))
      let body: Buffer | undefined
      const grab: typeof fetch = async (url, init) => {
        if (String(url).endsWith('/packs')) body = Buffer.from(init!.body as Uint8Array)
        return fetch(url, init)
      }
      const c = cp.createClient({ store: s.url, namespace: 'one', compression: 'auto', fetch: grab })
      try {
        await c.push(whole, { name: 'w' })
      } finally {
        await c.close()
      }
      expect(body![10]).toBe(1) // codec 1
      const head = body!.readUInt32LE(16)
      expect(head & 0x80000000).not.toBe(0)
      const data = body!.subarray(52, 52 + (head & 0x7fffffff))
      expect(data.readUInt32LE(0)).toBe(whole.length)
      // The group: the first 700 bytes (its frame's id), then a member head for the rest.
      const [a, b] = [whole.subarray(0, 700), whole.subarray(700)]
      const [ida, idb] = [Buffer.from(await blake3(a), 'hex'), Buffer.from(await blake3(b), 'hex')]
      const header = Buffer.from(body!.subarray(0, 16))
      header[10] = 2
      const first = Buffer.alloc(36)
      first.writeUInt32LE(head >>> 0, 0)
      ida.copy(first, 4)
      const member = Buffer.alloc(36)
      member.writeUInt32LE((b.length | 0x40000000) >>> 0, 0)
      idb.copy(member, 4)
      const end = Buffer.alloc(36)
      end.writeBigUInt64LE(2n, 4)
      const r = await fetch1(u('packs'), { method: 'POST', body: Buffer.concat([header, first, data, member, end]) })
      const j = await r.json()
      expect(r.status, JSON.stringify(j)).toBe(400)
      expect(j.error).toMatch(/group of chunks.*zstd-group/)
      const q = await fetch1(u('query'), { method: 'POST', body: Buffer.concat([ida, idb]) })
      expect(Buffer.from(await q.arrayBuffer()).equals(Buffer.concat([ida, idb]))).toBe(true)
      expect(await (await fetch1(u('check'))).json()).toMatchObject({ packs: 0, chunks: 0, problems: [] })
      // The same bytes as a codec 1 pack (the library's): taken.
      const ok = await fetch1(u('packs'), { method: 'POST', body: body! })
      expect(ok.status).toBe(200)
    } finally {
      await s?.stop()
    }
  }, 120_000)
})

// Part deltas (PROTOCOL.md 3.8, feature `part-delta`): the same checks and answers from
// `cutpoint serve` and the edge store.
const partDeltaTargets: [string, typeof startStore][] = [['cutpoint serve', startStore], ['edge store (workerd)', startEdge]]
describe.each(partDeltaTargets)('%s', (_label, start) => {
  let small: Store
  const ns = (s: Store, n: string) => `${s.url}/v1/ns/${n}`
  beforeAll(async () => {
    small = await start({ args: ['--max-recipe', '16k'] })
  })
  afterAll(async () => {
    await small?.stop()
    if (small) rmSync(small.data, { recursive: true, force: true })
  })

  it('part deltas (feature part-delta): a part sent as runs of a stored part is stored as that part; bad deltas refused, nothing stored', async () => {
    const v = await (await fetch1(`${small.url}/v1`)).json()
    expect(v.features).toContain('part-delta')
    const u = (p: string) => `${ns(small, 'pdelta')}/${p}`
    const data = randomBytes(3 << 20)
    const f = file('pdelta.bin', data)
    expect(nativePush(small, f, 'base', ['--ns', 'pdelta', '--no-cache']).version).toBe(1)
    const ids = (await (await fetch1(u('recipes/base?parts=1'))).text()).split('\n').filter((l) => l.startsWith('part ')).map((l) => l.split(' ')[1])
    expect(ids.length).toBeGreaterThanOrEqual(2)
    const chunkLines = async (id: string) => (await (await fetch1(u(`parts/${id}`))).text()).split('\n').filter((l) => /^[0-9a-f]{64} /.test(l))
    const [e0, e1] = [await chunkLines(ids[0]), await chunkLines(ids[1])]
    // Part 0 without its first entry, then part 1's first entry: one run and one chunk line.
    const want = [...e0.slice(1), e1[0]]
    const bytes = want.reduce((n, l) => n + Number(l.split(' ')[1]), 0)
    const text = `cutpoint-part 1\nhash blake3\n${want.join('\n')}\nend ${want.length} ${bytes}\n`
    const delta = (base: string, ops: string[], end = `end ${want.length} ${bytes}`) =>
      `cutpoint-part-delta 1\nhash blake3\nbase ${base}\n${ops.join('\n')}\n${end}\n`
    const good = delta(ids[0], [`= 1 ${e0.length - 1}`, e1[0]])
    expect(good.length * 10).toBeLessThan(text.length)
    const r = await fetch1(u('parts'), { method: 'POST', body: good })
    expect(r.status, await r.clone().text()).toBe(200)
    const id = await blake3(text)
    expect(await r.json()).toEqual({ part: id, chunks: want.length, bytes })
    expect(await (await fetch1(u(`parts/${id}`))).text()).toBe(text)
    // Refused, each with the store's answer, nothing stored.
    const refused = async (body: string, status: number, code: string) => {
      const a = await fetch1(u('parts'), { method: 'POST', body })
      expect(a.status, await a.clone().text()).toBe(status)
      const j = await a.json()
      expect(j.code).toBe(code)
      expect(j.error).not.toMatch(/\/tmp|\/work|\/home/)
      return j
    }
    const unknown = randomBytes(32).toString('hex')
    expect((await refused(delta(unknown, [`= 1 ${e0.length - 1}`, e1[0]]), 409, 'missing_parts')).missing_parts).toEqual([unknown])
    await refused(delta(ids[0], [`= 1 ${e0.length}`, e1[0]]), 400, 'bad_request') // a run past the base's end
    await refused(delta(ids[0], [`= 1 ${e0.length - 1}`, e1[0]], `end ${want.length + 1} ${bytes}`), 400, 'bad_request') // a lying end
    await refused(delta(ids[0], ['= 0 0']), 400, 'bad_request')
    // Another algorithm than the namespace's: 400 before its base is looked for.
    expect((await refused(delta(unknown, [`= 1 ${e0.length - 1}`]).replace('hash blake3', 'hash sha256'), 400, 'bad_request')).error).toMatch(/sha256/)
    await refused(`cutpoint-part-delta 1\nhash blake3\nbase XYZ\n= 0 1\nend 1 1\n`, 400, 'bad_request')
    // Expanded past max_recipe_bytes (16 KiB here): 413 before it is built.
    const b0 = e0.reduce((n, l) => n + Number(l.split(' ')[1]), 0)
    const runs = Array.from({ length: 8 }, () => `= 0 ${e0.length}`)
    await refused(delta(ids[0], runs, `end ${e0.length * 8} ${b0 * 8}`), 413, 'too_large')
    // A chunk line the namespace lacks: 409 missing_chunks, as a part; the part is not stored.
    const ghost = `${randomBytes(32).toString('hex')} 1000 - r`
    expect((await refused(delta(ids[0], [`= 1 ${e0.length - 1}`, ghost], `end ${want.length} ${bytes - Number(e1[0].split(' ')[1]) + 1000}`), 409, 'missing_chunks')).missing)
      .toEqual([ghost.slice(0, 64)])
    const ghostText = `cutpoint-part 1\nhash blake3\n${[...e0.slice(1), ghost].join('\n')}\nend ${want.length} ${bytes - Number(e1[0].split(' ')[1]) + 1000}\n`
    const q = await fetch1(u('parts/query'), { method: 'POST', body: Buffer.from(await blake3(ghostText), 'hex') })
    expect((await q.arrayBuffer()).byteLength).toBe(32)
    if (_label.startsWith('edge')) {
      // A base part over max_recipe_bytes (another node's, stored under a larger limit): 413, not read.
      await small.stop(true)
      const big = 'ab'.repeat(32)
      const { bucket, dispose } = await openBucket(small.data)
      try {
        await bucket.put(`ns/pdelta/parts/ab/${big}`, new Uint8Array(17 << 10))
      } finally {
        await dispose()
      }
      small = await start({ data: small.data, args: ['--max-recipe', '16k'] })
      expect((await refused(delta(big, ['= 0 1'], 'end 1 1'), 413, 'too_large')).error).toMatch(/base part is larger/)
    }
  }, 180_000)

  // The library's pushes (web/src/client/push.ts): a re-push of a file committed in parts reads
  // the base's parts in a window (checked against their ids), does not query the ids found
  // there, and sends each changed part as a part delta.
  it('the library re-pushes a file in parts sending about its novel bytes: base parts read, their ids not queried, part deltas', async () => {
    // Every request body's bytes, by request (path after the namespace).
    const sent = new Map<string, number>()
    const logFetch: typeof fetch = async (url, init) => {
      const what = `${init?.method ?? 'GET'} ${new URL(String(url)).pathname.replace(/^\/v1\/ns\/[^/]+\//, '')}`.replace(/^(GET parts)\/.*/, '$1')
      const b = init?.body
      const n = b instanceof Uint8Array ? b.length : typeof b === 'string' ? Buffer.byteLength(b) : b instanceof Blob ? b.size : 0
      sent.set(what, (sent.get(what) ?? 0) + n)
      return fetch(url, init)
    }
    const c = cp.createClient({ store: small.url, namespace: 'librepush', compression: 'off', fetch: logFetch })
    try {
      // 24 MiB: ~3,000 chunks in ~15 parts under a 16 KiB max_recipe_bytes.
      const v1 = randomBytes(24 << 20)
      const r1 = await c.push(v1, { name: 'f' })
      expect(r1.parts).toBeGreaterThan(8)
      // 12 edits of 64 bytes, 2 MiB apart: most parts change.
      const v2 = Buffer.from(v1)
      for (let k = 0; k < 12; k++) randomBytes(64).copy(v2, k * (2 << 20) + 12345)
      sent.clear()
      const r2 = await c.push(v2, { name: 'f' })
      expect(r2.version).toBe(2)
      // Sent ≈ novel: the novel chunks and their frame heads, a few hundred bytes of queries,
      // deltas and the recipe of part lines on top (whole parts and every id queried: ~2.5x).
      expect(r2.sentBytes).toBeLessThan(1.2 * r2.novelBytes)
      expect(r2.partsSent).toBeGreaterThanOrEqual(8)
      expect(r1.partsDelta).toBe(0)
      expect(r2.partsDelta).toBe(r2.partsSent)
      expect(r2.basePartBytes).toBeGreaterThan(0)
      expect(r2.knownFromBase).toBeGreaterThan(r2.chunks - 4 * r2.novelChunks)
      // The ids in the base's parts are not asked about: only those of the changed chunks.
      expect(sent.get('POST query') ?? 0).toBeLessThanOrEqual(32 * 4 * r2.novelChunks)
      // Whole parts would be ~16 KB each; their deltas are a few lines.
      expect(sent.get('POST parts') ?? 0).toBeLessThan(r2.partsSent * 2000)
      expect([...sent.values()].reduce((a, b) => a + b, 0)).toBe(r2.sentBytes)
      expect((await bytesOf(await c.pull('f'))).equals(v2)).toBe(true)
      expect((await bytesOf(await c.pull('f', { version: 1 }))).equals(v1)).toBe(true)
      // The same bytes again: nothing novel, no part sent.
      const r3 = await c.push(v2, { name: 'f' })
      expect(r3.novelChunks).toBe(0)
      expect(r3.partsSent).toBe(0)
    } finally {
      await c.close()
    }
  }, 180_000)

  it('the library falls back to whole parts: a delta refused (4xx) is sent as its part; a base part that does not match its id is not used', async () => {
    const v1 = randomBytes(8 << 20)
    // Each name's own edits (so that neither finds the other's new parts present).
    const edited = () => {
      const v = Buffer.from(v1)
      for (let k = 0; k < 4; k++) randomBytes(64).copy(v, k * (2 << 20) + 999)
      return v
    }
    const plain = cp.createClient({ store: small.url, namespace: 'libfall', compression: 'off' })
    expect((await plain.push(v1, { name: 'a' })).parts).toBeGreaterThan(2)
    expect((await plain.push(v1, { name: 'b' })).parts).toBeGreaterThan(2)
    // Every part delta answered 400 (as a store would a delta it cannot expand).
    let refusedDeltas = 0
    const refuse: typeof fetch = async (url, init) => {
      if (init?.method === 'POST' && String(url).endsWith('/parts') && Buffer.from(init.body as Uint8Array).subarray(0, 20).toString() === 'cutpoint-part-delta ') {
        refusedDeltas++
        return new Response(JSON.stringify({ error: 'refused by the test', code: 'bad_request' }), { status: 400, headers: { 'content-type': 'application/json' } })
      }
      return fetch(url, init)
    }
    // Every base part read back with one byte changed (it no longer hashes to its id).
    let damaged = 0
    const damage: typeof fetch = async (url, init) => {
      const res = await fetch(url, init)
      if ((init?.method ?? 'GET') !== 'GET' || !/\/parts\/[0-9a-f]{64}$/.test(String(url)) || res.status !== 200) return res
      const b = Buffer.from(await res.arrayBuffer())
      b[b.length - 2] ^= 1
      damaged++
      return new Response(b, { status: 200 })
    }
    for (const [name, f] of [['a', refuse], ['b', damage]] as const) {
      const c = cp.createClient({ store: small.url, namespace: 'libfall', compression: 'off', fetch: f })
      const v2 = edited()
      try {
        const r = await c.push(v2, { name })
        expect(r.version).toBe(2)
        expect(r.partsSent).toBeGreaterThanOrEqual(2)
        expect(r.partsDelta).toBe(0)
        if (name === 'b') {
          expect(r.basePartBytes).toBe(0)
          expect(r.knownFromBase).toBe(0)
        }
      } finally {
        await c.close()
      }
      expect((await bytesOf(await plain.pull(name))).equals(v2)).toBe(true)
    }
    await plain.close()
    expect(refusedDeltas).toBeGreaterThanOrEqual(2)
    expect(damaged).toBeGreaterThan(2)
  }, 180_000)
})
