// RapidCDC in Node (and Deno): the core's RapidCDC through wasm gives the native CLI's chunks and
// statistics for every criterion with hints from a base recipe, a hint cache written natively,
// or a table carried across calls; ff+rwt+fpt gives the regular chunks; caches written here load
// natively; caches of another profile or format version are rejected.
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { readFileSync, rmSync, writeFileSync, existsSync } from 'node:fs'
import { spawnSync } from 'node:child_process'
import * as cp from '@cutpoint/web'
import { root } from './helpers'
import { CRITERIA, THREADS, copy, makeDataset, nativeChunks, run, type Dataset, type NativeStats } from './rapid-data'

let d: Dataset

beforeAll(async () => {
  await cp.init()
  d = makeDataset()
}, 900_000) // the native build may wait for other cargo runs on a shared machine

afterAll(() => {
  if (d) rmSync(d.dir, { recursive: true, force: true })
})

function sameStats(got: cp.RapidStats, want: NativeStats, what: string) {
  expect(
    { chunks: got.chunks, hinted: got.hintedChunks, rolled: got.rolledBytes, hits: got.hits, misses: got.misses, fallbacks: got.fallbacks },
    what,
  ).toEqual({ chunks: want.chunks, hinted: want.hinted, rolled: want.rolled, hits: want.hits, misses: want.misses, fallbacks: want.fallbacks })
}

async function collect(it: cp.ChunkIterable): Promise<cp.Chunk[]> {
  const out: cp.Chunk[] = []
  for await (const c of it) out.push(c)
  return out
}

