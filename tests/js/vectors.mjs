// Regenerates the inputs of tests/vectors/*.json as their `_comment` describes (shared by the
// Node, Deno and browser tests). xorshift64* on two 32-bit halves (no BigInt: fast enough for MBs).

const C_HI = 0x2545f491
const C_LO = 0x4f6cdd1d

/** High 32 bits of the 64-bit product of two uint32. */
function mulhi(a, b) {
  const a0 = a & 0xffff, a1 = a >>> 16, b0 = b & 0xffff, b1 = b >>> 16
  const t0 = a0 * b0
  const t1 = a1 * b0 + Math.floor(t0 / 65536)
  const t2 = a0 * b1 + (t1 % 65536)
  return (a1 * b1 + Math.floor(t1 / 65536) + Math.floor(t2 / 65536)) >>> 0
}

/** Top 32 bits of each xorshift64* output v, for `n` outputs from `seed` (a number < 2^53 or a BigInt). */
function* xorshiftHi(seed, n) {
  const s = BigInt(seed)
  let hi = Number((s >> 32n) & 0xffffffffn) >>> 0
  let lo = Number(s & 0xffffffffn) >>> 0
  for (let i = 0; i < n; i++) {
    // s ^= s >> 12
    lo = (lo ^ ((lo >>> 12) | (hi << 20))) >>> 0
    hi = (hi ^ (hi >>> 12)) >>> 0
    // s ^= s << 25
    hi = (hi ^ ((hi << 25) | (lo >>> 7))) >>> 0
    lo = (lo ^ (lo << 25)) >>> 0
    // s ^= s >> 27
    lo = (lo ^ ((lo >>> 27) | (hi << 5))) >>> 0
    hi = (hi ^ (hi >>> 27)) >>> 0
    // v = s * C (mod 2^64): its high word
    yield (Math.imul(hi, C_LO) + Math.imul(lo, C_HI) + mulhi(lo, C_LO)) >>> 0
  }
}

/** The bytes of a case's `input` object {generator, seed, length[, period | byte]}. */
export function generate(input) {
  const n = input.length
  const out = new Uint8Array(n)
  switch (input.generator) {
    case 'fill':
      return out.fill(input.byte)
    case 'xorshift64star': {
      let i = 0
      for (const v of xorshiftHi(input.seed, n)) out[i++] = v >>> 24
      return out
    }
    case 'lowentropy': {
      let i = 0
      for (const v of xorshiftHi(input.seed, n)) out[i++] = 0x61 + (v >>> 30)
      return out
    }
    case 'repeat': {
      const p = Math.min(input.period, n)
      let i = 0
      for (const v of xorshiftHi(input.seed, p)) out[i++] = v >>> 24
      for (; i < n; i++) out[i] = out[i - p]
      return out
    }
    default:
      throw new Error(`unknown generator ${input.generator}`)
  }
}

/** Deterministic pseudo-random bytes for tests that need more than the vectors (seeded). */
export function randomBytes(n, seed = 1) {
  return generate({ generator: 'xorshift64star', seed, length: n })
}

/** Compares chunks to a case; returns null or a description of the first difference. */
export function diff(chunks, c, alg = 'blake3') {
  const cuts = chunks.map((x) => x.offset + x.length)
  if (cuts.length !== c.cuts.length) return `${cuts.length} chunks, expected ${c.cuts.length}`
  for (let i = 0; i < cuts.length; i++) {
    if (cuts[i] !== c.cuts[i]) return `cut ${i} at ${cuts[i]}, expected ${c.cuts[i]}`
    if (i > 0 && chunks[i].offset !== c.cuts[i - 1]) return `chunk ${i} starts at ${chunks[i].offset}`
    if (alg !== 'none' && chunks[i].hash !== c[alg][i]) return `${alg} of chunk ${i}: ${chunks[i].hash}, expected ${c[alg][i]}`
  }
  return null
}
