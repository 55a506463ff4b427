// Bad input as a new user would give it (issue #19): every option type-checked at the API
// boundary with a message that names the option and what it got; tiny segment sizes bounded;
// a directory, a repeated profile key and a file that is not a recipe each get a clear message.
// No test hook here: the library's defaults (the 64 KiB smallest job included) are what is tested.
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import * as cp from '@cutpoint/web'
// @ts-ignore — plain ESM shared with Deno and the browser
import { randomBytes } from './vectors.mjs'

let dir: string
beforeAll(async () => {
  await cp.init()
  dir = mkdtempSync(`${tmpdir()}/cutpoint-options-`)
})
afterAll(() => rmSync(dir, { recursive: true, force: true }))

const any = (o: unknown) => o as any
const esc = (s: string) => s.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')

describe('options are type-checked before they reach WebAssembly', () => {
  it('profile: a non-string is named, never "memory access out of bounds"', async () => {
    const data = randomBytes(100_000)
    const cases: [unknown, string][] = [
      [123, 'the number 123'],
      [{}, 'an object'],
      [true, 'the boolean true'],
      [null, 'null'],
      [['gear:2k:8k:64k'], 'an array (1 item)'],
    ]
    for (const [profile, got] of cases) {
      const want = new RegExp(`^cutpoint: profile must be a string like 'gear:2k:8k:64k' \\(got ${esc(got)}\\)$`)
      await expect(cp.chunkAll(data, any({ profile })), String(profile)).rejects.toThrow(want)
      await expect(cp.createChunker(any({ profile })), String(profile)).rejects.toThrow(want)
      await expect(cp.chunkAll(data, any({ profile, rapid: { criterion: 'ff' } })), String(profile)).rejects.toThrow(want)
      expect(() => cp.parseProfile(any(profile))).toThrow(want)
      expect(() => cp.createHintTable(any({ profile }))).toThrow(want)
    }
    await expect(cp.createChunker(any({ profile: 42 }))).rejects.toThrow(/\(got the number 42\)/)
  })

  it('every other option: the option and the type it got', async () => {
    const data = randomBytes(10_000)
    const cases: [Record<string, unknown>, string][] = [
      [{ workers: '4' }, "workers must be an integer in 0..256 (got the string '4')"],
      [{ workers: 2.5 }, 'workers must be an integer in 0..256 (got the number 2.5)'],
      [{ span: '1m' }, "span must be an integer in 1..1 GiB (got the string '1m')"],
      [{ span: 0 }, 'span must be an integer in 1..1 GiB (got the number 0)'],
      [{ span: 65536, segmentSize: 131072 }, 'span (65536) and its old name segmentSize (131072) differ: give one'],
      [{ segmentSize: '1m' }, "segmentSize must be an integer in 1..1 GiB (got the string '1m')"],
      [{ segmentSize: 0 }, 'segmentSize must be an integer in 1..1 GiB (got the number 0)'],
      [{ laneSegment: -1 }, 'laneSegment must be an integer in 0..1 GiB (got the number -1)'],
      [{ hash: 5 }, "hash must be one of 'blake3', 'sha256', 'none' (got the number 5)"],
      [{ hash: 'md5' }, 'unknown hash \'md5\' (known: blake3, sha256, none)'],
      [{ hashImpl: true }, "hashImpl must be one of 'auto', 'wasm', 'webcrypto' (got the boolean true)"],
      [{ backend: 1 }, "backend must be a string like 'simd128' (got the number 1)"],
      [{ wasm: 2 }, "wasm must be one of 'simd128', 'plain', 'auto' (got the number 2)"],
      [{ hashBatch: 0 }, 'hashBatch must be an integer in 1..4 GiB (got the number 0)'],
      [{ hashBatch: NaN }, 'hashBatch must be an integer in 1..4 GiB (got the number NaN)'],
      [{ readOnce: 'yes' }, "readOnce must be true or false (got the string 'yes')"],
      [{ pool: {} }, 'pool must come from createPool() (got an object)'],
      [{ rapid: 'ff' }, "rapid must be an object like { criterion: 'ff+rwt' } (got the string 'ff')"],
      [{ rapid: {} }, 'rapid.criterion is required'],
      [{ rapid: { criterion: 5 } }, "rapid.criterion must be one of 'ff', 'ff+mt', 'ff+rwt', 'ff+rwt+fpt' (got the number 5)"],
      [{ rapid: { criterion: 'ff', hintList: '2' } }, "rapid.hintList must be an integer in 1..64 (got the string '2')"],
      [{ rapid: { criterion: 'ff', blockSize: 1e9 + 0.5 } }, 'rapid.blockSize must be an integer in 64..1 GiB'],
      [{ rapid: { criterion: 'ff', workerBlock: 0 } }, 'rapid.workerBlock must be an integer in 1..2^53 (got the number 0)'],
      [{ rapid: { criterion: 'ff', cacheMaxBytes: '1m' } }, "rapid.cacheMaxBytes must be a number of bytes, at least 1024 (got the string '1m')"],
      [{ rapid: { criterion: 'ff', cache: 5 } }, 'rapid.cache must be a string (a file path; an IndexedDB name in browsers), true or false (got the number 5)'],
      [{ rapid: { criterion: 'ff', base: 5 } }, 'rapid.base must be a Uint8Array, ArrayBuffer, Blob, URL or string (got the number 5)'],
      [{ rapid: { criterion: 'ff', table: {} } }, 'rapid.table must come from createHintTable() (got an object)'],
      [{ rapid: { criterion: 'ff', recipe: 1 } }, 'rapid.recipe must be true or false (got the number 1)'],
      [{ rapid: { criterion: 'ff', onResult: 'log' } }, "rapid.onResult must be a function (got the string 'log')"],
    ]
    for (const [opts, msg] of cases) {
      const want = new RegExp(`^cutpoint: ${esc(msg)}`)
      await expect(cp.chunkAll(data, any(opts)), JSON.stringify(opts)).rejects.toThrow(want)
      await expect(cp.createChunker(any(opts)), JSON.stringify(opts)).rejects.toThrow(want)
    }
    for (const opts of [null, 'gear:2k:8k:64k', 7]) {
      await expect(cp.chunkAll(data, any(opts))).rejects.toThrow(/^cutpoint: options must be an object \(got /)
    }
    await expect(cp.createPool(any({ workers: '2' }))).rejects.toThrow("cutpoint: workers must be an integer in 0..256 (got the string '2')")
    await expect(cp.init(any({ wasm: 5 }))).rejects.toThrow("cutpoint: wasm must be one of 'simd128', 'plain', 'auto' (got the number 5)")
    expect(() => cp.createHintTable(any({ hash: 'none' }))).toThrow(/unknown hash 'none' \(known: blake3, sha256\)/)
    expect(() => cp.createHintTable(any({ hintList: '2' }))).toThrow(/rapid.hintList must be an integer in 1..64 \(got the string '2'\)/)
    expect(() => cp.digest(any('md5'), new Uint8Array(1))).toThrow(/unknown digest algorithm 'md5'/)
    expect(() => cp.digest('blake3', any('abc'))).toThrow(/digest bytes must be a Uint8Array \(got the string 'abc'\)/)
    expect(() => cp.referenceCuts('gear:2k:8k:64k', any([1, 2]))).toThrow(/referenceCuts bytes must be a Uint8Array \(got an array/)
  })
})

describe('a tiny segmentSize is bounded', () => {
  // Was 5.3 s for segmentSize 1 on 200 KB and 1.8 s for 16 on 1 MiB (a job per byte(s)); jobs
  // are now at least 64 KiB (MIN_SEGMENT_SIZE), same chunks.
  it('segmentSize 1 and 16 take about as long as the default, with the same chunks', async () => {
    const data = randomBytes(1 << 20)
    const want = await cp.chunkAll(data, { workers: 2 })
    for (const segmentSize of [1, 16, 4099]) {
      for (const workers of [0, 2]) {
        const t = performance.now()
        const got = await cp.chunkAll(data, { workers, segmentSize })
        const ms = performance.now() - t
        expect(got, `segmentSize ${segmentSize} workers ${workers}`).toEqual(want)
        expect(ms, `segmentSize ${segmentSize} workers ${workers}: ${ms} ms`).toBeLessThan(5000)
      }
      const t = performance.now()
      const ch = await cp.createChunker({ workers: 2, segmentSize })
      const got = [...(await ch.update(data)), ...(await ch.finish())]
      expect(got).toEqual(want)
      expect(performance.now() - t).toBeLessThan(5000)
    }
    // RapidCDC reads its input in pieces of the span: bounded too.
    const t = performance.now()
    const r = await cp.chunkAll(data, { workers: 0, segmentSize: 1, rapid: { criterion: 'ff+rwt+fpt' } })
    expect(r).toEqual(want)
    expect(performance.now() - t).toBeLessThan(5000)
    expect(cp.MIN_SPAN).toBe(64 << 10)
    expect(cp.MIN_SEGMENT_SIZE).toBe(cp.MIN_SPAN)
  })
})

describe('clear messages', () => {
  it('a directory given as a path names the path', async () => {
    const want = new RegExp(`^cutpoint: cannot read ${esc(dir)}: it is a directory$`)
    await expect(cp.chunkAll(dir, { workers: 1 })).rejects.toThrow(want)
    await expect(cp.chunkAll(dir, { workers: 0 })).rejects.toThrow(want)
    await expect(cp.chunkAll(dir, { rapid: { criterion: 'ff' } })).rejects.toThrow(want)
  })

  it('a repeated profile key is refused (the core parser), not last-wins', async () => {
    await expect(cp.chunkAll(randomBytes(1000), { profile: 'gear:2k:8k:64k:nc=2,nc=3' })).rejects.toThrow(
      /^cutpoint: invalid profile: key 'nc' is given twice \('nc=2' and 'nc=3'\): give each key once$/,
    )
    expect(() => cp.parseProfile('crc32:2k:8k:64k:window=64,w=32')).toThrow(/key 'window' is given twice/)
  })

  it('a file that is not a recipe says so, naming the path once', async () => {
    const binary = new Uint8Array(4096).map((_, i) => ((i * 2654435761) >>> 11) | 0x80)
    const path = `${dir}/binary.recipe`
    writeFileSync(path, binary)
    const data = randomBytes(100_000)
    for (const base of [binary, path]) {
      const err = await cp.chunkAll(data, { rapid: { criterion: 'ff', base } }).then(
        () => '',
        (e) => String(e?.message),
      )
      expect(err).toMatch(/recipe line 1: not a cutpoint recipe$/)
      expect(err).not.toMatch(/UTF-8|read error/)
      if (typeof base === 'string') expect(err).toBe(`cutpoint: the base recipe ${path}: recipe line 1: not a cutpoint recipe`)
    }
    const table = cp.createHintTable()
    try {
      expect(() => table.addRecipe(binary)).toThrow(/^cutpoint: recipe line 1: not a cutpoint recipe$/)
    } finally {
      table.free()
    }
  })
})
