// Test data that compresses like text (tests/js/compression*.test.ts).

/** Text-like bytes (words from a small vocabulary in a seeded order): compressible, no repeats at chunk scale. */
export function textData(n: number, seed: number): Buffer {
  const words = 'the of and a to in is that for it with as on be at by this function const return export import interface chunk store pack frame recipe namespace digest version'.split(' ')
  const out = Buffer.alloc(n)
  let x = seed >>> 0 || 1
  let at = 0
  while (at < n) {
    x ^= x << 13
    x ^= x >>> 17
    x ^= x << 5
    x >>>= 0
    at += out.write(words[x % words.length] + (x & 0x10000 ? '\n' : ' '), at)
  }
  return out
}
