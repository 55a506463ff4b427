// The library in Node: shared vectors over worker_threads (1, 2, 4 workers, odd segment sizes,
// simd128 and plain builds, every stage-1 backend), streaming, paths, Blobs, and failures.
import { describe, expect, it, beforeAll } from 'vitest'
import { mkdtempSync, writeFileSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import * as cp from '@cutpoint/web'
import { loadVectors, type Case } from './helpers'
// @ts-ignore — plain ESM shared with Deno and the browser
import { generate, diff, randomBytes } from './vectors.mjs'

const vectors = loadVectors()

beforeAll(async () => {
  await cp.init()
  // These tests check that odd, tiny stage-1 jobs give the same chunks: keep their sizes (the
  // library raises a segmentSize below 64 KiB to 64 KiB otherwise; see 'issue #19' below).
  cp.__test.minSpan(1)
})

describe('shared vectors', () => {
  it('are present', () => {
    expect(vectors.length).toBeGreaterThan(0)
  })
  for (const vf of vectors) {
    it(`${vf.name}: every case, workers 2, odd segments, both wasm builds, blake3 and sha256`, async () => {
      for (const [i, c] of vf.cases.entries()) {
        const data: Uint8Array = generate(c.input)
        const wasm = i % 2 ? 'plain' : 'simd128'
        const got = await cp.chunkAll(data, { profile: vf.profile, workers: 2, span: 4099 + 2 * i, wasm })
        expect(diff(got, c), `${c.note} (${wasm})`).toBeNull()
        const sha = await cp.chunkAll(data, { profile: vf.profile, workers: 0, segmentSize: 65537, hash: 'sha256', hashImpl: i % 2 ? 'wasm' : 'webcrypto' })
        expect(diff(sha, c, 'sha256'), `${c.note} sha256`).toBeNull()
      }
    })
    it(`${vf.name}: largest case, workers 1/2/4 x spans x builds x backends`, async () => {
      const c: Case = vf.cases.reduce((a, b) => (b.input.length > a.input.length ? b : a))
      const data: Uint8Array = generate(c.input)
      for (const workers of [1, 2, 4])
        for (const span of [1021, 65537, 1 << 20])
          for (const [wasm, backend] of [['simd128', 'simd128'], ['simd128', 'scalar'], ['plain', 'interleaved']] as const) {
            const got = await cp.chunkAll(data, { profile: vf.profile, workers, span, wasm, backend, hash: workers === 2 ? 'blake3' : 'none' })
            expect(diff(got, c, workers === 2 ? 'blake3' : 'none'), `${c.note} w=${workers} span=${span} ${wasm}/${backend}`).toBeNull()
          }
    })
  }
})

describe('inputs', () => {
  const vf = vectors.find((v) => v.profile === 'gear:2k:8k:64k') ?? vectors[0]
  const c = vf.cases.reduce((a, b) => (b.input.length > a.input.length ? b : a))
  const data: Uint8Array = generate(c.input)

  it('createChunker: pieces of growing odd sizes give the one-shot chunks', async () => {
    for (const workers of [0, 2]) {
      const ch = await cp.createChunker({ profile: vf.profile, workers, segmentSize: 30011 })
      const got: cp.Chunk[] = []
      let off = 0
      for (let k = 1; off < data.length; k += 2) {
        const n = Math.min(k * k * 7, data.length - off)
        got.push(...(await ch.update(data.subarray(off, off + n))))
        off += n
      }
      got.push(...(await ch.finish()))
      expect(diff(got, c)).toBeNull()
    }
  })

  it('ReadableStream input', async () => {
    const stream = new ReadableStream<Uint8Array>({
      start(ctl) {
        for (let off = 0; off < data.length; off += 10007) ctl.enqueue(data.slice(off, off + 10007))
        ctl.close()
      },
    })
    expect(diff(await cp.chunkAll(stream, { profile: vf.profile, workers: 2, span: 65537 }), c)).toBeNull()
  })

  it('a path: workers read their own slices of the file', async () => {
    const dir = mkdtempSync(`${tmpdir()}/cutpoint-`)
    try {
      writeFileSync(`${dir}/f.bin`, data)
      for (const readOnce of [false, true]) {
        expect(diff(await cp.chunkAll(`${dir}/f.bin`, { profile: vf.profile, workers: 2, segmentSize: 50021, readOnce }), c)).toBeNull()
      }
      // Tiny segments: chunks span many retained slices, the rest is read before them.
      expect(diff(await cp.chunkAll(`${dir}/f.bin`, { profile: vf.profile, workers: 3, segmentSize: 1000, readOnce: true }), c)).toBeNull()
    } finally {
      rmSync(dir, { recursive: true })
    }
  })

  it('a Blob and a SharedArrayBuffer', async () => {
    for (const readOnce of [true, false]) {
      expect(diff(await cp.chunkAll(new Blob([data]), { profile: vf.profile, workers: 2, segmentSize: 70001, readOnce }), c)).toBeNull()
    }
    const shared = new Uint8Array(new SharedArrayBuffer(data.length))
    shared.set(data)
    expect(diff(await cp.chunkAll(shared, { profile: vf.profile, workers: 2, segmentSize: 70001 }), c)).toBeNull()
  })

  it('a Blob read once with chunks longer than the bytes a worker keeps before its segment (1 MiB)', async () => {
    // A read-once worker keeps up to min(max, 1 MiB) bytes before its segment for the hash job;
    // with max 4 MiB a segment's first chunk can begin before them, and the worker reads the
    // rest from the source (24 MiB of random bytes: 20 of 21 chunks are longer than 1 MiB).
    const big = randomBytes(24 << 20, 7)
    const profile = 'gear:256k:1m:4m'
    const ref = await cp.chunkAll(big, { profile, workers: 0 })
    expect(ref.filter((x) => x.length > 1 << 20).length).toBeGreaterThan(10)
    const got = await cp.chunkAll(new Blob([big]), { profile, workers: 2, segmentSize: 3_000_001, readOnce: true })
    expect(got.map((x) => [x.offset, x.length, x.hash])).toEqual(ref.map((x) => [x.offset, x.length, x.hash]))
  })

  it('one by one or in batches: the same chunks; a result iterates once; a break stops it', async () => {
    const opts = { profile: vf.profile, workers: 2, segmentSize: 40009 }
    const one: cp.Chunk[] = []
    for await (const x of cp.chunk(data, opts)) one.push(x)
    expect(diff(one, c)).toBeNull()
    const batched: cp.Chunk[] = []
    for await (const b of cp.chunk(data, opts).batches()) {
      expect(b.length).toBeGreaterThan(0)
      batched.push(...b)
    }
    expect(batched).toEqual(one)
    const it = cp.chunk(data, opts)
    for await (const _ of it) break
    expect(() => it[Symbol.asyncIterator]()).toThrow(/iterated once/)
    expect(() => it.batches()).toThrow(/iterated once/)
  })

  it('createPool: one set of workers for many calls, sources and profiles; misuse says why', async () => {
    const pool = await cp.createPool({ workers: 2 })
    const dir = mkdtempSync(`${tmpdir()}/cutpoint-`)
    try {
      writeFileSync(`${dir}/f.bin`, data)
      const other = vectors.find((v) => v.profile !== vf.profile)!
      const oc = other.cases.reduce((a, b) => (b.input.length > a.input.length ? b : a))
      const odata: Uint8Array = generate(oc.input)
      for (let round = 0; round < 2; round++) {
        expect(diff(await cp.chunkAll(data, { profile: vf.profile, pool, segmentSize: 40009 }), c)).toBeNull()
        expect(diff(await cp.chunkAll(`${dir}/f.bin`, { profile: vf.profile, pool, segmentSize: 50021, readOnce: true }), c)).toBeNull()
        expect(diff(await cp.chunkAll(new Blob([odata]), { profile: other.profile, pool, segmentSize: 30011 }), oc)).toBeNull()
        const ch = await cp.createChunker({ profile: vf.profile, pool, segmentSize: 30011 })
        const got = [...(await ch.update(data.subarray(0, 77777))), ...(await ch.update(data.subarray(77777))), ...(await ch.finish())]
        expect(diff(got, c)).toBeNull()
        // A consumer that stops early leaves the pool ready for the next call.
        for await (const _ of cp.chunk(`${dir}/f.bin`, { profile: vf.profile, pool, segmentSize: 1000 })) break
      }
      const busy = cp.chunkAll(data, { profile: vf.profile, pool })
      await expect(cp.chunkAll(data, { profile: vf.profile, pool })).rejects.toThrow(/in use by another call/)
      expect(diff(await busy, c)).toBeNull()
      await expect(cp.chunkAll(data, { pool, workers: 3 })).rejects.toThrow(/differs from the pool/)
      await expect(cp.chunkAll(data, { pool: { workers: 2, flavor: 'simd128', close() {} } })).rejects.toThrow(/createPool/)
    } finally {
      pool.close()
      rmSync(dir, { recursive: true })
    }
    await expect(cp.chunkAll(data, { pool })).rejects.toThrow(/pool is closed/)
  })

  it('empty input: no chunks', async () => {
    expect(await cp.chunkAll(new Uint8Array(0), { workers: 1 })).toEqual([])
    const ch = await cp.createChunker({ workers: 1 })
    expect(await ch.finish()).toEqual([])
  })
})

describe('simd128 kernel', () => {
  it('equals the reference on random and low-entropy data for every family', async () => {
    for (const profile of ['crc32:2k:16k:64k', 'crc32:256:1k:4k:window=64,magic=7', 'rabin:4k:8k:12k', 'rabin:256:1k:4k:magic=7', 'gear:2k:8k:64k:nc=3']) {
      for (const [n, seed] of [[300_001, 3], [16 * 4099 + 17, 4]]) {
        for (const gen of ['xorshift64star', 'lowentropy']) {
          const data: Uint8Array = generate({ generator: gen, seed, length: n })
          const ref = cp.referenceCuts(profile, data)
          for (const segmentSize of [n, 65537, 7919]) {
            const got = await cp.chunkAll(data, { profile, workers: 0, segmentSize, backend: 'simd128', hash: 'none' })
            expect(got.map((x) => x.offset + x.length), `${profile} ${gen} n=${n} seg=${segmentSize}`).toEqual(ref)
          }
        }
      }
    }
  })
})

describe('errors', () => {
  it('a bad profile says why', async () => {
    await expect(cp.chunkAll(randomBytes(10), { profile: 'crc32:2k:8k' })).rejects.toThrow(/expected FAMILY:MIN:AVG:MAX/)
    expect(() => cp.parseProfile('crc32:2k:10000:64k')).toThrow(/power of two/)
  })
  it('bad options', async () => {
    await expect(cp.chunkAll(randomBytes(10), { workers: -1 })).rejects.toThrow(/workers/)
    await expect(cp.chunkAll(randomBytes(10), { segmentSize: 0 })).rejects.toThrow(/segmentSize/)
    await expect(cp.chunkAll(randomBytes(10), { backend: 'avx9' })).rejects.toThrow(/backend 'avx9'/)
    await expect(cp.chunkAll(randomBytes(10), { wasm: 'plain', backend: 'simd128', workers: 1 })).rejects.toThrow(/simd128/)
    await expect(cp.chunkAll(randomBytes(10), { hash: 'md5' as any })).rejects.toThrow(/unknown hash/)
    expect(() => cp.chunk(42 as any)).toThrow(/input must be/)
  })
  it('a file that cannot be read', async () => {
    await expect(cp.chunkAll('/nonexistent/cutpoint.bin', { workers: 2 })).rejects.toThrow(/nonexistent/)
  })
  it('a Blob whose read fails mid-way: a clear error, no hang', async () => {
    const data = randomBytes(300_000)
    class Failing extends Blob {
      slice(a?: number, b?: number): Blob {
        if ((a ?? 0) > 100_000) return { arrayBuffer: () => Promise.reject(new Error('disk on fire')) } as any
        return new Blob([data.subarray(a, b)])
      }
    }
    // Worker threads get a structured clone (a plain Blob), so fail on this thread (workers: 0).
    await expect(cp.chunkAll(new Failing([data]), { workers: 0, segmentSize: 65536 })).rejects.toThrow(/disk on fire/)
  })
  it('a worker that crashes: the call fails, the pool is cleaned up', async () => {
    await expect(cp.__test.poolCrash({ workers: 2 })).rejects.toThrow(/worker/)
  })
})

describe('stage 2 beyond 4 GiB (wasm32 usize is 32 bits)', () => {
  it('cuts stay exact past 2^32 (selector rebased every GiB)', async () => {
    const { readFileSync } = await import('node:fs')
    const dir = new URL('../../web/dist/wasm/plain/', import.meta.url)
    const m = await import(new URL('cutpoint_wasm.js', dir).href)
    m.initSync({ module: readFileSync(new URL('cutpoint_wasm_bg.wasm', dir)) })
    const max = 64 * 1024
    const st2 = new m.Stage2('crc32:2k:16k:64k')
    const seg = 256 * 1024 * 1024
    const total = 5 * 1024 * 1024 * 1024 + 12345
    // One candidate 3000 bytes into every segment (past MIN after the MAX-sized cut before it).
    const cuts: number[] = []
    for (let p = 0; p < total; p += seg) {
      const q = Math.min(p + seg, total)
      cuts.push(...st2.feed(p, q, Uint32Array.of(3000), new Uint32Array(0)))
    }
    cuts.push(...st2.finish(total))
    // Expected: from each chunk start s, the cut is the candidate if it lies in [s + MIN, s + MAX), else s + MAX.
    const want: number[] = []
    let s = 0
    while (s < total) {
      const cand = Math.floor(s / seg) * seg + 3000
      const next = cand >= s + 2048 && cand < s + max ? cand : cand + seg >= s + 2048 && cand + seg < s + max ? cand + seg : Math.min(s + max, total)
      want.push(next)
      s = next
    }
    expect(cuts.length).toBe(want.length)
    expect(cuts).toEqual(want)
    expect(cuts[cuts.length - 1]).toBe(total)
    expect(cuts.some((c) => c > 2 ** 32)).toBe(true)
    st2.free()
  })
})
