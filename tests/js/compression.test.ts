// Compression in the library (issue #28, PROTOCOL.md 3.1) in Node against a real `cutpoint
// serve`: `createClient({ compression })` compresses novel chunks in its workers under the
// core's rule and sampler, so it sends what `cutpoint push --compression` sends (the same
// frames, byte for byte); pulls are byte-identical and the store's `check` is clean; the
// native CLI and the library restore each other's compressed versions; incompressible data
// sends no compressed frame; an older store (no `zstd` listed) gets codec 0; options checked;
// cutpoint-js `--compression`.
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { spawnSync } from 'node:child_process'
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { randomBytes } from 'node:crypto'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import * as cp from '@cutpoint/web'
import { root } from './helpers'
import { cutpoint, haveCutpoint, nativePush, startStore, type Store } from './store'
import { textData } from './text-data'

const dir = mkdtempSync(join(tmpdir(), 'cutpoint-compression-'))
let store: Store
let ref: Store // the native CLI's pushes, in the same state as `store`

const file = (name: string, data: Uint8Array) => {
  const f = join(dir, name)
  writeFileSync(f, data)
  return f
}

async function bytesOf(s: ReadableStream<Uint8Array>): Promise<Buffer> {
  const parts: Uint8Array[] = []
  for await (const p of s as any) parts.push(p)
  return Buffer.concat(parts)
}

function check(s: Store, ns: string) {
  const r = cutpoint(['check', '--ns', ns, '--json'], s)
  expect(r.status, r.stderr + r.stdout).toBe(0)
}

/** The fields a library push and `cutpoint push --json` must agree on. */
const wireOf = (r: Record<string, any>) => ({
  novel_chunks: r.novel_chunks ?? r.novelChunks,
  novel_bytes: r.novel_bytes ?? r.novelBytes,
  compressed_bytes: r.compressed_bytes ?? r.compressedBytes,
  compressed_chunks: r.compressed_chunks ?? r.compressedChunks,
  sent_bytes: r.sent_bytes ?? r.sentBytes,
  pack_bytes: r.pack_bytes ?? r.packBytes,
  packs: r.packs,
  digest: r.digest,
})

beforeAll(async () => {
  if (!haveCutpoint()) throw new Error('build native/target/release/cutpoint first (cargo build --release -p cutpoint-cli)')
  await cp.init()
  // Codec 1 both sides: the library sends one frame per chunk (groups are native only this
  // revision), and these tests compare its frames with the native push's.
  store = await startStore({ args: ['--groups', 'off'] })
  ref = await startStore({ args: ['--groups', 'off'] })
})

afterAll(async () => {
  await store?.stop()
  await ref?.stop()
  rmSync(dir, { recursive: true, force: true })
})

