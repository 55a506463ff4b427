// The push's id table (web/src/client/ids.ts) against a Map of hex strings, the structure it
// replaced: the same answers for random ids, repeats, ids that share their first 8 or 31 bytes
// (what a hostile base recipe could send), through many growths; flags and first places kept.
import { describe, expect, it } from 'vitest'
import { randomBytes } from 'node:crypto'
import { hex } from '../../web/src/hex.ts'
import { BASE, IdTable, KNOWN, NOVEL } from '../../web/src/client/ids.ts'

describe('IdTable', () => {
  it('answers as a Map of hex ids would, through growth, repeats and shared prefixes', () => {
    const t = new IdTable(16)
    const ref = new Map<string, { i: number; off: number; len: number }>()
    // Random ids, then ids equal but for their last byte, then equal but for byte 8.
    const raw = new Uint8Array(40_000 * 32)
    raw.set(randomBytes(20_000 * 32))
    const prefix = randomBytes(32)
    // Byte 30 out of the first kind's range (k >> 8 ≤ 117): else one id of each kind could be the
    // same (about 2% of runs), and the count below one short.
    prefix[30] = 0xff
    for (let k = 20_000; k < 30_000; k++) {
      raw.set(prefix, k * 32)
      raw[k * 32 + 31] = k & 0xff
      raw[k * 32 + 30] = k >> 8
    }
    for (let k = 30_000; k < 40_000; k++) {
      raw.set(prefix, k * 32)
      raw[k * 32 + 8] = k & 0xff
      raw[k * 32 + 9] = k >> 8
    }
    // Every id twice (the second time at another offset: the first place is kept), in an order
    // that interleaves the kinds.
    const order = [...Array(80_000).keys()].map((x) => (x * 7919) % 40_000)
    let off = 0
    const wrong: string[] = []
    for (const k of order) {
      const h = hex(raw.subarray(k * 32, k * 32 + 32))
      const i = t.add(raw, k * 32)
      t.place(i, off, k + 1)
      const want = ref.get(h)
      if (want ? i !== want.i : i !== ref.size) wrong.push(`add ${h}: ${i}`)
      if (!want) ref.set(h, { i, off, len: k + 1 })
      off += k + 1
    }
    expect(t.count).toBe(ref.size)
    expect(t.count).toBe(new Set(order).size)
    for (const [h, want] of ref) {
      const i = t.find(Buffer.from(h, 'hex'), 0)
      if (i !== want.i || t.off(i) !== want.off || t.len(i) !== want.len || hex(t.ids.subarray(i * 32, i * 32 + 32)) !== h) wrong.push(`find ${h}: ${i}`)
    }
    expect(wrong.slice(0, 5)).toEqual([])
    // Ids never added are not found, including neighbours of added ones.
    const strays = Array.from({ length: 1000 }, () => t.find(randomBytes(32), 0))
    expect(strays.filter((i) => i !== -1)).toEqual([])
    const near = Buffer.from(prefix)
    near[31] ^= 0xff
    near[30] = 0xff
    expect(t.find(near, 0)).toBe(-1)
  })

  it('keeps flags; ids from a recipe are added unplaced (offset -1)', () => {
    const t = new IdTable()
    const base = randomBytes(5 * 32)
    t.addAll(base, KNOWN | BASE)
    t.addAll(base.subarray(0, 64), KNOWN)
    expect(t.count).toBe(5)
    for (let k = 0; k < 5; k++) {
      const i = t.find(base, k * 32)
      expect(t.flags[i]).toBe(KNOWN | BASE)
      expect(t.off(i)).toBe(-1)
    }
    const i = t.find(base, 64)
    t.place(i, 100, 7)
    t.flags[i] |= NOVEL
    t.place(i, 200, 9)
    expect([t.off(i), t.len(i), t.flags[i]]).toEqual([100, 7, KNOWN | BASE | NOVEL])
    expect(() => t.add(base.subarray(0, 31), 0)).toThrow(/32 bytes/)
  })

  it('reserve: room made once (ids already in kept), no growth while the reserved ids are added', () => {
    const t = new IdTable()
    const raw = randomBytes(20_000 * 32)
    for (let k = 0; k < 100; k++) t.place(t.add(raw, k * 32), k, k + 1)
    t.reserve(20_000)
    // A growth replaces the arrays: the same one after every add means none happened.
    const ids = t.ids
    for (let k = 0; k < 20_000; k++) t.place(t.add(raw, k * 32), k, k + 1)
    expect(t.ids).toBe(ids)
    expect(t.count).toBe(20_000)
    for (let k = 0; k < 20_000; k += 997) {
      const i = t.find(raw, k * 32)
      expect([i, t.off(i), t.len(i)]).toEqual([k, k, k + 1])
    }
    // Less than it holds: nothing changes; and it still grows past the reserved room.
    t.reserve(10)
    expect(t.ids).toBe(ids)
    const more = randomBytes(20_000 * 32)
    for (let k = 0; k < 20_000; k++) t.add(more, k * 32)
    expect(t.count).toBe(40_000)
    expect(t.find(raw, 5 * 32)).toBe(5)
    expect(t.find(more, 5 * 32)).toBe(20_005)
  })
})
