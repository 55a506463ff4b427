// Novel chunks read back for their packs (web/src/client/push.ts `stagePack`): contiguous chunks
// in one read, except across the inputs of `pushMany` (a reader's `extent`): a small file's
// bytes, kept from its worker's answer, are then read as a view (ManyReader), where a read across
// inputs was a new buffer and a copy of every novel byte on a page's thread.
import { beforeAll, describe, expect, it } from 'vitest'
// The built library (its wasm is found from web/dist): `npm run build -w web` first.
import { init } from '../../web/dist/web/src/runtime.js'
import { PushRun, type PushContext } from '../../web/dist/web/src/client/push.js'
import type { RangeReader } from '../../web/dist/web/src/client/input.js'

const PROFILE = 'gear:2k:8k:64k'

beforeAll(async () => {
  await init()
})

/** A PushRun with framed packs whose reader records its reads; inputs of `sizes` end to end (`extent` only if `withExtent`). */
function runWith(sizes: number[], withExtent: boolean): { run: PushRun; reads: [number, number][] } {
  const ctx = { http: {} as PushContext['http'], profile: PROFILE, hash: 'blake3', chunkOptions: async () => ({ opts: {}, release() {} }) } as PushContext
  const run = new PushRun(ctx, { name: 'x' } as never, { name: 'x', profile: PROFILE, maxChunk: 64 << 10 }, new AbortController().signal, 0)
  run.setLimits(undefined, {})
  const ends = sizes.map((_, i) => sizes.slice(0, i + 1).reduce((a, b) => a + b, 0))
  const reads: [number, number][] = []
  const reader: RangeReader = {
    read: async (off, len) => {
      reads.push([off, len])
      return new Uint8Array(len)
    },
    unchanged: async () => {},
    close: async () => {},
  }
  if (withExtent) reader.extent = (off) => ends.find((e) => e > off) ?? off
  run.reader = reader
  return { run, reads }
}

/** Novel chunks at [off, off + len) each, with made-up ids. */
function novel(spans: [number, number][]) {
  const raw = new Uint8Array(32 * spans.length).map((_, i) => i)
  return spans.map(([off, len], i) => ({ off, len, raw, at: 32 * i }))
}

describe('stagePack reads novel chunks back', () => {
  // Three inputs of 5,000, 3,000 and 7,000 bytes; every chunk novel, all contiguous.
  const sizes = [5000, 3000, 7000]
  const chunks: [number, number][] = [
    [0, 2000],
    [2000, 3000],
    [5000, 3000],
    [8000, 4000],
    [12000, 3000],
  ]

  it('within one input of pushMany at a time (no read across inputs)', async () => {
    const { run, reads } = runWith(sizes, true)
    await run.stagePack(novel(chunks))
    expect(reads).toEqual([
      [0, 5000],
      [5000, 3000],
      [8000, 7000],
    ])
    await run.close()
  })

  it('one input (push): contiguous chunks in one read', async () => {
    const { run, reads } = runWith(sizes, false)
    await run.stagePack(novel(chunks))
    expect(reads).toEqual([[0, 15000]])
    // A gap between chunks starts a new read.
    reads.length = 0
    await run.stagePack(novel([[20000, 100], [20100, 100], [30000, 50]]))
    expect(reads).toEqual([[20000, 200], [30000, 50]])
    await run.close()
  })
})
