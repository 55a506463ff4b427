// The store's HTTP API (native/store/PROTOCOL.md) over `fetch`: URLs, the bearer token, error
// answers turned into `StoreError`s with the store's message, an idle timeout on every request
// (no answer, or no byte of its body, for `timeout` ms gives it up; progress resets it), and
// retries with backoff for the requests that are safe to repeat (queries, pack uploads, reads)
// — never a commit (not idempotent: see `commit` in push.ts).
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
  /**
   * Idle timeout (ms): a request whose answer does not begin, or whose answer's body brings no
   * byte, for this long is given up (and retried where it is safe). An upload's answer is
   * awaited this long plus its body's time at 64 KiB/s (`fetch` does not report an upload's
   * progress). Default 60 000.
   */
  timeout?: number
  /** Told of every retry, before its backoff: what failed, the try that comes next. */
  onRetry?: (e: RetryEvent) => void
}

/** A request that failed and is tried again (`onRetry`). */
export interface RetryEvent {
  /** `GET /v1/ns/default/files`. */
  request: string
  error: StoreError
  /** Whether it failed for want of an answer (the idle timeout), and after how long (ms). */
  timedOut: boolean
  waited: number
  /** The try that comes next (2 for the first retry) and the most there will be. */
  attempt: number
  attempts: number
}

/** The default idle timeout (ms). */
export const DEFAULT_TIMEOUT = 60_000
/** The slowest upload an answer is awaited for (bytes a second), on top of the idle timeout. */
const UPLOAD_FLOOR = 64 << 10

/** What a store says of its limits (`GET /v1`, `limits`). */
export interface StoreLimits {
  /** Largest pack upload, bytes. */
  maxPack?: number
  /** Most chunks in one pack upload. */
  maxPackChunks?: number
  /** Largest commit body, part or batch body (`max_recipe_bytes`). */
  maxRecipe?: number
  /** Most files in one batch commit (`max_batch_files`). */
  maxBatchFiles?: number
  /** What the store takes beyond revision 1 (`features`: 'zstd', 'parts', 'batch'). */
  features?: string[]
}

export class Http {
  readonly base: string
  readonly ns: string
  private token?: string
  private fetchFn: typeof fetch
  readonly retries: number
  readonly backoff: number
  readonly timeout: number
  private onRetry?: (e: RetryEvent) => void

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
    this.timeout = o.timeout ?? DEFAULT_TIMEOUT
    this.onRetry = o.onRetry
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
    const p = (this.limitsP ??= this.requestRead('GET', `${this.base}/v1`, { retry: true }, (r) => r.json()).then((v: any) => ({
      maxPack: num(v?.limits?.max_pack_bytes),
      maxPackChunks: num(v?.limits?.max_pack_chunks),
      maxRecipe: num(v?.limits?.max_recipe_bytes),
      maxBatchFiles: num(v?.limits?.max_batch_files),
      features: Array.isArray(v?.features) ? v.features.filter((f: unknown) => typeof f === 'string') : [],
    })))
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

  fileUrl(what: 'files' | 'recipes', name: string, version?: number, parts?: boolean): string {
    const q = [version !== undefined ? `version=${version}` : '', parts ? 'parts=1' : ''].filter(Boolean).join('&')
    return this.url(`${what}/${wire().encodeSegment(name)}`) + (q ? `?${q}` : '')
  }

  /** `GET /v1/ns/default/files`: a request as messages name it. */
  what(method: string, url: string): string {
    return `${method} ${url.startsWith(this.base) ? url.slice(this.base.length) : url}`
  }

  /**
   * One request. Error statuses reject with a `StoreError` (the store's message) unless listed
   * in `pass`; `retry` repeats it after a network error (a timeout too) or a 5xx, with backoff.
   * The answer's body is read under the idle timeout (a `StoreError`, code 'network', when it
   * stalls); `retrying` repeats a request together with the reading of its body.
   */
  async request(
    method: string,
    url: string,
    o: { body?: Uint8Array | Blob | string; type?: string; retry?: boolean; signal?: AbortSignal; pass?: number[]; headers?: Record<string, string> } = {},
  ): Promise<Response> {
    return this.requestRead(method, url, o, async (res) => res)
  }

  /** As `request`, with `read` of its answer (its body) retried together with it. */
  async requestRead<T>(
    method: string,
    url: string,
    o: { body?: Uint8Array | Blob | string; type?: string; retry?: boolean; signal?: AbortSignal; pass?: number[]; headers?: Record<string, string> },
    read: (res: Response) => Promise<T>,
  ): Promise<T> {
    const once = async () => read(await this.once(method, url, o))
    return o.retry ? this.retrying(this.what(method, url), once, o.signal) : once()
  }

  /**
   * Runs `f` (a request and the reading of its answer) again after a network error or a 5xx,
   * with backoff, at most `retries` times; a network error given up on says how many tries it
   * took. Only for requests that are safe to repeat.
   */
  async retrying<T>(what: string, f: () => Promise<T>, signal?: AbortSignal): Promise<T> {
    let wait = this.backoff
    for (let n = 0; ; n++) {
      checkAbort(signal)
      try {
        return await f()
      } catch (e: any) {
        checkAbort(signal)
        // A `damaged` object in the store (a recipe that does not parse) is not transient.
        const transient = e instanceof StoreError && e.code !== 'damaged' && (e.code === 'network' || (e.status !== undefined && e.status >= 500))
        if (!transient) throw e
        if (n >= this.retries) throw n > 0 && e.code === 'network' ? gaveUp(e, n + 1) : e
        this.onRetry?.({ request: what, error: e, timedOut: !!(e as any).timedOut, waited: (e as any).waited ?? 0, attempt: n + 2, attempts: this.retries + 1 })
        await sleep(wait, signal)
        wait *= 2
      }
    }
  }

