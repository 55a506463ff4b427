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

// Nibble values of char codes (-1: not a hex digit).
const NIB = new Int8Array(128).fill(-1)
for (let i = 0; i < 16; i++) {
  NIB['0123456789abcdef'.charCodeAt(i)] = i
  NIB['0123456789ABCDEF'.charCodeAt(i)] = i
}

/** The bytes of a hex string (even length, 0-9 a-f A-F); throws on anything else. */
export function unhex(h: string): Uint8Array {
  if (h.length % 2 !== 0) throw new Error(`cutpoint: odd-length hex string`)
  const out = new Uint8Array(h.length / 2)
  unhexInto(h, out, 0)
  return out
}

/**
 * Writes the bytes of hex string `h` into `out` at `at` (no new array: the push loop decodes
 * every chunk id this way, where `parseInt` per byte was its largest cost). Throws on an odd
 * length or a character that is not a hex digit.
 */
export function unhexInto(h: string, out: Uint8Array, at: number): void {
  const n = h.length >> 1
  if (h.length !== 2 * n) throw new Error(`cutpoint: odd-length hex string`)
  for (let i = 0; i < n; i++) {
    const a = h.charCodeAt(2 * i)
    const b = h.charCodeAt(2 * i + 1)
    const hi = a < 128 ? NIB[a] : -1
    const lo = b < 128 ? NIB[b] : -1
    if ((hi | lo) < 0) throw new Error(`cutpoint: not a hex string: ${h.slice(0, 70)}`)
    out[at + i] = (hi << 4) | lo
  }
}