describe('RapidCDC with a base recipe written by the native CLI', () => {
  for (const criterion of CRITERIA) {
    it(`${criterion}: same chunks and statistics as \`cutpoint chunk --rapid ${criterion} --base\` (path, bytes, Blob, stream, createChunker)`, async () => {
      const want = nativeChunks(d.v1, ['--rapid', criterion, '--base', d.recipe])
      expect(want.stats!.hinted, 'the data gives hints').toBeGreaterThan(10)
      const it = cp.chunk(d.v1, { workers: THREADS, rapid: { criterion, base: d.recipe } })
      expect(await collect(it)).toEqual(want.rows)
      const res = it.rapid!
      sameStats(res.stats, want.stats!, 'path input')
      expect(res.baseChunks).toBeGreaterThan(100)
      expect(res.stats.skippedBytes).toBe(res.stats.bytes - res.stats.rolledBytes)
      expect(res.stats.hitRatio[0]).toBeGreaterThan(0)

      const bytes = new Uint8Array(readFileSync(d.v1))
      const recipe = new Uint8Array(readFileSync(d.recipe))
      // blockSize explicit instead of workers: the same largest fallback block, so the same chunks.
      let result: cp.RapidResult | undefined
      const fromBytes = await cp.chunkAll(bytes, { workers: 0, segmentSize: 65537, rapid: { criterion, base: recipe, blockSize: cp.nativeBlockSize(THREADS), onResult: (r) => (result = r) } })
      expect(fromBytes).toEqual(want.rows)
      sameStats(result!.stats, want.stats!, 'bytes input')
      expect(await cp.chunkAll(new Blob([bytes]), { workers: THREADS, segmentSize: 1 << 20, rapid: { criterion, base: new Blob([recipe]) } })).toEqual(want.rows)
      const stream = new Blob([bytes]).stream()
      expect(await cp.chunkAll(stream, { workers: THREADS, rapid: { criterion, base: recipe.buffer } })).toEqual(want.rows)

      const ch = await cp.createChunker({ workers: THREADS, rapid: { criterion, base: recipe } })
      const got: cp.Chunk[] = []
      let off = 0
      for (let k = 1; off < bytes.length; k += 2) {
        const n = Math.min(k * k * 97, bytes.length - off)
        got.push(...(await ch.update(bytes.subarray(off, off + n))))
        off += n
      }
      expect(ch.rapid!.stats.chunks).toBe(got.length)
      expect(ch.rapid!.tableSize).toBeGreaterThanOrEqual(ch.rapid!.baseChunks - 5)
      got.push(...(await ch.finish()))
      expect(got).toEqual(want.rows)
      sameStats(ch.rapid!.stats, want.stats!, 'createChunker')
    })
  }

  it('ff+rwt+fpt gives the regular chunks (native and JS); the others differ from them here', async () => {
    const regular = nativeChunks(d.v1).rows
    expect(await cp.chunkAll(d.v1, { workers: THREADS })).toEqual(regular)
    for (const criterion of CRITERIA) {
      for (const blockSize of [1 << 16, 3 << 20]) {
        const got = await cp.chunkAll(d.v1, { workers: THREADS, rapid: { criterion, base: d.recipe, blockSize } })
        if (criterion === 'ff+rwt+fpt') expect(got, `blockSize ${blockSize}`).toEqual(regular)
      }
    }
    const ff = await cp.chunkAll(d.v1, { workers: THREADS, rapid: { criterion: 'ff', base: d.recipe } })
    expect(ff).not.toEqual(regular)
  })

  it('another profile and SHA-256: the same as native', async () => {
    for (const criterion of ['ff+mt', 'ff+rwt+fpt'] as const) {
      const recipe = `${d.dir}/v0.rabin.recipe`
      if (!existsSync(recipe)) {
        expect(run(['stats', '--rapid', 'ff+rwt+fpt', '--no-compare', '-p', 'rabin:4k:8k:12k', '--hash', 'sha256', '--save-recipe', recipe, d.v0]).status).toBe(0)
      }
      const want = nativeChunks(d.v1, ['-p', 'rabin:4k:8k:12k', '--hash', 'sha256', '--rapid', criterion, '--base', recipe, '--hint-list', '3'])
      const it = cp.chunk(d.v1, { workers: THREADS, profile: 'rabin:4k:8k:12k', hash: 'sha256', rapid: { criterion, base: recipe, hintList: 3 } })
      expect(await collect(it)).toEqual(want.rows)
      sameStats(it.rapid!.stats, want.stats!, criterion)
      expect(it.rapid!.stats.hits.length).toBe(3)
    }
  })

  it('recipe: true writes the same recipe as the native --save-recipe, and it works as --base natively', async () => {
    const nat = `${d.dir}/v1.native.recipe`
    nativeChunks(d.v1, ['--rapid', 'ff+mt', '--base', d.recipe, '--save-recipe', nat])
    let r: cp.RapidResult | undefined
    await cp.chunkAll(d.v1, { workers: THREADS, rapid: { criterion: 'ff+mt', base: d.recipe, recipe: true, onResult: (x) => (r = x) } })
    expect(Buffer.from(r!.recipe!).toString()).toBe(readFileSync(nat, 'utf8'))
    const js = `${d.dir}/v1.js.recipe`
    writeFileSync(js, r!.recipe!)
    const want = nativeChunks(d.v2, ['--rapid', 'ff+rwt', '--base', nat]).rows
    expect(nativeChunks(d.v2, ['--rapid', 'ff+rwt', '--base', js]).rows).toEqual(want)
    expect(await cp.chunkAll(d.v2, { workers: THREADS, rapid: { criterion: 'ff+rwt', base: js } })).toEqual(want)
  })
})

