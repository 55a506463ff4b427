// The chunk loops: random-access inputs (stage-1 jobs over slices, read by the workers or sent),
// streams (`createChunker`: jobs over the bytes held), and RapidCDC (the core's run in this
// thread, stage 1 of large fallback blocks in the pool).
import { stage1Job, type Stage1Res } from '../../common/protocol.js'
import type { WasmStage2 } from '../../common/wasm.js'
import { Breather, Emitter, iterable, type Chunk, type ChunkIterable } from './emitter.js'
import { BLOB_SPAN, checkChunkOptions, DEFAULT_SPAN, resolve, type ChunkOptions, type Resolved } from './options.js'
import { RapidSession, type RapidResult } from './rapid.js'
import { need } from './runtime.js'
import { pieces, type Input, type sourceOf } from './sources.js'
import { defaultWorkers, stage1Lead, startPool } from './workers.js'

export async function openRapid(opts: ChunkOptions): Promise<{ r: Resolved; session: RapidSession }> {
  const r = await resolve(opts)
  const w = need()
  if (r.flavor !== w.flavor) throw new Error(`cutpoint: rapid runs in this thread's wasm build (${w.flavor}); init({ wasm: '${r.flavor}' }) to use the other`)
  // With workers, stage 1 of large fallback blocks runs in a pool (started when first needed).
  // Not by default on two cores or fewer: the coordinator needs one for the fingerprints, and
  // the pool measured slower there (novel 256 MiB, ff+rwt: 481 / 436 / 381 MB/s with 0 / 1 / 2
  // workers); an explicit rapid.workerBlock still uses it.
  const usePool = r.workers >= 1 && (opts.rapid!.workerBlock !== undefined || (await defaultWorkers()) > 2)
  const pool = usePool ? { start: () => startPool(r, { kind: 'message' }), span: r.span, lane: r.lane, window: r.profile.window, view: w.view } : undefined
  const session = await RapidSession.open(w.mod, opts.rapid!, r.profile.canonical, r.hash, r.workers, r.backend, pool)
  return { r, session }
}

export function chunkRapid(input: Input, opts: ChunkOptions): ChunkIterable {
  let session: RapidSession | undefined
  async function* gen(): AsyncGenerator<Chunk[]> {
    const o = await openRapid(opts)
    session = o.session
    const breather = new Breather()
    // One piece read ahead: reading (I/O threads) overlaps the run's work on this one.
    const src = pieces(input, o.r.span)
    let next = src.next()
    next.catch(() => {})
    try {
      for (let r = await next; !r.done; r = await next) {
        next = src.next()
        next.catch(() => {})
        yield await session.push(r.value)
        await breather.maybe()
      }
      yield await session.end()
    } finally {
      session.close()
      // Closes the source once the read under way ends (not awaited: a stream may never end).
      next.then(
        () => src.return(undefined).catch(() => {}),
        () => {},
      )
    }
  }
  return iterable(gen(), () => session?.info)
}

export async function* chunkRandom(src: ReturnType<typeof sourceOf>, opts: ChunkOptions): AsyncGenerator<Chunk[]> {
  const r = await resolve(opts, src.desc.kind === 'blob' ? BLOB_SPAN : DEFAULT_SPAN)
  const size = await src.size()
  const pool = await startPool(r, src.desc)
  const st2 = new (need().mod.Stage2)(r.profile.canonical)
  try {
    const em = new Emitter(pool, r, (s, e) => src.bytesFor?.(s, e))
    const W = r.profile.window
    const nseg = Math.ceil(size / r.span)
    // Stage-1 jobs ahead of the one stage 2 waits for, and hash jobs pending: where the workers
    // read the source once, each holds a span of it in a worker until its hash job has run.
    const look = r.ahead * pool.size
    // Workers read the source themselves: they keep each stage-1 slice for its hash job.
    const readOnce = !src.bytesFor && r.hash !== 'none' && (opts.readOnce ?? src.desc.kind === 'blob')
    const lead = stage1Lead(r.profile)
    const jobs: Promise<{ res: Stage1Res; worker: number }>[] = []
    let launched = 0
    const launch = () => {
      const i = launched++
      const a = i * r.span
      const b = Math.min(a + r.span, size)
      const { msg, transfer } = stage1Job(a, b, readOnce ? lead : W, r.lane, src.bytesFor, readOnce ? i : undefined)
      jobs[i] = pool.runAt<Stage1Res>(msg, transfer)
      jobs[i].catch(() => {})
    }
    for (let i = 0; i < nseg; i++) {
      while (launched < nseg && launched <= i + look) launch()
      const { res, worker } = await jobs[i]
      delete jobs[i]
      const a = i * r.span
      const b = Math.min(a + r.span, size)
      em.add(st2.feed(a, b, res.strict, res.loose), !readOnce)
      if (b === size) em.add(st2.finish(size), !readOnce)
      if (readOnce) em.flush(worker, i)
      yield await em.take(look)
    }
    em.flush()
    yield await em.take(0)
  } finally {
    st2.free()
    pool.finish()
  }
}

