// A push's compression job read by the worker itself (worker/handler.ts `cutpoint:compress` with
// `blob` and `offsets`, what a File pushed from a browser sends): the same frames as the job that
// carries the chunks' bytes, consecutive or not; a file that cannot be read is an answer with an
// error (the worker and its pool live on), not a crash.
import { describe, expect, it } from 'vitest'
import { Handler } from '../../web/dist/worker/handler.js'
import { loadWasm } from '../../web/dist/common/wasm.js'
import type { CompressRes, HashRes, Request } from '../../common/protocol.ts'
import { splitTrial } from '../../web/dist/web/src/emitter.js'
import * as cp from '@cutpoint/web'
import { randomBytes } from './vectors.mjs'

/** A worker's handler, initialised with the default profile, hashing with `hash` (or not). */
async function handler(hash: 'none' | 'blake3', capacity: number): Promise<Handler> {
  const wasm = await loadWasm()
  const h = new Handler()
  await h.handle({ type: 'cutpoint:init', id: 1, flavor: wasm.flavor, profile: 'gear:2k:8k:64k', backend: '', hash, hashImpl: 'wasm', capacity, source: { kind: 'message' } })
  return h
}

/** A sentence `repeat` times (compressible), then `random` random bytes (seed `seed`). */
function textThenRandom(repeat: number, random: number, seed: number): Uint8Array {
  const text = new TextEncoder().encode('the quick brown fox jumps over the lazy dog; '.repeat(repeat))
  const data = new Uint8Array(text.length + random)
  data.set(text)
  data.set(randomBytes(random, seed), text.length)
  return data
}

describe('a compression job that reads the file itself', () => {
  it('gives the frames of the job carrying the bytes; an unreadable range is an error answer', async () => {
    const h = await handler('none', 1 << 16)
    // Half compressible text, half random bytes: compressed and raw frames both.
    const data = textThenRandom(3000, 200_000, 5)
    const blob = new Blob([data])
    const cases: [number, number][][] = [
      // consecutive chunks (one read)
      [[0, 9000], [9000, 12000], [21000, 8000], [29000, 50000], [79000, 56000], [135000, 60000]],
      // gaps between them and out of order (a read each)
      [[100, 7000], [40000, 9000], [5, 90], [data.length - 200_000 - 4000, 30000], [data.length - 8192, 8192]],
    ]
    let id = 2
    for (const c of cases) {
      const lengths = Uint32Array.from(c, ([, l]) => l)
      const offsets = Float64Array.from(c, ([o]) => o)
      const bytes = new Uint8Array(lengths.reduce((a, b) => a + b, 0))
      let at = 0
      for (const [o, l] of c) bytes.set(data.subarray(o, o + l), (at += l) - l)
      const carried = (await h.handle({ type: 'cutpoint:compress', id: id++, level: 4, lengths, bytes })).res as CompressRes
      const read = (await h.handle(structuredClone({ type: 'cutpoint:compress', id: id++, level: 4, lengths, blob, offsets } as Request))).res as CompressRes
      expect(read.error).toBeUndefined()
      expect(read.bytes).toBeUndefined()
      expect(Buffer.from(read.out).equals(Buffer.from(carried.out))).toBe(true)
      // Read ahead while the job before it runs (the worker's `prefetch`): the same answer.
      const next = structuredClone({ type: 'cutpoint:compress', id: id++, level: 4, lengths, blob, offsets } as Request)
      h.prefetch(next)
      const early = (await h.handle(next)).res as CompressRes
      expect(Buffer.from(early.out).equals(Buffer.from(carried.out))).toBe(true)
      const heads = new DataView(read.out.buffer, read.out.byteOffset, 4 * c.length)
      const kinds = c.map((_, i) => heads.getUint32(4 * i, true) >>> 31)
      expect(kinds).toContain(1)
      expect(kinds).toContain(0)
    }
    // A range past the file's end (a file that shrank): an answer with the error, nothing compressed.
    const bad = (await h.handle({ type: 'cutpoint:compress', id: id++, level: 4, lengths: Uint32Array.of(1000, 1000), blob, offsets: Float64Array.of(0, data.length - 10) })).res as CompressRes
    expect(bad.error).toMatch(/cannot read bytes 334990..335990 of the file/)
    expect(bad.out.length).toBe(0)
    const badAhead: Request = { type: 'cutpoint:compress', id: id++, level: 4, lengths: Uint32Array.of(1000), blob, offsets: Float64Array.of(data.length - 10) }
    h.prefetch(badAhead)
    expect(((await h.handle(badAhead)).res as CompressRes).error).toMatch(/cannot read bytes/)
    await h.close()
  })
})

