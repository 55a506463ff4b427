// Reading a push's input back by offset: the novel chunks are read again after the existence
// query answers (P-Dedupe), so the input is never held whole. Random-access inputs (Blob/File,
// Uint8Array, a path on Node/Deno) read ranges; a ReadableStream, which cannot be read twice, is
// chunked here piece by piece while a window keeps its bytes from the oldest chunk whose query
// has not been answered yet (see `StreamWindow`).
import { isDeno, isNode } from '../../../common/wasm.js'
import { StoreError } from './errors.js'

export interface RangeReader {
  /** The bytes [off, off + len). */
  read(off: number, len: number): Promise<Uint8Array>
  /**
   * Optional: where the part of the input holding `off` ends (pushMany's inputs end to end):
   * a read within it needs no copy, so novel chunks are read back in runs that stop there.
   */
  extent?(off: number): number
  /** Throws when the input changed since it was opened (a path: its size or mtime). */
  unchanged(): Promise<void>
  close(): Promise<void>
}

export type PushInput = Blob | Uint8Array | ReadableStream<Uint8Array> | string

export function isStream(input: unknown): input is ReadableStream<Uint8Array> {
  return typeof ReadableStream !== 'undefined' && input instanceof ReadableStream
}

function ioError(what: string, e: any): StoreError {
  return new StoreError(`cutpoint: cannot read ${what}: ${e?.message ?? e}`, { code: 'io', cause: e })
}

/** A reader over a random-access input; its size. */
export async function openReader(input: Blob | Uint8Array | string): Promise<{ reader: RangeReader; size: number }> {
  if (input instanceof Uint8Array) {
    return {
      size: input.length,
      reader: { read: async (o, l) => input.subarray(o, o + l), unchanged: async () => {}, close: async () => {} },
    }
  }
  if (typeof Blob !== 'undefined' && input instanceof Blob) {
    return {
      size: input.size,
      reader: {
        read: async (o, l) => {
          try {
            return new Uint8Array(await input.slice(o, o + l).arrayBuffer())
          } catch (e) {
            throw ioError(`bytes ${o}..${o + l} of the file (was it changed or removed?)`, e)
          }
        },
        unchanged: async () => {},
        close: async () => {},
      },
    }
  }
  if (typeof input === 'string') {
    if (!isNode && !isDeno) throw new StoreError('cutpoint: a path input needs Node or Deno', { code: 'usage' })
    const fsName = 'node:fs/promises'
    const fs = await import(/* @vite-ignore */ fsName)
    let fh: any
    let st: any
    try {
      fh = await fs.open(input, 'r')
      st = await fh.stat()
    } catch (e) {
      await fh?.close().catch(() => {})
      throw ioError(input, e)
    }
    if (!st.isFile()) {
      await fh.close().catch(() => {})
      throw new StoreError(`cutpoint: cannot read ${input}: not a regular file`, { code: 'io' })
    }
    return {
      size: st.size,
      reader: {
        read: async (o, l) => {
          const buf = new Uint8Array(l)
          let got = 0
          try {
            while (got < l) {
              const { bytesRead } = await fh.read(buf, got, l - got, o + got)
              if (bytesRead === 0) break
              got += bytesRead
            }
          } catch (e) {
            throw ioError(input, e)
          }
          if (got < l) throw new StoreError(`cutpoint: ${input}: the file shrank while it was pushed; nothing was committed (push it again)`, { code: 'io' })
          return buf
        },
        unchanged: async () => {
          let now: any
          try {
            now = await fs.stat(input)
          } catch (e) {
            throw ioError(input, e)
          }
          if (now.size !== st.size || now.mtimeMs !== st.mtimeMs) {
            throw new StoreError(`cutpoint: ${input}: the file changed while it was pushed; nothing was committed (push it again)`, { code: 'io' })
          }
        },
        close: async () => {
          await fh.close().catch(() => {})
        },
      },
    }
  }
  throw new StoreError('cutpoint: push input must be a File/Blob, Uint8Array, ReadableStream or a path (Node/Deno)', { code: 'usage' })
}

/**
 * The bytes of a stream from `base` on, as read: pieces are dropped (`release`) once no chunk
 * that may still be novel starts before them. Bounded by the chunks between the oldest
 * unanswered existence query and the read head (a few query batches: 2048 chunks each).
 */
export class StreamWindow implements RangeReader {
  private pieces: { off: number; bytes: Uint8Array }[] = []
  private end = 0

  add(bytes: Uint8Array) {
    if (bytes.length) this.pieces.push({ off: this.end, bytes })
    this.end += bytes.length
  }

  /** Bytes held now. */
  get held(): number {
    return this.pieces.reduce((a, p) => a + p.bytes.length, 0)
  }

  /** Drops the pieces that end at or before `off`. */
  release(off: number) {
    let i = 0
    while (i < this.pieces.length && this.pieces[i].off + this.pieces[i].bytes.length <= off) i++
    if (i) this.pieces.splice(0, i)
  }

  async read(off: number, len: number): Promise<Uint8Array> {
    const out = new Uint8Array(len)
    let at = 0
    for (const p of this.pieces) {
      const pe = p.off + p.bytes.length
      if (pe <= off + at) continue
      if (p.off > off + at) break
      const from = off + at - p.off
      const n = Math.min(p.bytes.length - from, len - at)
      out.set(p.bytes.subarray(from, from + n), at)
      at += n
      if (at === len) return out
    }
    throw new StoreError(`cutpoint: internal error: the stream window lacks bytes ${off}..${off + len}`, { code: 'protocol' })
  }

  async unchanged() {}
  async close() {
    this.pieces = []
  }
}
