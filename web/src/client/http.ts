// The store's HTTP API (native/store/PROTOCOL.md) over `fetch`: URLs, the bearer token, error
// answers turned into `StoreError`s with the store's message, and retries with backoff for the
// requests that are safe to repeat (queries, pack uploads, reads) — never a commit (not
// idempotent: see `commit` in push.ts).
import { checkAbort, StoreError } from './errors.js'
import { wire } from './wire.js'

export interface HttpOptions {
  store: string
  namespace: string
  token?: string
  fetch?: typeof fetch
  /** Retries after a network error or a 5xx (safe requests only). Default 4. */
  retries?: number
  /** First wait before a retry (ms), doubled each time. Default 200. */
  backoff?: number
}

/** What a store says of its limits (`GET /v1`, `limits`). */
export interface StoreLimits {
  /** Largest pack upload, bytes. */
  maxPack?: number
  /** Most chunks in one pack upload. */
  maxPackChunks?: number
}

export class Http {
  readonly base: string
  readonly ns: string
  private token?: string
  private fetchFn: typeof fetch
  private retries: number
  private backoff: number

  constructor(o: HttpOptions) {
    const base = String(o.store ?? '').replace(/\/+$/, '')
    if (!/^https?:\/\//.test(base)) throw new StoreError(`cutpoint: store '${o.store}' is not an http:// or https:// URL`, { code: 'usage' })
    try {
      wire().validateNamespace(o.namespace)
    } catch (e: any) {
      throw new StoreError(`cutpoint: ${e?.message ?? e}`, { code: 'usage' })
    }
    this.base = base
    this.ns = o.namespace
    this.token = o.token || undefined
    this.fetchFn = o.fetch ?? globalThis.fetch.bind(globalThis)
    this.retries = o.retries ?? 4
    this.backoff = o.backoff ?? 200
  }

  private limitsP?: Promise<StoreLimits>

  /**
   * The store's limits (`GET /v1`), asked once per client and shared by its pushes: the request
   * is not tied to one push's signal, each caller waits under its own. Empty where the store's
   * answer has no limits; where the request fails, empty for this caller and asked again by the
   * next (the push's own requests report what is wrong with the store).
   */
  async limits(signal?: AbortSignal): Promise<StoreLimits> {
    const num = (x: unknown) => (typeof x === 'number' && Number.isSafeInteger(x) && x > 0 ? x : undefined)
    const p = (this.limitsP ??= this.request('GET', `${this.base}/v1`, { retry: true })
      .then((r) => r.json())
      .then((v: any) => ({ maxPack: num(v?.limits?.max_pack_bytes), maxPackChunks: num(v?.limits?.max_pack_chunks) })))
    const settled = p.catch(() => {
      if (this.limitsP === p) this.limitsP = undefined
      return {}
    })
    if (!signal) return settled
    checkAbort(signal)
    return new Promise<StoreLimits>((resolve, reject) => {
      const onAbort = () => reject(signal.reason ?? new DOMException('The push was aborted', 'AbortError'))
      signal.addEventListener('abort', onAbort, { once: true })
      settled.then((v) => {
        signal.removeEventListener('abort', onAbort)
        resolve(v)
      })
    })
  }

  url(tail: string): string {
    return `${this.base}/v1/ns/${this.ns}/${tail}`
  }

  fileUrl(what: 'files' | 'recipes', name: string, version?: number): string {
    return this.url(`${what}/${wire().encodeSegment(name)}`) + (version !== undefined ? `?version=${version}` : '')
  }

  /**
   * One request. Error statuses reject with a `StoreError` (the store's message) unless listed
   * in `pass`; `retry` repeats it after a network error or a 5xx, with backoff.
   */
  async request(
    method: string,
    url: string,
    o: { body?: Uint8Array | Blob | string; type?: string; retry?: boolean; signal?: AbortSignal; pass?: number[]; headers?: Record<string, string> } = {},
  ): Promise<Response> {
    let wait = this.backoff
    for (let n = 0; ; n++) {
      checkAbort(o.signal)
      try {
        return await this.once(method, url, o)
      } catch (e: any) {
        checkAbort(o.signal)
        const transient = e instanceof StoreError && (e.code === 'network' || (e.status !== undefined && e.status >= 500))
        if (!o.retry || !transient || n >= this.retries) throw e
        await sleep(wait, o.signal)
        wait *= 2
      }
    }
  }

  private async once(method: string, url: string, o: { body?: Uint8Array | Blob | string; type?: string; signal?: AbortSignal; pass?: number[]; headers?: Record<string, string> }): Promise<Response> {
    const headers: Record<string, string> = { ...(o.headers ?? {}) }
    if (this.token) headers.authorization = `Bearer ${this.token}`
    if (o.body !== undefined) headers['content-type'] = o.type ?? 'application/octet-stream'
    let res: Response
    try {
      res = await this.fetchFn(url, { method, headers, body: asBody(o.body), signal: o.signal })
    } catch (e: any) {
      checkAbort(o.signal)
      const why = e?.cause?.message ?? e?.message ?? String(e)
      const browser = typeof (globalThis as any).document !== 'undefined'
      throw new StoreError(
        `cutpoint: cannot reach the store at ${this.base} (${method} ${url.slice(this.base.length)}): ${why}` +
          (browser ? ' — is it running, and does it allow this page\'s origin (CORS, `cutpoint serve --cors-origin`)?' : ' — is it running?'),
        { code: 'network', cause: e },
      )
    }
    if (res.status < 400 || o.pass?.includes(res.status)) return res
    throw await errorOf(res, this.base)
  }
}

/** A `StoreError` from an error answer (its JSON `error` / `code` / `missing`). */
export async function errorOf(res: Response, base: string): Promise<StoreError> {
  let text = ''
  try {
    text = await res.text()
  } catch {}
  let v: any = undefined
  try {
    v = JSON.parse(text)
  } catch {}
  const msg = typeof v?.error === 'string' ? v.error : text ? text.slice(0, 300) : '(no message)'
  const hint =
    res.status === 401 ? ' (the store needs a valid token: --token / CUTPOINT_TOKEN, `token` in createClient)' : res.status === 403 ? ' (the token does not grant this)' : ''
  return new StoreError(`cutpoint: the store at ${base} answered ${res.status}: ${msg}${hint}`, {
    status: res.status,
    code: typeof v?.code === 'string' ? v.code : undefined,
    missing: Array.isArray(v?.missing) ? v.missing.filter((x: unknown) => typeof x === 'string') : undefined,
  })
}

export function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    const t = setTimeout(() => {
      signal?.removeEventListener('abort', onAbort)
      resolve()
    }, ms)
    const onAbort = () => {
      clearTimeout(t)
      reject(signal!.reason)
    }
    signal?.addEventListener('abort', onAbort, { once: true })
  })
}

/** In a browser (a `document` or a worker scope), large bodies are sent as Blobs (see `asBody`). */
export const BLOB_BODIES = typeof Blob !== 'undefined' && (typeof (globalThis as any).document !== 'undefined' || typeof (globalThis as any).WorkerGlobalScope !== 'undefined')

/**
 * A request body as `fetch` sends it fastest: in a browser (a `document` or a worker scope),
 * large byte bodies go as a `Blob`, because Chromium uploaded an 8 MiB `Uint8Array` body to
 * 127.0.0.1 in 1.8-3.5 s and the same bytes in a `Blob` in 0.3 s (headless Chromium 156, 2 busy
 * vCPUs, AMD EPYC Zen 3; a 12 MiB push from the web page went from 7.8 s to 0.9 s). Node and
 * Deno get the bytes as they are.
 */
function asBody(body: Uint8Array | Blob | string | undefined): BodyInit | undefined {
  if (BLOB_BODIES && body instanceof Uint8Array && body.byteLength >= 1 << 16) {
    return new Blob([body as Uint8Array<ArrayBuffer>])
  }
  return body as BodyInit | undefined
}
