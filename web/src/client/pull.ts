// `pull`: a version's bytes as a ReadableStream, verified as they arrive. The recipe comes
// first: its digest must be the file digest of its chunk list (the core's `FileDigest`); then
// the store's restore body is cut at the recipe's chunk sizes and every chunk hashed (the
// core's BLAKE3 / SHA-256) against its id before it is passed on. A mismatch, a short body or
// bytes past the end error the stream (`StoreError`, code 'verify'): what was read before it is
// verified, and a consumer that writes a file keeps it only if the stream ends without error.
// An answer that stalls or fails (a network error, the idle timeout) is asked again from the end
// of the verified chunks with a `Range` request, at most `retries` times a pull; then the stream
// errors with code 'network', naming the store, the request, the wait and the byte it reached.
import { hex } from '../hex.js'
import type { WasmStoreRecipe } from '../../../common/wasm.js'
import { checkAbort, StoreError, usage } from './errors.js'
import { sleep, type Http } from './http.js'
import { wire } from './wire.js'

export interface PullOptions {
  version?: number
  signal?: AbortSignal
}

export interface PullInfo {
  name: string
  version: number
  bytes: number
  chunks: number
  digest: string
}

/** The recipe of a version (latest when absent), checked against its digest. */
export async function fetchRecipe(http: Http, name: string, version: number | undefined, signal?: AbortSignal): Promise<{ version: number; recipe: WasmStoreRecipe }> {
  try {
    wire().validateName(name)
  } catch (e: any) {
    throw usage(e?.message ?? String(e))
  }
  if (version !== undefined && !(Number.isSafeInteger(version) && version >= 1)) throw usage(`version must be an integer from 1 (got ${version})`)
  const got = await http.requestRead('GET', http.fileUrl('recipes', name, version), { retry: true, signal, pass: [404] }, async (res) => {
    if (res.status === 404) {
      await res.body?.cancel()
      return undefined
    }
    return { res, text: new Uint8Array(await res.arrayBuffer()) }
  })
  if (!got) {
    throw new StoreError(
      version !== undefined ? `cutpoint: no version ${version} of '${name}' in namespace '${http.ns}'` : `cutpoint: no file '${name}' in namespace '${http.ns}'`,
      { status: 404, code: 'not_found' },
    )
  }
  const { res, text } = got
  const v = Number(res.headers.get('x-cutpoint-version'))
  if (!Number.isSafeInteger(v) || v < 1) throw new StoreError('cutpoint: the recipe came without its version (X-Cutpoint-Version)', { code: 'protocol' })
  let recipe: WasmStoreRecipe
  try {
    recipe = wire().StoreRecipe.parse(text)
  } catch (e: any) {
    throw new StoreError(`cutpoint: the store's recipe of '${name}': ${e?.message ?? e}`, { code: 'protocol' })
  }
  if (!recipe.digestMatches()) {
    recipe.free()
    throw new StoreError(`cutpoint: the store's recipe of '${name}' does not match its digest`, { code: 'verify' })
  }
  return { version: v, recipe }
}

const WINDOW = 4096
const OUT = 1 << 20