// A push's compression sample tried by the hash jobs (push.ts `trialOptions`: a File pushed from
// a browser heads first, no base): the chunks the emitter picks (the first `first` of every
// `every` of the input) carry what a compression job answers for each of them alone, the rest
// nothing; the chunks themselves are those of a chunk() without the trial.
describe('a compression trial in the hash jobs', () => {
  it('a hash job with `trial`: its chunks compressed as a compression job compresses them', async () => {
    const h = await handler('blake3', 1 << 20)
    const data = textThenRandom(800, 60_000, 7)
    const lengths = Uint32Array.of(9000, 12000, 15000, 20000, 30000, data.length - 86000)
    const idx = Uint32Array.of(0, 2, 4, 5)
    const res = (await h.handle({ type: 'cutpoint:hash', id: 2, start: 0, lengths, bytes: data.slice(), trial: { level: 4, idx } })).res as HashRes
    const plain = (await h.handle({ type: 'cutpoint:hash', id: 3, start: 0, lengths, bytes: data.slice() })).res as HashRes
    expect(Buffer.from(res.digests).equals(Buffer.from(plain.digests))).toBe(true)
    expect(plain.trial).toBeUndefined()
    const parts = splitTrial(res.trial!, idx.length)!
    expect(parts).toHaveLength(idx.length)
    const starts = [0]
    for (const l of lengths) starts.push(starts.at(-1)! + l)
    let id = 4
    for (const [k, i] of [...idx].entries()) {
      const bytes = data.slice(starts[i], starts[i + 1])
      const one = (await h.handle({ type: 'cutpoint:compress', id: id++, level: 4, lengths: Uint32Array.of(lengths[i]), bytes })).res as CompressRes
      expect(Buffer.from(parts[k]).equals(Buffer.from(one.out))).toBe(true)
    }
    // Text compresses, random bytes do not: both kinds of frame.
    expect(parts.map((p) => new DataView(p.buffer, p.byteOffset, 4).getUint32(0, true) >>> 31)).toEqual([1, 1, 0, 0])
    await h.close()
  })

  it('chunk() with `trial`: the same chunks, the picked ones with their compression', async () => {
    await cp.init()
    const data = randomBytes(3 << 20, 11)
    data.set(new TextEncoder().encode('compressible '.repeat(40_000)), 1 << 20)
    for (const workers of [0, 2]) {
      const plain: cp.Chunk[] = []
      for await (const b of cp.chunk(data, { workers, hashBatch: 64 << 10 }).batches()) plain.push(...b)
      const tried: cp.Chunk[] = []
      const trial = { level: 4, every: 8, first: 3 }
      for await (const b of cp.chunk(data, { workers, hashBatch: 64 << 10, trial } as cp.ChunkOptions).batches()) tried.push(...b)
      expect(tried.map((c) => [c.offset, c.length, c.hash])).toEqual(plain.map((c) => [c.offset, c.length, c.hash]))
      const w = await loadWasm()
      let frames = 0
      tried.forEach((c, i) => {
        if (i % trial.every >= trial.first) return expect(c.trial).toBeUndefined()
        const want = w.mod.compressGroup(data.subarray(c.offset, c.offset + c.length), Uint32Array.of(c.length), trial.level)
        expect(c.trial && Buffer.from(c.trial).equals(Buffer.from(want))).toBe(true)
        frames += new DataView(want.buffer, want.byteOffset, 4).getUint32(0, true) >>> 31
      })
      expect(frames).toBeGreaterThan(0)
    }
  })
})
