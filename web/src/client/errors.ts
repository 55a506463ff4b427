// The client's one error type. `status` and `code` are the store's (PROTOCOL.md: every 4xx/5xx
// has `{"error", "code"}`); errors of the client's own carry a `code` of their own and no status:
// 'network' (the store cannot be reached, or a browser refused the answer: CORS), 'usage' (a bad
// option, name or profile: the native CLI's exit code 2), 'io' (the input cannot be read, or
// changed while pushed), 'verify' (restored bytes do not match: exit code 3), 'protocol' (an
// answer that makes no sense).

export class StoreError extends Error {
  status?: number
  code?: string
  /** With 409 at a commit: the chunk ids (hex) the store lacks. */
  missing?: string[]
  constructor(message: string, opts: { status?: number; code?: string; missing?: string[]; cause?: unknown } = {}) {
    super(message, opts.cause !== undefined ? { cause: opts.cause } : undefined)
    this.name = 'StoreError'
    this.status = opts.status
    this.code = opts.code
    this.missing = opts.missing
  }
}

export function usage(message: string): StoreError {
  return new StoreError(`cutpoint: ${message}`, { code: 'usage' })
}

/** Throws the signal's reason when it is aborted. */
export function checkAbort(signal?: AbortSignal) {
  if (signal?.aborted) throw signal.reason ?? new DOMException('The push was aborted', 'AbortError')
}