  private async once(method: string, url: string, o: { body?: Uint8Array | Blob | string; type?: string; signal?: AbortSignal; pass?: number[]; headers?: Record<string, string> }): Promise<Response> {
    const headers: Record<string, string> = { ...(o.headers ?? {}) }
    if (this.token) headers.authorization = `Bearer ${this.token}`
    if (o.body !== undefined) headers['content-type'] = o.type ?? 'application/octet-stream'
    const what = this.what(method, url)
    const idle = new IdleTimer(this.timeout, o.signal, (ms) => timeoutError(this.base, what, ms))
    const size = o.body === undefined ? 0 : typeof o.body === 'string' ? o.body.length : o.body instanceof Blob ? o.body.size : o.body.byteLength
    idle.arm(this.timeout + Math.ceil((size / UPLOAD_FLOOR) * 1000))
    let res: Response
    try {
      // Never the browser's HTTP cache: a file's bytes are verified as they come and a pull
      // resumed by a Range request must get those bytes from the store (Chromium otherwise
      // keeps the part read before a stall and splits the Range request around it).
      res = await this.fetchFn(url, { method, headers, body: asBody(o.body), signal: idle.signal, cache: 'no-store' })
    } catch (e: any) {
      idle.stop()
      checkAbort(o.signal)
      if (idle.fired) throw idle.fired
      const why = e?.cause?.message ?? e?.message ?? String(e)
      const browser = typeof (globalThis as any).document !== 'undefined'
      throw new StoreError(
        `cutpoint: cannot reach the store at ${this.base} (${what}): ${why}` +
          (browser
            ? ` — is it running, and does it allow this page's origin (CORS: \`cutpoint serve --cors-origin ${(globalThis as any).location?.origin ?? 'ORIGIN'}\`)?`
            : ' — is it running?'),
        { code: 'network', cause: e },
      )
    }
    if (res.status >= 400 && !o.pass?.includes(res.status)) {
      idle.arm(this.timeout)
      try {
        throw await errorOf(res, this.base)
      } finally {
        idle.stop()
      }
    }
    if (!res.body) {
      idle.stop()
      return res
    }
    return new Response(idle.watch(res.body, () => new StoreError(`cutpoint: ${this.base}: ${what}: the answer failed`, { code: 'network' })), {
      status: res.status,
      statusText: res.statusText,
      headers: res.headers,
    })
  }
}

/** A timeout's error: code 'network' (so that it is retried), `timedOut` and `waited` set. */
function timeoutError(base: string, what: string, ms: number): StoreError {
  const e = new StoreError(`cutpoint: ${base}: ${what}: no answer for ${ms / 1000} s`, { code: 'network' })
  Object.assign(e, { timedOut: true, waited: ms })
  return e
}

/** A network error given up on after `tries`, saying so. */
function gaveUp(e: StoreError, tries: number): StoreError {
  const g = new StoreError(`${e.message} (gave up after ${tries} tries)`, { code: 'network', cause: e.cause })
  Object.assign(g, { timedOut: (e as any).timedOut, waited: (e as any).waited })
  return g
}

/**
 * The idle timeout of one request: an abort signal (the caller's too) that fires when `arm`'s
 * time passes without a new `arm`; `watch` re-arms it at each chunk of the answer's body and
 * stops it at its end.
 */
class IdleTimer {
  private ctl = new AbortController()
  private t?: ReturnType<typeof setTimeout>
  private armedFor = 0
  fired?: StoreError
  private onAbort = () => this.ctl.abort(this.user!.reason)

  constructor(
    private timeout: number,
    private user: AbortSignal | undefined,
    private error: (ms: number) => StoreError,
  ) {
    user?.addEventListener('abort', this.onAbort, { once: true })
  }

  get signal(): AbortSignal {
    return this.ctl.signal
  }

  arm(ms: number) {
    clearTimeout(this.t)
    this.armedFor = ms
    this.t = setTimeout(() => {
      this.fired = this.error(this.armedFor)
      this.ctl.abort(this.fired)
    }, ms)
    // Node and Deno: an armed timer alone does not keep a process alive (a request in flight does).
    if (typeof (this.t as any)?.unref === 'function') (this.t as any).unref()
    else (globalThis as any).Deno?.unrefTimer?.(this.t)
  }

  stop() {
    clearTimeout(this.t)
    this.user?.removeEventListener('abort', this.onAbort)
  }

  /**
   * `body`, each read under the idle timeout (armed only while a read waits for the network: a
   * consumer that takes its time is no stall); a failed read is `failed()` (or the timeout's error).
   */
  watch(body: ReadableStream<Uint8Array>, failed: () => StoreError): ReadableStream<Uint8Array> {
    const reader = body.getReader()
    clearTimeout(this.t)
    return new ReadableStream<Uint8Array>(
      {
        pull: async (controller) => {
          try {
            this.arm(this.timeout)
            const r = await reader.read()
            clearTimeout(this.t)
            if (r.done) {
              this.stop()
              controller.close()
            } else {
              controller.enqueue(r.value)
            }
          } catch (e) {
            this.stop()
            if (this.user?.aborted) controller.error(this.user.reason)
            else if (this.fired) controller.error(this.fired)
            else {
              const f = failed()
              f.message += `: ${(e as any)?.message ?? e}`
              controller.error(Object.assign(f, { cause: e }))
            }
          }
        },
        cancel: (reason) => {
          this.stop()
          return reader.cancel(reason)
        },
      },
      { highWaterMark: 0 },
    )
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
