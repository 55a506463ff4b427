// The hex helpers the push loop runs per chunk id: a round trip over every byte value, and
// strict decoding (parseInt's habit of reading a valid prefix, '1g' as 1, is refused).
import { describe, expect, it } from 'vitest'
import { hex, hexDigests, unhex, unhexInto } from '../../web/src/hex.ts'

describe('hex', () => {
  it('round-trips every byte value, in batches and one by one', () => {
    const all = Uint8Array.from({ length: 256 }, (_, i) => i)
    const hs = hexDigests(all, 8)
    expect(hs.join('')).toBe(Array.from(all, (b) => b.toString(16).padStart(2, '0')).join(''))
    const back = new Uint8Array(256)
    hs.forEach((h, i) => unhexInto(h, back, 32 * i))
    expect(back).toEqual(all)
    expect(unhex(hex(all))).toEqual(all)
    expect(unhex('ABcdEF')).toEqual(new Uint8Array([0xab, 0xcd, 0xef]))
  })

  it('refuses what is not hex, with a message', () => {
    for (const bad of ['1g', 'g1', '0x', ' 1', '1 ', '\u00e91', '12\u0661\u0662']) expect(() => unhex(bad), bad).toThrow(/not a hex string/)
    expect(() => unhex('123')).toThrow(/odd-length/)
    const out = new Uint8Array(2)
    expect(() => unhexInto('zz00', out, 0)).toThrow(/not a hex string/)
  })
})