describe('RapidCDC with stage 1 of fallback blocks in workers', () => {
  const block = () => cp.nativeBlockSize(THREADS)
  for (const criterion of CRITERIA) {
    it(`${criterion}: workers 0, 1, 2 give the native chunks and statistics (base recipe, and a novel input)`, async () => {
      const cases = [
        { file: d.v1, args: ['--rapid', criterion, '--base', d.recipe], base: d.recipe as string | undefined },
        { file: d.v0, args: ['--rapid', criterion], base: undefined },
      ]
      const bytes = new Uint8Array(readFileSync(d.v1))
      for (const c of cases) {
        const want = nativeChunks(c.file, c.args)
        for (const workers of [0, 1, 2]) {
          // workerBlock 1: every fallback block goes to the workers; 1 MiB and 65537-position jobs.
          for (const [segmentSize, workerBlock] of [[1 << 20, 1], [65537, 1], [4 << 20, undefined]] as const) {
            const what = `${c.file} workers ${workers} segment ${segmentSize} workerBlock ${workerBlock}`
            let r: cp.RapidResult | undefined
            const rapid = { criterion, base: c.base, blockSize: block(), workerBlock, onResult: (x: cp.RapidResult) => (r = x) }
            expect(await cp.chunkAll(c.file, { workers, segmentSize, rapid }), what).toEqual(want.rows)
            sameStats(r!.stats, want.stats!, what)
          }
        }
        if (c.base) {
          // Bytes pushed in odd pieces through createChunker.
          const ch = await cp.createChunker({ workers: 2, segmentSize: 300_001, rapid: { criterion, base: c.base, blockSize: block(), workerBlock: 4096 } })
          const got: cp.Chunk[] = []
          for (let off = 0, k = 1; off < bytes.length; k++) {
            const n = Math.min(k * 7919, bytes.length - off)
            got.push(...(await ch.update(bytes.subarray(off, off + n))))
            off += n
          }
          got.push(...(await ch.finish()))
          expect(got).toEqual(want.rows)
          sameStats(ch.rapid!.stats, want.stats!, 'createChunker')
        }
      }
    })
  }

  it('a worker crash or bad candidates during a run: a clear error, no hang; the next run works', async () => {
    // @ts-ignore — the module behind '@cutpoint/web' (same instance: its test hooks)
    const { __rapidFaults } = await import('../../web/dist/web/src/rapid.js')
    const rapid = { criterion: 'ff' as const, workerBlock: 1 }
    __rapidFaults.stage1 = 'crash'
    await expect(cp.chunkAll(d.v0, { workers: 2, rapid })).rejects.toThrow(/cutpoint: worker (failed|exited)/)
    __rapidFaults.stage1 = 'bad-offsets'
    await expect(cp.chunkAll(d.v0, { workers: 2, rapid })).rejects.toThrow(/cutpoint: .*candidate offset \d+ outside positions/)
    // Through createChunker: the failing update rejects, and the chunker is closed afterwards.
    __rapidFaults.stage1 = 'crash'
    const ch = await cp.createChunker({ workers: 1, rapid })
    await expect(ch.update(new Uint8Array(readFileSync(d.v0)))).rejects.toThrow(/worker/)
    await expect(ch.finish()).rejects.toThrow(/closed/)
    expect(__rapidFaults.stage1).toBeUndefined()
    expect(await cp.chunkAll(d.v0, { workers: 2, rapid: { criterion: 'ff', workerBlock: 1, blockSize: block() } })).toEqual(nativeChunks(d.v0).rows)
  })
})

describe('RapidCDC edge lengths', () => {
  it('prefixes of the base file (empty, 1 byte, below MIN, past MAX, hints past the end): the native chunks', async () => {
    const v0 = readFileSync(d.v0)
    for (const n of [0, 1, 100, 2047, 2049, 65537, 200001]) {
      const file = `${d.dir}/prefix-${n}.bin`
      writeFileSync(file, v0.subarray(0, n))
      for (const criterion of CRITERIA) {
        const want = nativeChunks(file, ['--rapid', criterion, '--base', d.recipe])
        let r: cp.RapidResult | undefined
        const got = await cp.chunkAll(new Uint8Array(v0.subarray(0, n)), { workers: THREADS, rapid: { criterion, base: d.recipe, onResult: (x) => (r = x) } })
        expect(got, `${n} bytes, ${criterion}`).toEqual(want.rows)
        sameStats(r!.stats, want.stats!, `${n} bytes, ${criterion}`)
      }
    }
  })
})

describe('RapidCDC memory', () => {
  it('a 160 MiB stream: the wasm memory stays bounded (about one block plus MAX and a piece)', async () => {
    // @ts-ignore — the loader behind '@cutpoint/web' (same module instance: the memory in use)
    const { loadWasm } = await import('../../web/dist/common/wasm.js')
    const w = await loadWasm()
    const before = w.memory.buffer.byteLength
    const piece = new Uint8Array(readFileSync(d.v0)) // 6 MiB of random bytes, repeated
    const total = 160 << 20
    const stream = new ReadableStream<Uint8Array>({
      start(ctl) {
        for (let off = 0; off < total; off += piece.length) ctl.enqueue(piece.subarray(0, Math.min(piece.length, total - off)))
        ctl.close()
      },
    })
    const it = cp.chunk(stream, { workers: THREADS, rapid: { criterion: 'ff+rwt' } })
    let bytes = 0
    for await (const c of it) bytes += c.length
    expect(bytes).toBe(total)
    // Repeats of the same bytes: after the first copy nearly every chunk comes from a hint.
    expect(it.rapid!.stats.hintedChunks / it.rapid!.stats.chunks).toBeGreaterThan(0.9)
    const grown = w.memory.buffer.byteLength - before
    expect(grown, `wasm memory grew by ${grown} bytes`).toBeLessThan(48 << 20)
    // Control (this is the memory in use): one 64 MiB piece does grow it.
    const big = new Uint8Array(64 << 20)
    await cp.chunkAll(big, { segmentSize: big.length, rapid: { criterion: 'ff' } })
    expect(w.memory.buffer.byteLength - before).toBeGreaterThan(64 << 20)
  })
})

