// A pool of workers (Web Workers, worker_threads on Node, Deno workers), up to DEPTH jobs per
// worker at a time, FIFO. Any worker error or crash fails every pending job and terminates the pool.
import type { InitMsg, Job as Message, ReadyRes, Request, RequestHandler, Response } from '../../common/protocol.js'
import { isNode } from '../../common/wasm.js'

interface Port {
  post(msg: Request, transfer: ArrayBuffer[]): void
  terminate(): void
  /** Node: whether the worker keeps the process alive (not while a kept pool is idle). */
  hold?(on: boolean): void
}

type Listener = { message(r: Response): void; fail(e: Error): void }

async function spawn(l: Listener): Promise<Port> {
  if (isNode) {
    const wtName = 'node:worker_threads'
    const { Worker } = await import(/* @vite-ignore */ wtName)
    const w = new Worker(new URL('../../worker/cutpoint.worker.js', import.meta.url))
    let stopped = false
    w.on('message', (r: Response) => l.message(r))
    w.on('error', (e: Error) => l.fail(new Error(`cutpoint: worker failed: ${e?.message ?? e}`)))
    w.on('exit', (code: number) => {
      if (!stopped) l.fail(new Error(`cutpoint: worker exited unexpectedly (code ${code})`))
    })
    return {
      post: (m, t) => w.postMessage(m, t),
      terminate: () => {
        stopped = true
        void w.terminate()
      },
      hold: (on) => (on ? w.ref() : w.unref()),
    }
  }
  // Written out in full so bundlers (Vite) find and emit the worker.
  const w = new Worker(new URL('../../worker/cutpoint.worker.js', import.meta.url), { type: 'module', name: 'cutpoint' })
  w.onmessage = (e: MessageEvent) => l.message(e.data)
  w.onerror = (e: ErrorEvent) => {
    e.preventDefault?.()
    l.fail(new Error(`cutpoint: worker failed: ${e.message || 'error while loading or running the worker'}`))
  }
  w.onmessageerror = () => l.fail(new Error('cutpoint: a worker message could not be read'))
  return { post: (m, t) => w.postMessage(m, t), terminate: () => w.terminate() }
}

/** The coordinator's thread as a "worker" (workers: 0), running the handler it is given. */
function inline(l: Listener, h: RequestHandler): Port {
  let chain = Promise.resolve()
  let stopped = false
  return {
    post: (m) => {
      chain = chain.then(async () => {
        let r: Response
        try {
          r = (await h.handle(m)).res
        } catch (e: any) {
          r = { type: 'cutpoint:error', id: m.id, message: String(e?.message ?? e) }
        }
        if (!stopped) l.message(r)
      })
    },
    terminate: () => {
      stopped = true
      void chain.then(() => h.close())
    },
  }
}

interface Job {
  msg: Request
  transfer: ArrayBuffer[]
  resolve(r: any): void
  reject(e: Error): void
}

/** What `init` carries besides its type and id. */
export type InitOptions = Omit<InitMsg, 'type' | 'id'>

/** The handler that `workers: 0` runs in this thread (worker/handler.ts `Handler`, given by the caller). */
export type InThread = () => RequestHandler

interface Slot {
  port?: Port
  /** Jobs sent to this worker, oldest first; it answers them in this order. */
  sent: Job[]
  /** Jobs that must run on this worker (it holds their bytes), before any shared job. */
  own: Job[]
}

/**
 * Jobs a worker holds at once: while it runs one, it already reads the next one's bytes
 * (worker/handler.ts `prefetch`), so its reads (the browser's blob system, the disk) overlap
 * its computing instead of alternating with it.
 */
const DEPTH = 2

export class Pool {
  private slots: Slot[] = []
  private queue: Job[] = []
  private nextId = 1
  private failed?: Error
  private closed = false
  /** Kept across calls (`createPool`): `finish` leaves it idle instead of stopping it. */
  private kept = false
  private busy = false
  readonly info: { buildId: string; backend: string } = { buildId: '', backend: '' }

  private constructor(readonly size: number) {}

  /** Starts `n` workers (0: run in this thread) and sends each `init`. */
  static async create(n: number, init: InitOptions, inThread: InThread): Promise<Pool> {
    const pool = await Pool.spawn(n, inThread)
    try {
      await pool.init(init)
    } catch (e) {
      pool.terminate()
      throw e
    }
    return pool
  }

  /**
   * Starts `n` workers that stay up across calls: each call `take`s the pool with its own
   * `init` (profile, source, hash) and `finish`es it. Idle, they do not keep Node running.
   */
  static async keep(n: number, inThread: InThread): Promise<Pool> {
    const pool = await Pool.spawn(n, inThread)
    pool.kept = true
    pool.hold(false)
    return pool
  }

  /** A kept pool for one call: re-initialises every worker for it. */
  async take(init: InitOptions): Promise<Pool> {
    if (this.failed || this.closed) throw new Error(`cutpoint: the worker pool is closed${this.failed ? ` (${this.failed.message})` : ''}`)
    if (this.busy) throw new Error('cutpoint: the worker pool is in use by another call; use one pool per concurrent call')
    this.busy = true
    this.hold(true)
    try {
      await this.init(init)
    } catch (e) {
      this.finish()
      throw e
    }
    return this
  }

  /** The end of a call: stops the workers, or leaves a kept pool idle for the next call. */
  finish() {
    if (!this.kept) return this.terminate()
    // Jobs of an abandoned call (a consumer that stopped early) that no worker has yet are
    // dropped, so that they never run against the next call's source; those already sent
    // finish first (a worker answers in order), unheard. Compression jobs stay: they carry
    // their bytes, and the push that sent them holds the pool (`lease`) until it ends.
    this.queue = this.queue.filter((j) => j.msg.type === 'cutpoint:compress')
    for (const s of this.slots) s.own.length = 0
    this.busy = false
    if (!this.users) this.hold(false)
  }

