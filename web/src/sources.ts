// The inputs: where workers read a random-access input from (`sourceOf`), and the pieces of any
// input read in order in this thread (`pieces`, RapidCDC's input).
import type { SourceDesc } from '../../common/protocol.js'
import { isDeno, isNode } from '../../common/wasm.js'

/** What `chunk()` reads. */
export type Input = Uint8Array | Blob | ReadableStream<Uint8Array> | string

export function sourceOf(input: Uint8Array | Blob | string): { desc: SourceDesc; size: () => Promise<number>; bytesFor?: (s: number, e: number) => Uint8Array } {
  if (input instanceof Uint8Array) {
    if (typeof SharedArrayBuffer !== 'undefined' && input.buffer instanceof SharedArrayBuffer) {
      return { desc: { kind: 'shared', bytes: input }, size: async () => input.length }
    }
    // A copy of each slice goes to a worker (its buffer is transferred): never the caller's memory.
    // Not `input.slice`: a Node Buffer's `slice` is a view of its (pooled) memory.
    return { desc: { kind: 'message' }, size: async () => input.length, bytesFor: (s, e) => copyOf(input, s, e) }
  }
  if (typeof Blob !== 'undefined' && input instanceof Blob) {
    return { desc: { kind: 'blob', blob: input }, size: async () => input.size }
  }
  if (typeof input === 'string') {
    if (!isNode && !isDeno) throw new Error('cutpoint: a path input needs Node or Deno')
    return {
      desc: { kind: 'path', path: input },
      size: async () => {
        let st: { size: number; isDirectory: boolean }
        try {
          if (isDeno) {
            const s = await (globalThis as any).Deno.stat(input)
            st = { size: s.size, isDirectory: s.isDirectory }
          } else {
            const fsName = 'node:fs/promises'
            const fs = await import(/* @vite-ignore */ fsName)
            const s = await fs.stat(input)
            st = { size: s.size, isDirectory: s.isDirectory() }
          }
        } catch (e: any) {
          throw new Error(`cutpoint: cannot read ${input}: ${e?.message ?? e}`)
        }
        if (st.isDirectory) throw new Error(`cutpoint: cannot read ${input}: it is a directory`)
        return st.size
      },
    }
  }
  throw new TypeError('cutpoint: input must be a Uint8Array, Blob/File, ReadableStream or a path')
}

/** A copy of bytes [s, e) of `bytes` in a buffer of its own (safe to transfer). */
export function copyOf(bytes: Uint8Array, s: number, e: number): Uint8Array {
  const out = new Uint8Array(Math.max(0, e - s))
  out.set(bytes.subarray(s, e))
  return out
}

/**
 * Whether a Blob can be sent to a worker. Node's file-backed Blobs (`fs.openAsBlob`) cannot:
 * `chunk()` reads those in this thread, as a stream, and sends the workers copies.
 */
export function blobCloneable(blob: Blob): boolean {
  if (!isNode) return true
  try {
    structuredClone(blob)
    return true
  } catch {
    return false
  }
}

/** Pieces of any input, read in order in this thread (RapidCDC's input). */
export async function* pieces(input: Input, size: number): AsyncGenerator<Uint8Array> {
  if (input instanceof Uint8Array) {
    for (let off = 0; off < input.length; off += size) yield input.subarray(off, Math.min(off + size, input.length))
  } else if (typeof ReadableStream !== 'undefined' && input instanceof ReadableStream) {
    const reader = input.getReader()
    try {
      for (;;) {
        const { done, value } = await reader.read()
        if (done) break
        yield value
      }
    } finally {
      reader.releaseLock()
    }
  } else if (typeof Blob !== 'undefined' && input instanceof Blob) {
    for (let off = 0; off < input.size; off += size) {
      let buf: ArrayBuffer
      try {
        buf = await input.slice(off, Math.min(off + size, input.size)).arrayBuffer()
      } catch (e: any) {
        throw new Error(`cutpoint: cannot read bytes ${off}.. of the file: ${e?.message ?? e}`)
      }
      yield new Uint8Array(buf)
    }
  } else if (typeof input === 'string') {
    if (isDeno) {
      const D = (globalThis as any).Deno
      let f: any
      try {
        f = await D.open(input, { read: true })
        if ((await f.stat()).isDirectory) throw new Error('it is a directory')
      } catch (e: any) {
        f?.close()
        throw new Error(`cutpoint: cannot read ${input}: ${e?.message ?? e}`)
      }
      try {
        for (;;) {
          const buf = new Uint8Array(size)
          let n: number | null
          try {
            n = await f.read(buf)
          } catch (e: any) {
            throw new Error(`cutpoint: cannot read ${input}: ${e?.message ?? e}`)
          }
          if (n === null) break
          yield buf.subarray(0, n)
        }
      } finally {
        f.close()
      }
    } else if (isNode) {
      const fsName = 'node:fs/promises'
      const fs = await import(/* @vite-ignore */ fsName)
      let fh: any
      try {
        fh = await fs.open(input, 'r')
        if ((await fh.stat()).isDirectory()) throw new Error('it is a directory')
      } catch (e: any) {
        await fh?.close()
        throw new Error(`cutpoint: cannot read ${input}: ${e?.message ?? e}`)
      }
      try {
        for (;;) {
          const buf = new Uint8Array(size)
          let bytesRead: number
          try {
            ;({ bytesRead } = await fh.read(buf, 0, size, null))
          } catch (e: any) {
            throw new Error(`cutpoint: cannot read ${input}: ${e?.message ?? e}`)
          }
          if (bytesRead === 0) break
          yield buf.subarray(0, bytesRead)
        }
      } finally {
        await fh.close()
      }
    } else {
      throw new Error('cutpoint: a path input needs Node or Deno')
    }
  } else {
    throw new TypeError('cutpoint: input must be a Uint8Array, Blob/File, ReadableStream or a path')
  }
}