describe('library compression', () => {
  it('compressible data: auto sends far fewer bytes than off, the same frames as the native push; pulled back identical; check clean', async () => {
    const data = textData(6 << 20, 11)
    const path = file('text.txt', data)
    const off = cp.createClient({ store: store.url, namespace: 'c-off', compression: 'off', workers: 2 })
    const auto = cp.createClient({ store: store.url, namespace: 'c-auto', workers: 2 })
    try {
      const a = await off.push(data, { name: 't' })
      expect(a.compressedChunks).toBe(0)
      expect(a.compressedBytes).toBe(a.novelBytes)
      // A Uint8Array input and a path (both framed packs).
      for (const input of [data, path] as const) {
        const ns = typeof input === 'string' ? 'c-auto-path' : 'c-auto'
        const c = typeof input === 'string' ? cp.createClient({ store: store.url, namespace: ns, workers: 2 }) : auto
        const b = await c.push(input, { name: 't' })
        expect(b.novelBytes).toBe(a.novelBytes)
        expect(b.compressedChunks).toBeGreaterThan(0.9 * b.novelChunks)
        expect(b.compressedBytes).toBeLessThan(0.5 * b.novelBytes)
        expect(b.sentBytes).toBeLessThan(0.5 * a.sentBytes)
        expect((await bytesOf(await c.pull('t'))).equals(data)).toBe(true)
        // The native push sends the same frames: same rule, same zstd, same groups.
        expect(wireOf(b)).toEqual(wireOf(nativePush(ref, path, 't', ['--ns', ns])))
        if (c !== auto) await c.close()
        check(store, ns)
      }
      check(store, 'c-off')
    } finally {
      await off.close()
      await auto.close()
    }
  })

  it('incompressible data sends no compressed frame; mixed data follows the native sampler frame for frame', async () => {
    const rnd = randomBytes(3 << 20)
    const c = cp.createClient({ store: store.url, namespace: 'c-rnd', workers: 2 })
    const off = cp.createClient({ store: store.url, namespace: 'c-rnd-off', compression: 'off', workers: 2 })
    try {
      const r = await c.push(rnd, { name: 'r' })
      expect(r.compressedChunks).toBe(0)
      expect(r.compressedBytes).toBe(r.novelBytes)
      const o = await off.push(rnd, { name: 'r' })
      expect(r.sentBytes).toBe(o.sentBytes)
      // Random, then text, then random, then text: the sampler's groups after random ones try a
      // sample first, and find the text again.
      const mixed = Buffer.concat([randomBytes(3 << 20), textData(3 << 20, 5), randomBytes(4 << 20), textData(2 << 20, 9)])
      const m = await c.push(mixed, { name: 'm' })
      expect(m.compressedChunks).toBeGreaterThan(0)
      expect(wireOf(m)).toEqual(wireOf(nativePush(ref, file('mixed.bin', mixed), 'm', ['--ns', 'c-rnd'])))
      expect((await bytesOf(await c.pull('m'))).equals(mixed)).toBe(true)
      check(store, 'c-rnd')
    } finally {
      await c.close()
      await off.close()
    }
  })

  it('max compresses at least as well as auto; workers: 0 compresses in this thread', async () => {
    const data = textData(1 << 20, 21)
    const max = cp.createClient({ store: store.url, namespace: 'c-max', compression: 'max', workers: 2 })
    const zero = cp.createClient({ store: store.url, namespace: 'c-zero', workers: 0 })
    try {
      const m = await max.push(data, { name: 'x' })
      const z = await zero.push(data, { name: 'x' })
      expect(z.compressedChunks).toBeGreaterThan(0)
      expect(m.compressedBytes).toBeLessThanOrEqual(z.compressedBytes)
      expect((await bytesOf(await zero.pull('x'))).equals(data)).toBe(true)
      expect((await bytesOf(await max.pull('x'))).equals(data)).toBe(true)
      check(store, 'c-max')
    } finally {
      await max.close()
      await zero.close()
    }
  })

  it("two pushes at once on one client, and RapidCDC, compress too (the client's compression workers); Node exits after a push without close()", async () => {
    const c = cp.createClient({ store: store.url, namespace: 'c-two', workers: 2 })
    const da = textData(2 << 20, 61)
    const db = textData(2 << 20, 62)
    const dr = Buffer.concat([da.subarray(0, 1 << 20), textData(1 << 20, 63)])
    try {
      // The second push finds the client's kept pool busy: it chunks with workers of its own.
      const [a, b] = await Promise.all([c.push(da, { name: 'a' }), c.push(db, { name: 'b' })])
      expect(a.compressedChunks).toBeGreaterThan(0)
      expect(b.compressedChunks).toBeGreaterThan(0)
      const r = await c.push(dr, { name: 'a', rapid: 'ff+rwt' })
      expect(r.novelChunks).toBeGreaterThan(0)
      expect(r.compressedChunks).toBeGreaterThan(0)
      for (const [n, d] of [['a', dr], ['b', db]] as const) expect((await bytesOf(await c.pull(n))).equals(d)).toBe(true)
      check(store, 'c-two')
    } finally {
      await c.close()
    }
    // The workers a push leased do not keep Node running once it is done.
    const script = `import * as cp from ${JSON.stringify(`${root}web/dist/web/src/index.js`)}
      const c = cp.createClient({ store: ${JSON.stringify(store.url)}, namespace: 'c-exit', workers: 2 })
      const r = await c.push(new TextEncoder().encode('x'.repeat(1 << 20) + Math.random()), { name: 'e' })
      console.log(r.compressedChunks)`
    const run = spawnSync(process.execPath, [file('exit.mjs', Buffer.from(script))], { encoding: 'utf8', timeout: 60_000 })
    expect(run.status, run.stderr).toBe(0)
    expect(Number(run.stdout.trim())).toBeGreaterThan(0)
  })

  it('pushMany compresses too: per-file and total compressed bytes, fewer bytes sent than off; cutpoint-js FILE... --compression', async () => {
    const inputs = [0, 1, 2].map((i) => ({ name: `m${i}.txt`, input: textData((1 << 20) + i * 4096, 81 + i) as Uint8Array }))
    const auto = cp.createClient({ store: store.url, namespace: 'c-many', workers: 2 })
    const off = cp.createClient({ store: store.url, namespace: 'c-many-off', workers: 2, compression: 'off' })
    try {
      const a = await auto.pushMany(inputs)
      const o = await off.pushMany(inputs)
      expect(a.committed).toBe(3)
      expect(a.compressedChunks).toBeGreaterThan(0)
      expect(a.compressedBytes).toBeLessThan(0.5 * a.novelBytes)
      expect(a.sentBytes).toBeLessThan(0.5 * o.sentBytes)
      expect(o.compressedChunks).toBe(0)
      expect(o.compressedBytes).toBe(o.novelBytes)
      const rs = a.results as cp.PushResult[]
      expect(rs.reduce((x, r) => x + r.compressedBytes, 0)).toBe(a.compressedBytes)
      expect(rs.reduce((x, r) => x + r.compressedChunks, 0)).toBe(a.compressedChunks)
      for (const r of rs) expect(r.packBytes).toBe(r.compressedBytes + 36 * r.novelChunks)
      for (const { name, input } of inputs) expect((await bytesOf(await auto.pull(name))).equals(input)).toBe(true)
      check(store, 'c-many')
    } finally {
      await auto.close()
      await off.close()
    }
    const main = `${root}web/dist/web/src/cli/main.js`
    const paths = inputs.map(({ name, input }) => file(name, input))
    const js = (ns: string, extra: string[]) => spawnSync(process.execPath, [main, 'push', ...paths, '--store', store.url, '--ns', ns, '--json', ...extra], { encoding: 'utf8', env: { ...process.env, CUTPOINT_TOKEN: '' } })
    const ja = js('c-many-cli', [])
    expect(ja.status, ja.stderr).toBe(0)
    const jo = js('c-many-cli-off', ['--compression', 'off'])
    expect(jo.status, jo.stderr).toBe(0)
    const rows = (out: string) => out.trim().split('\n').map((l) => JSON.parse(l))
    for (const r of rows(ja.stdout)) expect(r.compressed_chunks).toBeGreaterThan(0)
    for (const r of rows(jo.stdout)) expect([r.compressed_chunks, r.compressed_bytes]).toEqual([0, r.novel_bytes])
  })

  it('the native client and the library restore what the other pushed compressed', async () => {
    const data = textData(2 << 20, 31)
    const path = file('inter.txt', data)
    const n = nativePush(store, path, 'from-native', ['--ns', 'c-inter'])
    expect(n.compressed_chunks).toBeGreaterThan(0)
    const c = cp.createClient({ store: store.url, namespace: 'c-inter', workers: 2 })
    try {
      expect((await bytesOf(await c.pull('from-native'))).equals(data)).toBe(true)
      const data2 = textData(2 << 20, 32)
      const r = await c.push(data2, { name: 'from-lib' })
      expect(r.compressedChunks).toBeGreaterThan(0)
      const out = join(dir, 'from-lib.out')
      const p = cutpoint(['pull', 'from-lib', '-o', out, '--ns', 'c-inter'], store)
      expect(p.status, p.stderr).toBe(0)
      expect(readFileSync(out).equals(data2)).toBe(true)
    } finally {
      await c.close()
    }
  })

  it('a store that does not list zstd gets codec 0 packs; the option is checked', async () => {
    // An older store: its GET /v1 without `zstd` (a fetch that drops it).
    const older: typeof fetch = async (input, init) => {
      const res = await fetch(input, init)
      if (!String(input).endsWith('/v1')) return res
      const v = await res.json()
      v.features = (v.features ?? []).filter((f: string) => f !== 'zstd')
      return new Response(JSON.stringify(v), { status: res.status, headers: res.headers })
    }
    const c = cp.createClient({ store: store.url, namespace: 'c-old', fetch: older, workers: 1 })
    try {
      const r = await c.push(textData(1 << 20, 41), { name: 'o' })
      expect(r.compressedChunks).toBe(0)
      expect(r.compressedBytes).toBe(r.novelBytes)
    } finally {
      await c.close()
    }
    for (const bad of ['fast', 'zstd', 3, null, true]) {
      expect(() => cp.createClient({ store: store.url, compression: bad as any })).toThrow(/compression must be 'auto', 'off' or 'max'/)
    }
  })

  it("cutpoint-js push --compression: the native CLI's fields; off sends raw; a bad value exits 2", () => {
    const main = `${root}web/dist/web/src/cli/main.js`
    const path = file('cli.txt', textData(2 << 20, 51))
    const js = (args: string[]) => spawnSync(process.execPath, [main, 'push', path, '--store', store.url, '--json', ...args], { encoding: 'utf8', env: { ...process.env, CUTPOINT_TOKEN: '' } })
    const a = js(['--ns', 'c-cli', '--name', 'a'])
    expect(a.status, a.stderr).toBe(0)
    const ja = JSON.parse(a.stdout)
    expect(ja.compressed_chunks).toBeGreaterThan(0)
    expect(ja.compressed_bytes).toBeLessThan(ja.novel_bytes / 2)
    expect(wireOf(ja)).toEqual(wireOf(nativePush(ref, path, 'a', ['--ns', 'c-cli'])))
    const o = js(['--ns', 'c-cli-off', '--name', 'a', '--compression', 'off'])
    expect(o.status, o.stderr).toBe(0)
    expect(JSON.parse(o.stdout)).toMatchObject({ compressed_chunks: 0, compressed_bytes: ja.novel_bytes })
    const h = spawnSync(process.execPath, [main, 'push', path, '--store', store.url, '--ns', 'c-cli-h', '--name', 'h', '--compression', 'max'], { encoding: 'utf8' })
    expect(h.status, h.stderr).toBe(0)
    expect(h.stdout).toMatch(/ compressed, /)
    const bad = js(['--name', 'b', '--compression', 'fast'])
    expect(bad.status).toBe(2)
    expect(bad.stderr).toMatch(/--compression 'fast' is not auto, off or max/)
  })
})