describe('RapidCDC hint caches and tables', () => {
  for (const criterion of CRITERIA) {
    it(`${criterion}: a cache written natively loads here; the cache written here loads natively`, async () => {
      // Native: v0 then v1 through one cache file.
      const want = nativeChunks(d.v1, ['--rapid', criterion, '--hints', copy(d.cache[criterion], `${d.dir}/n.hints`)])
      expect(want.stats!.fromCache).toBeGreaterThan(100)
      const file = copy(d.cache[criterion], `${d.dir}/js.hints`)
      const it = cp.chunk(d.v1, { workers: THREADS, rapid: { criterion, cache: file } })
      expect(await collect(it)).toEqual(want.rows)
      sameStats(it.rapid!.stats, want.stats!, 'cache')
      expect(it.rapid!.hintsLoaded).toBe(want.stats!.fromCache)
      expect(it.rapid!.cacheBytes).toBe(readFileSync(file).length)
      // The JS cache (after v1) equals the native one (after v1), byte for byte, and loads natively.
      expect(Buffer.compare(readFileSync(file), readFileSync(`${d.dir}/n.hints`))).toBe(0)
      const again = nativeChunks(d.v2, ['--rapid', criterion, '--hints', file])
      expect(again.stats!.fromCache).toBe(it.rapid!.tableSize)
      expect(again.stats!.hits[0]).toBeGreaterThan(0)
    })
  }

  it('a table carried across calls equals the native run through a cache file', async () => {
    for (const criterion of ['ff', 'ff+rwt+fpt'] as const) {
      const table = cp.createHintTable({ hintList: 2 })
      try {
        const first = await cp.chunkAll(d.v0, { workers: THREADS, rapid: { criterion, table } })
        expect(first).toEqual(nativeChunks(d.v0).rows) // no hints yet: the regular chunks
        expect(table.size).toBeGreaterThan(100)
        let r: cp.RapidResult | undefined
        const second = await cp.chunkAll(d.v1, { workers: THREADS, rapid: { criterion, table, onResult: (x) => (r = x) } })
        const want = nativeChunks(d.v1, ['--rapid', criterion, '--hints', copy(d.cache[criterion], `${d.dir}/t.hints`)])
        expect(second).toEqual(want.rows)
        sameStats(r!.stats, want.stats!, criterion)
        // The exported table is the native cache after v1.
        expect(Buffer.compare(Buffer.from(table.exportCache()), readFileSync(`${d.dir}/t.hints`))).toBe(0)
      } finally {
        table.free()
      }
    }
  })

  it('a cache of another profile, fingerprint or format version is rejected with a clear error, and left as it was', async () => {
    const before = readFileSync(d.wrongCache)
    await expect(cp.chunkAll(d.v1, { workers: THREADS, rapid: { criterion: 'ff', cache: d.wrongCache } })).rejects.toThrow(
      /hint cache .*made with profile rabin:4k:8k:12k; this run uses gear:2k:8k:64k .*not used/,
    )
    expect(Buffer.compare(readFileSync(d.wrongCache), before)).toBe(0)
    // The same bytes through a table.
    const t = cp.createHintTable()
    expect(() => t.loadCache(new Uint8Array(before))).toThrow(/profile rabin:4k:8k:12k/)
    expect(t.size).toBe(0)
    // blake3 cache, sha256 run.
    await expect(cp.chunkAll(d.v1, { hash: 'sha256', rapid: { criterion: 'ff', cache: copy(d.cache.ff, `${d.dir}/s.hints`) } })).rejects.toThrow(/blake3 fingerprints; this run uses sha256/)
    // Another format version (byte 16 is the version's low byte) and a damaged file.
    const bytes = new Uint8Array(readFileSync(d.cache.ff))
    const v2 = bytes.slice()
    v2[16] = 2
    expect(() => t.loadCache(v2)).toThrow(/format version 2; this build reads version 1/)
    const bad = bytes.slice()
    bad[bad.length - 40] ^= 1
    expect(() => t.loadCache(bad)).toThrow(/checksum/)
    expect(t.size).toBe(0)
    expect(t.loadCache(bytes)).toBeGreaterThan(100)
    // A table of another profile given as rapid.table.
    await expect(cp.chunkAll(d.v1, { profile: 'gear:4k:8k:64k', rapid: { criterion: 'ff', table: t } })).rejects.toThrow(/profile gear:2k:8k:64k.*gear:4k:8k:64k/)
    // The table is usable afterwards (it was given back).
    expect(t.size).toBeGreaterThan(100)
    t.free()
    // A recipe of another profile.
    await expect(cp.chunkAll(d.v1, { profile: 'rabin:4k:8k:12k', rapid: { criterion: 'ff', base: d.recipe } })).rejects.toThrow(/base recipe.*profile gear:2k:8k:64k/)
  })

  it('a bounded cache keeps the most recently used hints', async () => {
    const file = `${d.dir}/small.hints`
    let r: cp.RapidResult | undefined
    await cp.chunkAll(d.v0, { workers: THREADS, rapid: { criterion: 'ff', cache: file, cacheMaxBytes: 8192, onResult: (x) => (r = x) } })
    expect(readFileSync(file).length).toBeLessThanOrEqual(8192)
    expect(r!.cacheBytes).toBe(readFileSync(file).length)
    const t = cp.createHintTable()
    const n = t.loadCache(new Uint8Array(readFileSync(file)))
    expect(n).toBeGreaterThan(10)
    expect(n).toBeLessThan(r!.tableSize)
    t.free()
  })

  it('options are checked', async () => {
    await expect(cp.chunkAll(d.v0, { rapid: { criterion: 'fast' as any } })).rejects.toThrow(/unknown rapid.criterion 'fast'/)
    await expect(cp.chunkAll(d.v0, { hash: 'none', rapid: { criterion: 'ff' } })).rejects.toThrow(/fingerprints/)
    await expect(cp.chunkAll(d.v0, { rapid: { criterion: 'ff', hintList: 0 } })).rejects.toThrow(/hintList/)
    await expect(cp.chunkAll(d.v0, { rapid: { criterion: 'ff', base: `${d.dir}/nope.recipe` } })).rejects.toThrow(/nope\.recipe/)
    await expect(cp.chunkAll(d.v0, { rapid: { criterion: 'ff', base: new Uint8Array([1, 2, 3]) } })).rejects.toThrow(/recipe/)
    await expect(cp.chunkAll(`${d.dir}/nope.bin`, { rapid: { criterion: 'ff' } })).rejects.toThrow(/nope\.bin/)
  })
})