  private users = 0

  /**
   * A kept pool used by calls that only `run` jobs (a push's compression, on its chunker's
   * workers or a client's compression workers): held while any such call uses it (Node: it
   * keeps the process running then), idle again after the last one's release.
   */
  lease(): () => void {
    if (this.users++ === 0) this.hold(true)
    let done = false
    return () => {
      if (done) return
      done = true
      if (--this.users === 0 && !this.busy) this.hold(false)
    }
  }

  private hold(on: boolean) {
    if (!this.closed) for (const s of this.slots) s.port?.hold?.(on)
  }

  private async init(init: InitOptions) {
    const ready: ReadyRes[] = await Promise.all(this.slots.map((slot) => this.runOn<ReadyRes>(slot, { type: 'cutpoint:init', id: 0, ...init }, [])))
    Object.assign(this.info, { buildId: ready[0].buildId, backend: ready[0].backend })
    this.ready = true
  }

  /** Every worker has been initialised once (its wasm loaded): jobs that carry their bytes can run. */
  ready = false

  private static async spawn(n: number, inThread: InThread): Promise<Pool> {
    const pool = new Pool(Math.max(1, n))
    const listeners = (slot: Slot): Listener => ({
      message: (r) => pool.onMessage(slot, r),
      fail: (e) => pool.fail(e),
    })
    for (let i = 0; i < pool.size; i++) {
      const slot: Slot = { sent: [], own: [] }
      pool.slots.push(slot)
    }
    try {
      await Promise.all(
        pool.slots.map(async (slot) => {
          slot.port = n === 0 ? inline(listeners(slot), inThread()) : await spawn(listeners(slot))
        }),
      )
    } catch (e) {
      pool.terminate()
      throw e
    }
    return pool
  }

  /** Runs a job on the next free worker. */
  run<T extends Response>(msg: Message, transfer: ArrayBuffer[] = []): Promise<T> {
    return this.runAt<T>(msg, transfer).then((r) => r.res)
  }

  /** Runs a job on the next free worker (or on worker `at`); also says which worker ran it. */
  runAt<T extends Response>(msg: Message, transfer: ArrayBuffer[] = [], at?: number): Promise<{ res: T; worker: number }> {
    return new Promise((resolve, reject) => {
      if (this.failed || this.closed) return reject(this.failed ?? new Error('cutpoint: the worker pool is closed'))
      const job: Job = { msg: { ...msg, id: this.nextId++ }, transfer, resolve, reject }
      if (at !== undefined) {
        const slot = this.slots[at]
        if (slot.sent.length < DEPTH && !slot.own.length) this.start(slot, job)
        else slot.own.push(job)
        return
      }
      // The least busy worker with room; an idle one first.
      let slot: Slot | undefined
      for (const s of this.slots) {
        if (s.port && s.sent.length < DEPTH && !s.own.length && (!slot || s.sent.length < slot.sent.length)) slot = s
      }
      if (slot) this.start(slot, job)
      else this.queue.push(job)
    })
  }

  private runOn<T>(slot: Slot, msg: Request, transfer: ArrayBuffer[]): Promise<T> {
    return new Promise<{ res: T }>((resolve, reject) => {
      msg.id = this.nextId++
      this.start(slot, { msg, transfer, resolve, reject })
    }).then((r) => r.res)
  }

  private start(slot: Slot, job: Job) {
    try {
      slot.port!.post(job.msg, job.transfer)
    } catch (e: any) {
      // Nothing reached the worker (the message could not be cloned): this job fails, the
      // worker and the pool are as they were (one bad input does not stop a kept pool).
      job.reject(new Error(`cutpoint: cannot send a job to a worker: ${e?.message ?? e}`))
      return
    }
    slot.sent.push(job)
  }

  /** Whether jobs can still run (no worker failed, not closed). */
  get usable(): boolean {
    return !this.failed && !this.closed
  }

  private onMessage(slot: Slot, r: Response) {
    const job = slot.sent[0]
    if (!job || job.msg.id !== r.id) {
      this.fail(new Error(`cutpoint: unexpected message from a worker (${r?.type} #${r?.id})`))
      return
    }
    slot.sent.shift()
    if (r.type === 'cutpoint:error') {
      this.fail(new Error(`cutpoint: ${r.message}`))
      job.reject(this.failed!)
      return
    }
    job.resolve({ res: r, worker: this.slots.indexOf(slot) })
    while (slot.sent.length < DEPTH) {
      const next = slot.own.shift() ?? this.queue.shift()
      if (!next) break
      this.start(slot, next)
    }
  }

  /** Fails every pending job with `e` and stops the workers. */
  fail(e: Error) {
    if (this.failed) return
    this.failed = e
    for (const s of this.slots) {
      for (const j of s.sent.splice(0)) j.reject(e)
      for (const j of s.own.splice(0)) j.reject(e)
    }
    for (const j of this.queue.splice(0)) j.reject(e)
    this.terminate()
  }

  terminate() {
    if (this.closed) return
    this.closed = true
    for (const s of this.slots) s.port?.terminate()
    for (const s of this.slots) for (const j of [...s.sent.splice(0), ...s.own.splice(0)]) j.reject(this.failed ?? new Error('cutpoint: the worker pool was closed'))
    for (const j of this.queue.splice(0)) j.reject(this.failed ?? new Error('cutpoint: the worker pool was closed'))
  }

  /** @internal Test hook: makes one worker crash. */
  crashOne(): Promise<unknown> {
    return this.run({ type: 'cutpoint:crash' })
  }
}
