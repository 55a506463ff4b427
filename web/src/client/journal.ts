// The push journal (browsers): a push of a File/Blob keeps its in-flight state in IndexedDB
// (database `cutpoint-push`, apart from the hint cache), so that a page reloaded or closed
// mid-push can list what is unfinished (`client.pending()`) and a push of the same file started
// again skips the existence queries of the chunks the store already acknowledged.
//
// A record is keyed by store URL, namespace, name, the file's identity (name, size,
// lastModified), profile and fingerprint. It holds counters and the ids of the chunks the store
// acknowledged in packs (32 bytes each, so at most 32 B per novel chunk of the file), appended as
// segments (object store `ids`, keys [record, n]) so that a flush writes only what is new.
// Flushes are throttled (at most one per FLUSH_MS, one in flight) and never awaited by the
// pipeline; a failing IndexedDB turns the journal off, never the push.
//
// Nothing of the journal is trusted for the data: the file is chunked and hashed in full, and the
// commit still checks every chunk on the store (a journaled chunk it lost is answered 409 and
// sent again by the push's commit loop).
import { done, req } from '../idb.js'

export const JOURNAL_DB = 'cutpoint-push'
const PUSHES = 'pushes'
const IDS = 'ids'
const FLUSH_MS = 500
/** Unfinished pushes kept per database: beyond it the least recently updated are dropped. */
const MAX_RECORDS = 64

export type PendingState = 'running' | 'interrupted' | 'failed'

/** An unfinished push (`client.pending()`). */
export interface PendingPush {
  /** The record's key (pass the entry, or this, to `client.forget`). */
  id: string
  store: string
  namespace: string
  /** The name it was pushed as. */
  name: string
  /** The input's identity: file name ('' for a Blob), size, lastModified (0 for a Blob). */
  fileName: string
  size: number
  lastModified: number
  profile: string
  hash: string
  /**
   * 'running': a push of this page is at it now; 'interrupted': aborted, or the page that ran it
   * was reloaded or closed; 'failed': it ended with `error`.
   */
  state: PendingState
  error?: string
  /** Stage and counters of the last attempt (as its progress events). */
  stage: string
  bytes: number
  chunks: number
  novelBytes: number
  /** Chunk bytes the store acknowledged in packs, all attempts together (the part already sent). */
  sentBytes: number
  /** Chunks and packs the store acknowledged, all attempts. */
  storedChunks: number
  packs: number
  attempts: number
  /** ms since the epoch. */
  startedAt: number
  updatedAt: number
}

/** What a push started again found in its journal: acknowledged before this attempt. */
export interface Resumed {
  packs: number
  chunks: number
  /** Chunk bytes (the part of the file not sent again). */
  bytes: number
  /** When the earlier attempt last wrote its journal (ms since the epoch). */
  since: number
}

export interface JournalCounters {
  stage: string
  bytes: number
  chunks: number
  novelBytes: number
}

/** Records run by a push of this JavaScript context now (the others marked 'running' were cut off). */
const live = new Map<string, PushJournal>()

function idb(): IDBFactory | undefined {
  return (globalThis as any).indexedDB
}

let dbPromise: Promise<IDBDatabase> | undefined

function openDb(): Promise<IDBDatabase> {
  const f = idb()
  if (!f) return Promise.reject(new Error('no IndexedDB'))
  dbPromise ??= new Promise<IDBDatabase>((resolve, reject) => {
    const r = f.open(JOURNAL_DB, 1)
    r.onupgradeneeded = () => {
      const db = r.result
      if (!db.objectStoreNames.contains(PUSHES)) db.createObjectStore(PUSHES)
      if (!db.objectStoreNames.contains(IDS)) db.createObjectStore(IDS)
    }
    r.onsuccess = () => {
      const db = r.result
      // Another page upgrading the database: let go (the next use opens it again).
      db.onversionchange = () => {
        db.close()
        dbPromise = undefined
      }
      resolve(db)
    }
    r.onerror = () => reject(new Error(`cutpoint: cannot open IndexedDB '${JOURNAL_DB}': ${r.error?.message ?? 'error'}`))
    r.onblocked = () => reject(new Error(`cutpoint: IndexedDB '${JOURNAL_DB}' is blocked by another connection`))
  })
  dbPromise.catch(() => (dbPromise = undefined))
  return dbPromise
}

const idRange = (id: string) => IDBKeyRange.bound([id, 0], [id, Number.MAX_SAFE_INTEGER])

