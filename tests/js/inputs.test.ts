// Ordinary Node inputs (issue #30): a Buffer (a view into Node's shared pool, at an offset),
// any Uint8Array view, and a file-backed Blob (`fs.openAsBlob`) chunk and push with workers;
// the caller's memory is never detached; one bad input does not poison a client or its pool.
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { mkdtempSync, openAsBlob, readFileSync, rmSync, truncateSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import * as cp from '@cutpoint/web'
import { haveCutpoint, startStore, type Store } from './store'
// The same module instance as the package's (node_modules/@cutpoint/web links to web/).
import { pools } from '../../web/dist/web/src/workers.js'
// @ts-ignore — plain ESM shared with Deno and the browser
import { randomBytes } from './vectors.mjs'

const dir = mkdtempSync(join(tmpdir(), 'cutpoint-inputs-'))
const bytes: Uint8Array = randomBytes(3 << 20, 30)
const file = join(dir, 'a.bin')
writeFileSync(file, bytes)
let expected: cp.Chunk[]

beforeAll(async () => {
  await cp.init()
  expected = await cp.chunkAll(bytes.slice(), { workers: 0 })
})
afterAll(() => rmSync(dir, { recursive: true, force: true }))

/** A Buffer from Node's shared pool (allocUnsafe below half the pool size), at an offset. */
function pooledBuffer(data: Uint8Array): Buffer {
  Buffer.allocUnsafe(16) // the pool's next slice starts past these
  const b = Buffer.allocUnsafe(data.length)
  b.set(data)
  return b
}

describe('inputs the caller keeps', () => {
  it('a pooled Buffer at an offset: chunked by workers, left intact, the pool still usable', async () => {
    const small = randomBytes(3000, 31) as Uint8Array
    const b = pooledBuffer(small)
    expect(b.byteOffset).toBeGreaterThan(0)
    expect(b.buffer.byteLength).toBeGreaterThan(b.length) // shared with other Buffers
    const want = await cp.chunkAll(small.slice(), { workers: 0 })
    const got = await cp.chunkAll(b, { workers: 2 })
    expect(got).toEqual(want)
    expect(b.buffer.byteLength).toBeGreaterThan(0) // not detached
    expect(Buffer.compare(b, Buffer.from(small))).toBe(0)
    expect(() => Buffer.from('after')).not.toThrow() // Node's pool is alive
    // A pool of one's own: Buffers at offsets into one ArrayBuffer (Node 20 marks its own pool
    // untransferable; this one is not).
    const shared = new ArrayBuffer(16 << 10)
    const first = Buffer.from(shared, 0, 100).fill(7)
    const mine = Buffer.from(shared, 4096, small.length)
    mine.set(small)
    expect(await cp.chunkAll(mine, { workers: 2 })).toEqual(want)
    expect(shared.byteLength).toBe(16 << 10)
    expect(first[99]).toBe(7)
    expect(Buffer.compare(mine, Buffer.from(small))).toBe(0)
  })

  it('readFileSync(f) and a Uint8Array view with an offset into a larger buffer', async () => {
    const buf = readFileSync(file)
    expect(await cp.chunkAll(buf, { workers: 2 })).toEqual(expected)
    expect(buf.length).toBe(bytes.length)
    const big = new Uint8Array(bytes.length + 100)
    big.set(bytes, 37)
    const view = big.subarray(37, 37 + bytes.length)
    expect(await cp.chunkAll(view, { workers: 2, span: 1 << 20 })).toEqual(expected)
    expect(big.buffer.byteLength).toBe(bytes.length + 100)
    expect(view[0]).toBe(bytes[0])
  })

  it('a file-backed Blob (fs.openAsBlob) with workers, and with a kept pool', async () => {
    const blob = await openAsBlob(file)
    expect(await cp.chunkAll(blob, { workers: 2 })).toEqual(expected)
    const pool = await cp.createPool({ workers: 2 })
    try {
      expect(await cp.chunkAll(await openAsBlob(file), { pool })).toEqual(expected)
      expect(await cp.chunkAll(bytes, { pool })).toEqual(expected)
    } finally {
      pool.close()
    }
  })

  it('a job that cannot be sent fails alone: the kept pool runs the next call', async () => {
    const handle = await cp.createPool({ workers: 2 })
    try {
      const pool = pools.get(handle)!
      // A message that cannot be cloned (a function in it) never reaches a worker.
      await expect(pool.run({ type: 'cutpoint:release', slice: (() => 0) as any })).rejects.toThrow(/cannot send a job/)
      expect(pool.usable).toBe(true)
      expect(await cp.chunkAll(bytes, { pool: handle })).toEqual(expected)
    } finally {
      handle.close()
    }
  })
})

describe.skipIf(!haveCutpoint())('a client with these inputs', () => {
  let store: Store
  beforeAll(async () => {
    store = await startStore()
  })
  afterAll(async () => {
    await store?.stop()
  })

  it('push(Buffer) and push(openAsBlob(f)) with workers; the Buffer is left intact', async () => {
    const client = cp.createClient({ store: store.url, workers: 2 })
    try {
      const b = pooledBuffer(bytes.subarray(0, 3000))
      const r1 = await client.push(b, { name: 'buffer.bin' })
      expect(r1.bytes).toBe(3000)
      expect(b.buffer.byteLength).toBeGreaterThan(0)
      expect(Buffer.compare(b, Buffer.from(bytes.subarray(0, 3000)))).toBe(0)
      const r2 = await client.push(await openAsBlob(file), { name: 'blob.bin' })
      expect(r2.bytes).toBe(bytes.length)
      const back = new Uint8Array(await new Response(await client.pull('blob.bin')).arrayBuffer())
      expect(Buffer.compare(back, bytes)).toBe(0)
    } finally {
      await client.close()
    }
  })

  it('a push that fails in the workers, then a good push on the same client', async () => {
    const client = cp.createClient({ store: store.url, workers: 2 })
    const f = join(dir, 'shrinks.bin')
    try {
      writeFileSync(f, bytes)
      const blob = await openAsBlob(f)
      truncateSync(f, 1000) // the Blob's file changed: reading it fails
      await expect(client.push(blob, { name: 'bad.bin' })).rejects.toThrow()
      const r = await client.push(bytes, { name: 'good.bin' })
      expect(r.bytes).toBe(bytes.length)
      const r2 = await client.push(await openAsBlob(file), { name: 'good2.bin' })
      expect(r2.novelBytes).toBe(0)
    } finally {
      await client.close()
    }
  })
})