/** Chunks a stream; with `own` (a stream made here), cancels it when the caller stops early. */
export async function* chunkStream(stream: ReadableStream<Uint8Array>, opts: ChunkOptions, own = false): AsyncGenerator<Chunk[]> {
  const c = await createChunker(opts)
  const reader = stream.getReader()
  let ended = false
  try {
    for (;;) {
      const { done, value } = await reader.read()
      if (done) break
      yield await c.update(value)
    }
    yield await c.finish()
    ended = true
  } finally {
    c.close()
    if (own && !ended) await reader.cancel().catch(() => {})
    reader.releaseLock()
  }
}

export interface Chunker {
  /** Adds bytes; resolves to the chunks completed so far (in order, maybe none). */
  update(bytes: Uint8Array): Promise<Chunk[]>
  /** Ends the input; resolves to the remaining chunks. The chunker is closed afterwards. */
  finish(): Promise<Chunk[]>
  /** Stops the workers (also after an error). */
  close(): void
  /** With `rapid`: the result after `finish()`, the statistics so far before. */
  readonly rapid?: RapidResult
}

/** Wraps a chunker's calls: refused once it is closed, and an error closes it. */
function guarded(isClosed: () => boolean, close: () => void) {
  return async <T>(f: () => Promise<T>): Promise<T> => {
    if (isClosed()) throw new Error('cutpoint: the chunker is closed')
    try {
      return await f()
    } catch (e) {
      close()
      throw e
    }
  }
}

function rapidChunker(session: RapidSession): Chunker {
  let closed = false
  const guard = guarded(() => closed, () => close())
  const close = () => {
    closed = true
    session.close()
  }
  return {
    update: (bytes) => guard(async () => session.push(bytes)),
    finish: () =>
      guard(async () => {
        const out = await session.end()
        closed = true
        return out
      }),
    close,
    get rapid() {
      return session.info
    },
  }
}

/** A stateful chunker for data that arrives in pieces. Any piece sizes give the same chunks. */
export async function createChunker(opts: ChunkOptions = {}): Promise<Chunker> {
  need()
  opts = checkChunkOptions(opts)
  if (opts.rapid) return rapidChunker((await openRapid(opts)).session)
  const r = await resolve(opts)
  const pool = await startPool(r, { kind: 'message' })
  const st2: WasmStage2 = new (need().mod.Stage2)(r.profile.canonical)
  const W = r.profile.window
  // Bytes [base, base + len) of the stream are in held[0..len).
  let held = new Uint8Array(0)
  let base = 0
  let len = 0
  let nextA = 0
  let fed = 0
  let closed = false
  const jobs: { a: number; b: number; p: Promise<Stage1Res>; done: boolean }[] = []
  const em = new Emitter(pool, r, (s, e) => held.slice(s - base, e - base))
  const look = 2 * pool.size

  const launch = (b: number) => {
    const a = nextA
    const { msg, transfer } = stage1Job(a, b, W, r.lane, (s, e) => held.slice(s - base, e - base))
    const job = { a, b, p: pool.run<Stage1Res>(msg, transfer), done: false }
    job.p.then(
      () => (job.done = true),
      () => (job.done = true),
    )
    jobs.push(job)
    nextA = b
  }
  const drain = async (all: boolean) => {
    while (jobs.length && (all || jobs[0].done || jobs.length > look)) {
      const j = jobs.shift()!
      const res = await j.p
      em.add(st2.feed(j.a, j.b, res.strict, res.loose))
      fed = j.b
    }
  }
  const compact = () => {
    const keep = Math.min(Math.max(0, nextA - W), em.needFrom, st2.start)
    const drop = keep - base
    if (drop > 0 && drop >= len / 2) {
      held.copyWithin(0, drop, len)
      len -= drop
      base = keep
    }
  }
  const guard = guarded(() => closed, () => close())
  const close = () => {
    if (closed) return
    closed = true
    st2.free()
    pool.finish()
  }
  return {
    update: (bytes) =>
      guard(async () => {
        if (len + bytes.length > held.length) {
          const grown = new Uint8Array(Math.max(len + bytes.length, held.length * 2, 1 << 16))
          grown.set(held.subarray(0, len))
          held = grown
        }
        held.set(bytes, len)
        len += bytes.length
        while (base + len - nextA >= r.span) launch(nextA + r.span)
        await drain(false)
        compact()
        return em.take(look)
      }),
    finish: () =>
      guard(async () => {
        const end = base + len
        if (end > nextA) launch(end)
        await drain(true)
        if (fed !== end) st2.feed(fed, end, new Uint32Array(0), new Uint32Array(0))
        em.add(st2.finish(end))
        em.flush()
        const out = await em.take(0)
        close()
        return out
      }),
    close,
  }
}
