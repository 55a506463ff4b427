// Lower-case hex of digests. Per chunk this was the coordinator's largest cost (about 0.8 µs a
// digest char by char); a batch is written as char codes into one buffer and decoded once,
// then cut into 64-char strings (about 0.08 µs a digest, Node 20).

const PAIRS = new Uint16Array(256)
for (let i = 0; i < 256; i++) {
  const h = i.toString(16).padStart(2, '0')
  // Both ASCII chars of a byte in one 16-bit slot: the first one at the lower address.
  PAIRS[i] = h.charCodeAt(0) | (h.charCodeAt(1) << 8)
}
const LITTLE = new Uint8Array(new Uint16Array([1]).buffer)[0] === 1
const decoder = new TextDecoder()

/** The hex of one digest. */
export function hex(b: Uint8Array): string {
  return hexDigests(b, 1, b.length)[0]
}

/** The hex strings of `n` consecutive digests of `size` bytes (default 32) in `d`. */
export function hexDigests(d: Uint8Array, n: number, size = 32): string[] {
  const out = new Array<string>(n)
  if (n === 0) return out
  const codes = new Uint16Array(n * size)
  for (let i = 0; i < n * size; i++) {
    const p = PAIRS[d[i]]
    codes[i] = LITTLE ? p : (p >> 8) | ((p & 0xff) << 8)
  }
  const s = decoder.decode(codes)
  const w = 2 * size
  for (let i = 0; i < n; i++) out[i] = s.slice(w * i, w * i + w)
  return out
}

/** The bytes of a hex string (even length, 0-9 a-f A-F); throws on anything else. */
export function unhex(h: string): Uint8Array {
  if (h.length % 2 !== 0) throw new Error(`cutpoint: odd-length hex string`)
  const out = new Uint8Array(h.length / 2)
  for (let i = 0; i < out.length; i++) {
    const v = parseInt(h.substr(2 * i, 2), 16)
    if (Number.isNaN(v)) throw new Error(`cutpoint: not a hex string: ${h.slice(0, 70)}`)
    out[i] = v
  }
  return out
}
