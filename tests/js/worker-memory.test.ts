// A worker's wasm memory (worker/handler.ts): it never shrinks, so what a worker puts there at
// once is what it keeps for the rest of the page's life. A Blob's 16 MiB span is scanned in
// pieces (SCAN_PIECE) and a hash job's bytes copied in a piece (HASH_PIECE) at a time, with the
// same candidates and digests as one scan and one hash of the whole slice in wasm memory.
// Its own file: the wasm instance the Handler loads is measured from its start.
import { describe, expect, it } from 'vitest'
// The built worker (web/dist: its wasm next to it); this file loads no other wasm instance.
import { Handler, HASH_PIECE, SCAN_PIECE } from '../../web/dist/worker/handler.js'
import { loadWasm } from '../../web/dist/common/wasm.js'
import type { HashRes, Request, SourceDesc, Stage1Res } from '../../common/protocol.ts'
import { randomBytes } from './vectors.mjs'

const MiB = 1 << 20
const SPAN = 16 * MiB
const LEAD = 64 << 10

describe("a worker's wasm memory", () => {
  it('holds a piece of a Blob span, not the span; the candidates and digests equal those of the whole slice in wasm memory', async () => {
    expect(SCAN_PIECE).toBeLessThan(SPAN)
    expect(HASH_PIECE).toBeLessThan(SPAN)
    const wasm = await loadWasm()
    const data = randomBytes(SPAN + 3 * MiB + 12_345, 21)
    const init = (source: SourceDesc): Request => ({ type: 'cutpoint:init', id: 1, flavor: wasm.flavor, profile: 'gear:2k:8k:64k', backend: '', hash: 'blake3', hashImpl: 'wasm', capacity: SPAN + LEAD, source })
    // Two slices of the span (the second with its lead, as chunk() reads a Blob once), then a
    // hash job of chunks across the first (bytes sent with it, and read from the Blob).
    const jobs: Request[] = [
      { type: 'cutpoint:stage1', id: 2, start: 0, a: 0, b: SPAN, lane: 0 },
      { type: 'cutpoint:stage1', id: 3, start: SPAN - LEAD, a: SPAN, b: data.length, lane: 0 },
      { type: 'cutpoint:hash', id: 4, start: 5000, lengths: Uint32Array.from({ length: 300 }, (_, i) => 40_000 + 97 * i) },
      { type: 'cutpoint:hash', id: 5, start: 777, lengths: Uint32Array.from({ length: 40 }, (_, i) => 65_536 - i), bytes: data.slice(777, 777 + 40 * 65_536 - 780) },
    ]
    const run = async (h: Handler) => {
      const out: (Stage1Res | HashRes)[] = []
      for (const j of jobs) out.push((await h.handle(structuredClone(j))).res as Stage1Res | HashRes)
      await h.close()
      return out
    }
    const before = wasm.memory.buffer.byteLength
    const blob = new Handler()
    await blob.handle(init({ kind: 'blob', blob: new Blob([data]) }))
    const got = await run(blob)
    // A stage-1 buffer of a piece (4 MiB), its bitmaps, the hasher's 1 MiB: far below one span
    // (the whole slice and a hasher of a 12 MiB job took 2.5 spans and more).
    const grown = wasm.memory.buffer.byteLength - before
    expect(grown).toBeLessThan(SCAN_PIECE + HASH_PIECE + 4 * MiB)

    // The whole slice in wasm memory: a SharedArrayBuffer source is copied in slice by slice.
    const sab = new Uint8Array(new SharedArrayBuffer(data.length))
    sab.set(data)
    const whole = new Handler()
    await whole.handle(init({ kind: 'shared', bytes: sab }))
    const ref = await run(whole)
    for (let i = 0; i < 2; i++) {
      const [g, r] = [got[i] as Stage1Res, ref[i] as Stage1Res]
      expect(r.strict.length).toBeGreaterThan(100)
      expect(Array.from(g.strict)).toEqual(Array.from(r.strict))
      expect(Array.from(g.loose)).toEqual(Array.from(r.loose))
    }
    for (let i = 2; i < 4; i++) {
      const [g, r] = [got[i] as HashRes, ref[i] as HashRes]
      expect(g.digests.length).toBe(32 * (jobs[i] as { lengths: Uint32Array }).lengths.length)
      expect(Buffer.from(g.digests).equals(Buffer.from(r.digests))).toBe(true)
    }
    // And against the core's one-shot digest of a chunk (the last of the first hash job).
    const h = jobs[2] as { start: number; lengths: Uint32Array }
    const last = h.lengths.length - 1
    const off = h.start + h.lengths.slice(0, last).reduce((a, b) => a + b, 0)
    expect(Buffer.from((got[2] as HashRes).digests.subarray(32 * last)).equals(Buffer.from(wasm.mod.digest('blake3', data.subarray(off, off + h.lengths[last]))))).toBe(true)
  })
})