function shown(r: PendingPush): PendingPush {
  return r.state === 'running' && !live.has(r.id) ? { ...r, state: 'interrupted' } : { ...r }
}

/** The unfinished pushes to `store`/`namespace` (all of them without arguments), newest first; [] without IndexedDB. */
export async function pendingPushes(store?: string, namespace?: string): Promise<PendingPush[]> {
  if (!idb()) return []
  const db = await openDb()
  const tx = db.transaction(PUSHES, 'readonly')
  const all = (await req(tx.objectStore(PUSHES).getAll())) as PendingPush[]
  return all
    .filter((r) => (store === undefined || r.store === store) && (namespace === undefined || r.namespace === namespace))
    .map(shown)
    .sort((a, b) => b.updatedAt - a.updatedAt)
}

/** Drops a record and its chunk ids (a push of it running now keeps going, without a journal). */
export async function forgetPush(entry: PendingPush | string): Promise<void> {
  const id = typeof entry === 'string' ? entry : entry?.id
  if (typeof id !== 'string') throw new TypeError('cutpoint: forget needs an entry of pending() (or its id)')
  live.get(id)?.stop()
  if (!idb()) return
  const db = await openDb()
  const tx = db.transaction([PUSHES, IDS], 'readwrite')
  tx.objectStore(PUSHES).delete(id)
  tx.objectStore(IDS).delete(idRange(id))
  await done(tx)
}

/** The identity of a push's input; undefined when it has none worth journaling (not a Blob). */
function identity(input: unknown): { fileName: string; size: number; lastModified: number } | undefined {
  if (typeof Blob === 'undefined' || !(input instanceof Blob)) return undefined
  const f = input as Partial<File>
  return { fileName: typeof f.name === 'string' ? f.name : '', size: input.size, lastModified: typeof f.lastModified === 'number' ? f.lastModified : 0 }
}

export class PushJournal {
  /** Set when an earlier attempt of this push acknowledged packs. */
  readonly resumed?: Resumed
  private rec: PendingPush
  private pending: Uint8Array[] = []
  private seq: number
  private timer: ReturnType<typeof setTimeout> | undefined
  private flushing: Promise<void> | undefined
  private lastFlush = 0
  private dirty = false
  private off = false
  private ended = false

  private constructor(
    rec: PendingPush,
    seq: number,
    private counters: () => JournalCounters,
    /** The ids acknowledged before this attempt: segments of 32-byte ids. */
    readonly known: Uint8Array[],
    resumed: Resumed | undefined,
  ) {
    this.rec = rec
    this.seq = seq
    this.resumed = resumed
  }

  /**
   * The journal of a push of `input` (a File/Blob in a browser with IndexedDB; otherwise
   * undefined), with the chunk ids an earlier attempt of the same push had acknowledged.
   * Never throws: a journal that cannot be read or written is no journal.
   */
  static async open(
    key: { store: string; namespace: string; name: string; profile: string; hash: string },
    input: unknown,
    counters: () => JournalCounters,
  ): Promise<PushJournal | undefined> {
    const who = identity(input)
    if (!who || !idb()) return undefined
    const id = JSON.stringify([key.store, key.namespace, key.name, who.fileName, who.size, who.lastModified, key.profile, key.hash])
    if (live.has(id)) return undefined // the same push already running in this context keeps the journal
    try {
      const db = await openDb()
      const tx = db.transaction([PUSHES, IDS], 'readwrite')
      const pushes = tx.objectStore(PUSHES)
      const ids = tx.objectStore(IDS)
      const prior = (await req(pushes.get(id))) as PendingPush | undefined
      const known: Uint8Array[] = []
      let count = 0
      let seq = 0
      let resumed: Resumed | undefined
      if (prior) {
        const keys = (await req(ids.getAllKeys(idRange(id)))) as [string, number][]
        const segs = (await req(ids.getAll(idRange(id)))) as Uint8Array[]
        for (const s of segs)
          if (s instanceof Uint8Array && s.length % 32 === 0) {
            known.push(s)
            count += s.length / 32
          }
        for (const k of keys) seq = Math.max(seq, k[1] + 1)
        if (prior.packs > 0 || count) resumed = { packs: prior.packs, chunks: count, bytes: prior.sentBytes, since: prior.updatedAt }
      }
      const now = Date.now()
      const rec: PendingPush = {
        id,
        store: key.store,
        namespace: key.namespace,
        name: key.name,
        ...who,
        profile: key.profile,
        hash: key.hash,
        state: 'running',
        stage: 'chunking',
        bytes: 0,
        chunks: 0,
        novelBytes: 0,
        sentBytes: prior?.sentBytes ?? 0,
        storedChunks: prior?.storedChunks ?? 0,
        packs: prior?.packs ?? 0,
        attempts: (prior?.attempts ?? 0) + 1,
        startedAt: prior?.startedAt ?? now,
        updatedAt: now,
      }
      pushes.put(rec, id)
      // Bounded: the least recently updated records beyond MAX_RECORDS go.
      const all = (await req(pushes.getAll())) as PendingPush[]
      if (all.length > MAX_RECORDS) {
        all.sort((a, b) => a.updatedAt - b.updatedAt)
        for (const old of all.slice(0, all.length - MAX_RECORDS)) {
          if (old.id === id || live.has(old.id)) continue
          pushes.delete(old.id)
          ids.delete(idRange(old.id))
        }
      }
      await done(tx)
      const j = new PushJournal(rec, seq, counters, known, resumed)
      live.set(id, j)
      return j
    } catch {
      return undefined
    }
  }