describe('RapidCDC in Deno', () => {
  it('path input with a base recipe and a file cache: the native chunks', () => {
    const want = nativeChunks(d.v1, ['--rapid', 'ff+rwt', '--base', d.recipe])
    const cache = copy(d.cache['ff+mt'], `${d.dir}/deno.hints`)
    const wantCache = nativeChunks(d.v1, ['--rapid', 'ff+mt', '--hints', copy(d.cache['ff+mt'], `${d.dir}/deno-n.hints`)])
    const r = spawnSync(`${root}node_modules/.bin/deno`, ['run', '--allow-read', '--allow-write', 'tests/deno/rapid.js', d.v1, d.recipe, cache], {
      cwd: root,
      env: { ...process.env, DENO_NO_UPDATE_CHECK: '1', NO_COLOR: '1' },
      encoding: 'utf8',
      timeout: 120_000,
      maxBuffer: 1 << 28,
    })
    expect(r.status, r.stderr).toBe(0)
    const out = JSON.parse(r.stdout)
    expect(out.base).toEqual(want.rows)
    expect(out.cache).toEqual(wantCache.rows)
    expect(out.hintsLoaded).toBe(wantCache.stats!.fromCache)
    expect(Buffer.compare(readFileSync(cache), readFileSync(`${d.dir}/deno-n.hints`))).toBe(0)
  })
})
