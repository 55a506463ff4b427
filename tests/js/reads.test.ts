// How a worker reads a Blob (worker/handler.ts): BYOB reads of the slice's stream into buffers
// used again and again (`Buffers`), or `arrayBuffer()` where the stream is not a byte stream;
// and the chunks of a Blob read either way equal those of its bytes.
import { beforeAll, describe, expect, it } from 'vitest'
import * as cp from '@cutpoint/web'
import { Buffers, readBlob } from '../../worker/handler.ts'
import { randomBytes } from './vectors.mjs'

/** Byte equality without a deep comparison of millions of elements (slow in `toEqual`). */
const same = (a: Uint8Array, b: Uint8Array) => a.length === b.length && Buffer.from(a.buffer, a.byteOffset, a.length).equals(Buffer.from(b.buffer, b.byteOffset, b.length))

beforeAll(async () => {
  await cp.init()
})

/** A Blob whose slices' streams are plain streams (no BYOB reads), as in a runtime without byte streams. */
class PlainStreamBlob extends Blob {
  override slice(start?: number, end?: number, type?: string): Blob {
    return new PlainStreamBlob([super.slice(start, end, type)])
  }
  override stream(): ReadableStream<Uint8Array<ArrayBuffer>> {
    const inner = super.stream().getReader()
    return new ReadableStream({
      async pull(c) {
        const { done, value } = await inner.read()
        if (done) c.close()
        else c.enqueue(value)
      },
    })
  }
}

describe('Buffers', () => {
  it('gives back a buffer of at least the size asked, the smallest idle one first, and makes one only when none fits', () => {
    const b = new Buffers()
    const a1 = b.take(100)
    const a2 = b.take(1000)
    expect(a1.byteLength).toBeGreaterThanOrEqual(100)
    expect(a2.byteLength).toBeGreaterThanOrEqual(1000)
    expect(b.made).toBe(2)
    b.give(new Uint8Array(a1, 0, 10))
    b.give(new Uint8Array(a2, 5, 10)) // a view anywhere in it gives the whole buffer back
    expect(b.take(50)).toBe(a1)
    expect(b.take(50)).toBe(a2)
    expect(b.take(2000).byteLength).toBeGreaterThanOrEqual(2000)
    expect(b.made).toBe(3)
    b.clear()
  })

  it('keeps at most KEEP idle buffers (the smallest let go), each once; ignores shared and empty ones', () => {
    const b = new Buffers()
    const bufs = Array.from({ length: Buffers.KEEP + 2 }, (_, i) => b.take(1000 * (i + 1)))
    for (const x of bufs) b.give(new Uint8Array(x))
    b.give(new Uint8Array(bufs.at(-1)!)) // twice: kept once
    b.give(new Uint8Array(new SharedArrayBuffer(64)))
    b.give(new Uint8Array(0))
    b.give(undefined)
    const made = b.made
    const back = Array.from({ length: Buffers.KEEP }, () => b.take(1))
    expect(b.made).toBe(made)
    expect(new Set(back)).toEqual(new Set(bufs.slice(2)))
    b.take(1)
    expect(b.made).toBe(made + 1)
    b.clear()
  })

  it('with min (a worker reading a Blob: its largest slice), a buffer made for a short read fits every later one', () => {
    const b = new Buffers()
    b.min = 1000
    const a = b.take(900)
    expect(a.byteLength).toBe(1000)
    b.give(new Uint8Array(a, 0, 900))
    expect(b.take(1000)).toBe(a)
    expect(b.made).toBe(1)
    b.clear()
  })
})

describe('readBlob', () => {
  const bytes = randomBytes(3 << 20, 11)
  const blob = new Blob([bytes])

  it('reads a slice by BYOB reads into a pooled buffer, reused for the next slice', async () => {
    const b = new Buffers()
    const first = await readBlob(blob.slice(1000, (2 << 20) + 1000), 2 << 20, b)
    expect(same(first, bytes.subarray(1000, (2 << 20) + 1000))).toBe(true)
    b.give(first)
    // A shorter slice goes into the same (larger) buffer, and the view is exactly its length.
    const second = await readBlob(blob.slice(7, 70007), 70000, b)
    expect(second.length).toBe(70000)
    expect(same(second, bytes.subarray(7, 70007))).toBe(true)
    expect(b.made).toBe(1)
    b.clear()
  })

  it('falls back to arrayBuffer() where the stream is not a byte stream; says how much a short Blob had', async () => {
    const b = new Buffers()
    const plain = new PlainStreamBlob([bytes])
    expect(() => plain.stream().getReader({ mode: 'byob' })).toThrow()
    const got = await readBlob(plain.slice(5, 100005), 100000, b)
    expect(same(got, bytes.subarray(5, 100005))).toBe(true)
    expect(b.made).toBe(0)
    const short = await readBlob(blob.slice(bytes.length - 10), 100, b)
    expect(short.length).toBe(10)
    expect(same(short, bytes.subarray(bytes.length - 10))).toBe(true)
    b.clear()
  })

  it('the chunks of a Blob read without byte streams equal those of its bytes (read once, several segments)', async () => {
    const data = randomBytes(5 << 20, 12)
    const ref = await cp.chunkAll(data, { workers: 0 })
    const got = await cp.chunkAll(new PlainStreamBlob([data]), { workers: 0, segmentSize: 1_000_003, readOnce: true })
    expect(got.map((c) => [c.offset, c.length, c.hash])).toEqual(ref.map((c) => [c.offset, c.length, c.hash]))
    // And with byte streams, buffers reused across segments of two sizes, in this thread and in
    // two workers (reads ahead, slices kept for hash jobs and given back), read once or not.
    for (const [workers, readOnce] of [[0, true], [2, true], [2, false]] as const) {
      const byob = await cp.chunkAll(new Blob([data]), { workers, segmentSize: 1_000_003, readOnce })
      expect(byob.map((c) => [c.offset, c.length, c.hash])).toEqual(ref.map((c) => [c.offset, c.length, c.hash]))
    }
  })
})
