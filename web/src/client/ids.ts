// The push's per-chunk bookkeeping in typed arrays: every distinct 32-byte chunk id it meets
// (the input's, the base recipe's, the journal's), where the id first occurs in the input, and a
// few flags. A Map and a Set keyed by 64-char hex strings took about 0.5 KB a chunk and most of
// the page thread's bookkeeping time; this takes 44 bytes an id plus 4-8 bytes of slots (and up
// to twice that while half-grown), as the native client's HashMap<[u8; 32], _> does.

/** Flags of an id. */
export const KNOWN = 1 // present in the store, or already asked about: not queried (again)
export const BASE = 2 // in the base recipe
export const NOVEL = 4 // the store lacked it and this push sends it

/** A set of 32-byte ids, each with an offset, a length and flags. Ids are never removed. */
export class IdTable {
  /** The ids, 32 bytes each, in insertion order: id `i` is `ids[32 i .. 32 i + 32]`. */
  ids: Uint8Array
  /** First offset in the input, or -1 while the id has not been met in it. */
  private offs: Float64Array
  private lens: Uint32Array
  flags: Uint8Array
  /** Open addressing, linear probing: 0 empty, else index + 1. */
  private slots: Int32Array
  private mask: number
  /** Seeded, so that which ids share a slot cannot be known in advance (a hostile base recipe). */
  private readonly seed = (Math.random() * 0x100000000) >>> 0
  count = 0

  constructor(capacity = 4096) {
    const cap = Math.max(16, capacity)
    this.ids = new Uint8Array(cap * 32)
    this.offs = new Float64Array(cap)
    this.lens = new Uint32Array(cap)
    this.flags = new Uint8Array(cap)
    let n = 32
    while (n < 2 * cap) n *= 2
    this.slots = new Int32Array(n)
    this.mask = n - 1
  }

  /** The index of the id at `raw[at .. at + 32]`, or -1. */
  find(raw: Uint8Array, at: number): number {
    const slots = this.slots
    for (let s = this.slot(raw, at); ; s = (s + 1) & this.mask) {
      const v = slots[s]
      if (v === 0) return -1
      if (this.same(v - 1, raw, at)) return v - 1
    }
  }

  /** The index of the id at `raw[at .. at + 32]`, added (offset -1, flags 0) if absent. */
  add(raw: Uint8Array, at: number): number {
    if (raw.length < at + 32) throw new RangeError('cutpoint: a chunk id is 32 bytes')
    const slots = this.slots
    let s = this.slot(raw, at)
    for (; ; s = (s + 1) & this.mask) {
      const v = slots[s]
      if (v === 0) break
      if (this.same(v - 1, raw, at)) return v - 1
    }
    const i = this.count
    if (i === this.offs.length) {
      this.grow()
      return this.add(raw, at)
    }
    this.ids.set(raw.subarray(at, at + 32), i * 32)
    this.offs[i] = -1
    this.lens[i] = 0
    this.flags[i] = 0
    slots[s] = i + 1
    this.count++
    return i
  }

  /** Adds every id of `raw` (32 bytes each) with `flag`. */
  addAll(raw: Uint8Array, flag: number): void {
    for (let at = 0; at + 32 <= raw.length; at += 32) this.flags[this.add(raw, at)] |= flag
  }

  off(i: number): number {
    return this.offs[i]
  }

  len(i: number): number {
    return this.lens[i]
  }

  /** Records where id `i` first occurs in the input (later occurrences are ignored). */
  place(i: number, off: number, len: number): void {
    if (this.offs[i] >= 0) return
    this.offs[i] = off
    this.lens[i] = len
  }

  private slot(raw: Uint8Array, at: number): number {
    // The ids are digests (uniform), but the base recipe's come from the store: all 32 bytes are
    // mixed with the seed, so that ids sharing a prefix do not share a slot.
    let h = this.seed
    for (let k = at; k < at + 32; k += 4) {
      h = Math.imul(h ^ (raw[k] | (raw[k + 1] << 8) | (raw[k + 2] << 16) | (raw[k + 3] << 24)), 0x9e3779b1)
      h ^= h >>> 15
    }
    h = Math.imul(h, 0x85ebca77)
    h ^= h >>> 13
    return h & this.mask
  }

  private same(i: number, raw: Uint8Array, at: number): boolean {
    const ids = this.ids
    const b = i * 32
    for (let k = 0; k < 32; k++) if (ids[b + k] !== raw[at + k]) return false
    return true
  }

  /**
   * Room for `n` ids without growing: a grow rehashes every id in one go (8,192 ids: 65 ms of a
   * page's thread in a CDP profile of a 10,000-file push, loaded machine); reserved while the
   * table is nearly empty it costs next to nothing.
   */
  reserve(n: number): void {
    let cap = this.offs.length
    while (cap < n) cap *= 2
    if (cap > this.offs.length) this.grow(cap)
  }

  private grow(to = this.offs.length * 2): void {
    const cap = to
    const ids = new Uint8Array(cap * 32)
    ids.set(this.ids)
    // A Novel list may still hold the old array: ids never change, so it stays right.
    this.ids = ids
    const offs = new Float64Array(cap)
    offs.set(this.offs)
    this.offs = offs
    const lens = new Uint32Array(cap)
    lens.set(this.lens)
    this.lens = lens
    const flags = new Uint8Array(cap)
    flags.set(this.flags)
    this.flags = flags
    let n = this.slots.length
    while (n < 2 * cap) n *= 2
    this.slots = new Int32Array(n)
    this.mask = n - 1
    for (let i = 0; i < this.count; i++) {
      let s = this.slot(this.ids, i * 32)
      while (this.slots[s] !== 0) s = (s + 1) & this.mask
      this.slots[s] = i + 1
    }
  }
}