  /**
   * The store acknowledged a pack with these chunks (their ids at `raw[at .. at + 32]`, their
   * lengths); flushed later.
   */
  acked(chunks: { len: number; raw: Uint8Array; at: number }[]): void {
    if (this.off || this.ended) return
    const seg = new Uint8Array(chunks.length * 32)
    let bytes = 0
    try {
      chunks.forEach((c, i) => {
        if (c.at < 0 || c.at + 32 > c.raw.length) throw new Error('not a chunk id')
        seg.set(c.raw.subarray(c.at, c.at + 32), i * 32)
        bytes += c.len
      })
    } catch {
      this.stop() // never the push's failure
      return
    }
    this.pending.push(seg)
    this.rec.packs++
    this.rec.storedChunks += chunks.length
    this.rec.sentBytes += bytes
    this.dirty = true
    this.schedule()
  }

  private schedule(): void {
    if (this.timer || this.flushing || this.off) return
    const wait = Math.max(0, this.lastFlush + FLUSH_MS - Date.now())
    this.timer = setTimeout(() => {
      this.timer = undefined
      this.flushing = this.write().finally(() => {
        this.flushing = undefined
        if (this.dirty && !this.ended) this.schedule()
      })
    }, wait)
  }

  /** Writes the record (and the ids acknowledged since the last write) in one transaction. */
  private async write(state?: PendingState, error?: string): Promise<void> {
    if (this.off) return
    this.dirty = false
    this.lastFlush = Date.now()
    const segs = this.pending
    this.pending = []
    const c = this.counters()
    Object.assign(this.rec, { stage: c.stage, bytes: c.bytes, chunks: c.chunks, novelBytes: c.novelBytes, updatedAt: Date.now() })
    if (state) this.rec.state = state
    if (error !== undefined) this.rec.error = error
    try {
      const db = await openDb()
      const tx = db.transaction([PUSHES, IDS], 'readwrite')
      if (segs.length) {
        const all = new Uint8Array(segs.reduce((a, s) => a + s.length, 0))
        let at = 0
        for (const s of segs) {
          all.set(s, at)
          at += s.length
        }
        tx.objectStore(IDS).put(all, [this.rec.id, this.seq++])
      }
      tx.objectStore(PUSHES).put({ ...this.rec }, this.rec.id)
      await done(tx)
    } catch {
      this.off = true
    }
  }

  /** Forgotten while running: no more writes. */
  stop(): void {
    this.off = true
    if (this.timer) clearTimeout(this.timer)
    this.timer = undefined
  }

  private async settle(): Promise<void> {
    this.ended = true
    if (this.timer) clearTimeout(this.timer)
    this.timer = undefined
    await this.flushing
  }

  /** The push committed: the record goes. */
  async succeeded(): Promise<void> {
    await this.settle()
    if (live.get(this.rec.id) === this) live.delete(this.rec.id)
    await forgetPush(this.rec.id).catch(() => {})
  }

  /** The push failed or was aborted: the record stays, with what was acknowledged. */
  async failed(e: unknown, aborted: boolean): Promise<void> {
    await this.settle()
    const msg = e instanceof Error ? e.message : String(e)
    await this.write(aborted ? 'interrupted' : 'failed', msg)
    if (live.get(this.rec.id) === this) live.delete(this.rec.id)
  }
}