/** The verified bytes of a version; `info` is known before the first byte. */
export async function pull(http: Http, name: string, opts: PullOptions = {}): Promise<{ stream: ReadableStream<Uint8Array>; info: PullInfo }> {
  const { signal } = opts
  checkAbort(signal)
  const { version, recipe } = await fetchRecipe(http, name, opts.version, signal)
  const url = http.fileUrl('files', name, version)
  let res: Response
  try {
    res = await http.request('GET', url, { retry: true, signal })
  } catch (e) {
    recipe.free()
    throw e
  }
  const info: PullInfo = { name, version, bytes: recipe.bytes, chunks: recipe.count, digest: recipe.digestHex }
  const alg = recipe.hash
  const mod = wire()
  let body = res.body!.getReader()
  // Chunk i of the recipe, its id and size from a window of the recipe.
  let i = 0
  let winFrom = 0
  let ids: Uint8Array = new Uint8Array(0)
  let sizes: Uint32Array = new Uint32Array(0)
  let cur: Uint8Array = new Uint8Array(0)
  let have = 0
  let pos = 0
  let pending: Uint8Array = new Uint8Array(0)
  let out: Uint8Array[] = []
  let outLen = 0
  let freed = false
  const free = () => {
    if (!freed) recipe.free()
    freed = true
  }
  const fail = (m: string) => new StoreError(`cutpoint: pull of '${name}' version ${version}: ${m}`, { code: 'verify' })
  const size = (k: number) => {
    if (k >= winFrom + sizes.length) {
      winFrom = k
      ids = recipe.ids(k, k + WINDOW)
      sizes = recipe.sizes(k, k + WINDOW)
    }
    return sizes[k - winFrom]
  }
  const n = recipe.count
  // After a failed read the body is asked again from `pos`, the end of the verified chunks (a
  // Range request: no verified byte is read twice), at most `http.retries` times a pull.
  let resumes = 0
  let wait = http.backoff
  const resume = async (e: unknown) => {
    if (signal?.aborted || !(e instanceof StoreError) || e.code !== 'network' || resumes >= http.retries) {
      if (e instanceof StoreError && e.code === 'network') {
        throw new StoreError(`${e.message} at byte ${pos} (chunk ${i} of ${n})${resumes > 0 ? ` (gave up after ${resumes + 1} tries)` : ''}`, { code: 'network', cause: e })
      }
      throw e
    }
    resumes++
    body.cancel().catch(() => {})
    await sleep(wait, signal)
    wait *= 2
    const r = await http.request('GET', url, { retry: true, signal, headers: { range: `bytes=${pos}-` } })
    const start = /^bytes (\d+)-/.exec(r.headers.get('content-range') ?? '')?.[1]
    if (r.status !== 206 || Number(start) !== pos) {
      await r.body?.cancel()
      throw new StoreError(`cutpoint: ${http.base}: ${http.what('GET', url)}: the store did not resume at byte ${pos}`, { code: 'protocol' })
    }
    body = r.body!.getReader()
    pending = new Uint8Array(0)
    have = 0
    cur = new Uint8Array(0)
  }
  const read = async () => {
    for (;;) {
      try {
        return await body.read()
      } catch (e) {
        await resume(e)
      }
    }
  }
  const stream = new ReadableStream<Uint8Array>(
    {
      async pull(controller) {
        try {
          while (outLen < OUT && i < n) {
            if (!pending.length) {
              const r = await read()
              if (r.done) throw fail(`the store's answer ended at byte ${pos} (chunk ${i} of ${n})`)
              pending = r.value
              continue
            }
            const want = size(i)
            if (have === 0 && pending.length >= want) {
              cur = pending.subarray(0, want)
              pending = pending.subarray(want)
              have = want
            } else {
              if (have === 0) cur = new Uint8Array(want)
              const k = Math.min(want - have, pending.length)
              cur.set(pending.subarray(0, k), have)
              have += k
              pending = pending.subarray(k)
            }
            if (have < want) continue
            const got = mod.digest(alg, cur)
            const id = ids.subarray((i - winFrom) * 32, (i - winFrom + 1) * 32)
            for (let b = 0; b < 32; b++) {
              if (got[b] !== id[b]) throw fail(`chunk ${i} at byte ${pos} does not match its fingerprint ${hex(id)}`)
            }
            out.push(cur.slice())
            outLen += want
            pos += want
            have = 0
            cur = new Uint8Array(0)
            i++
          }
          if (outLen) {
            controller.enqueue(concat(out, outLen))
            out = []
            outLen = 0
          }
          if (i === n) {
            if (pending.length) throw fail('the store sent more bytes than the recipe holds')
            const r = await body.read()
            if (!r.done && r.value.length) throw fail('the store sent more bytes than the recipe holds')
            free()
            controller.close()
          }
        } catch (e) {
          free()
          body.cancel().catch(() => {})
          controller.error(signal?.aborted ? signal.reason : e instanceof StoreError ? e : fail(`the store's answer failed: ${(e as any)?.message ?? e}`))
        }
      },
      cancel(reason) {
        free()
        return body.cancel(reason)
      },
    },
    { highWaterMark: 0 },
  )
  return { stream, info }
}

function concat(parts: Uint8Array[], len: number): Uint8Array {
  if (parts.length === 1) return parts[0]
  const o = new Uint8Array(len)
  let at = 0
  for (const p of parts) {
    o.set(p, at)
    at += p.length
  }
  return o
}
