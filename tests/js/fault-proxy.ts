// A TCP proxy on 127.0.0.1 in front of a store that stalls (issue #34), as native/cli/tests/
// common's `FaultProxy`: 'silent' accepts and never answers; { answer: N } forwards the first N
// bytes the store answers on a connection, then nothing more; { upload: N } forwards the first
// N bytes the client sends, then drops the rest and forwards nothing back; 'commit' forwards
// every request and, from a PUT (a commit) on, nothing of the answers. `stall(mode)` applies to
// every new connection, `stallOnce(mode)` to the first one it hits (either closes the connections
// open before it). A stalled connection stays open, its bytes going nowhere, until the client
// gives up (the store's side is closed then too, as a client's close would reach it) or the
// proxy closes. Each connection is logged: what the client sent (up to 64 KiB:
// request heads), the bytes answered, whether it stalled — so a test can check where a resumed
// pull's Range request starts.
import net from 'node:net'

export type Stall = 'off' | 'silent' | 'commit' | { answer: number } | { upload: number }

export interface ConnLog {
  sent: Buffer
  answered: number
  stalled: boolean
  /** The requests on this connection: the start of each (its head) and `answered` when it came. */
  requests: { head: string; at: number; seq: number }[]
}

export interface FaultProxy {
  url: string
  /** Resolve once the connections open before have closed (a client's pool has seen them go). */
  stall(s: Stall): Promise<void>
  stallOnce(s: Stall): Promise<void>
  conns: ConnLog[]
  /** The number of requests seen so far (each request's `seq` is its place in that count). */
  seq(): number
  close(): Promise<void>
}

export async function startFaultProxy(upstream: string): Promise<FaultProxy> {
  const up = new URL(upstream)
  let mode: Stall = 'off'
  let budget = Infinity
  const conns: ConnLog[] = []
  let seq = 0
  const sockets = new Set<net.Socket>()
  const server = net.createServer((client) => {
    sockets.add(client)
    client.on('close', () => sockets.delete(client))
    client.on('error', () => {})
    const stall = budget > 0 ? mode : 'off'
    const log: ConnLog = { sent: Buffer.alloc(0), answered: 0, stalled: false, requests: [] }
    conns.push(log)
    // Whether the stall applies now: the first hit on this connection takes one from the budget.
    const hit = () => {
      if (log.stalled) return true
      if (budget <= 0) return false
      budget--
      log.stalled = true
      return true
    }
    if (stall === 'silent' && hit()) {
      client.resume() // read and dropped
      return
    }
    const store = net.connect(Number(up.port), up.hostname)
    sockets.add(store)
    store.on('close', () => sockets.delete(store))
    store.on('error', () => client.destroy())
    client.on('close', () => store.destroy())
    let sent = 0
    let answered = 0
    let held = false // upload stalled: nothing more either way
    let putSeen = false
    client.on('data', (b: Buffer) => {
      if (held) return
      let fwd = b
      if (stall === 'commit' && b.subarray(0, 4).toString('latin1') === 'PUT ') putSeen = true
      if (typeof stall === 'object' && 'upload' in stall && sent + b.length > stall.upload && hit()) {
        fwd = b.subarray(0, Math.max(0, stall.upload - sent))
        held = true
        // The rest is read and dropped, not left unread (`pause`): a paused socket never sees
        // the client close it, so the store's side stayed open and the store counted the
        // upload as in progress until its body timeout (30 s), each retry taking another of
        // the token's 16 upload slots: a push through this stall then ended in 503 busy.
      }
      if (/^(GET|POST|PUT|DELETE|HEAD|OPTIONS) \//.test(fwd.subarray(0, 8).toString('latin1'))) {
        log.requests.push({ head: fwd.subarray(0, 1024).toString('latin1').split('\r\n\r\n')[0], at: log.answered, seq: seq++ })
      }
      if (log.sent.length < 64 << 10) log.sent = Buffer.concat([log.sent, fwd.subarray(0, (64 << 10) - log.sent.length)])
      sent += fwd.length
      store.write(fwd)
    })
    client.on('end', () => store.end())
    let stalled = false
    store.on('data', (b: Buffer) => {
      if (stalled || held) return
      let fwd = b
      if (putSeen && hit()) {
        stalled = true
        return
      }
      if (typeof stall === 'object' && 'answer' in stall && answered + b.length > stall.answer && hit()) {
        fwd = b.subarray(0, Math.max(0, stall.answer - answered))
        stalled = true
      }
      answered += fwd.length
      log.answered += fwd.length
      client.write(fwd)
    })
    // The store closed: a stalled client still gets nothing (no FIN) until it gives up.
    store.on('end', () => {
      if (!stalled && !held) client.end()
    })
  })
  // A new mode applies to new connections: the ones open now (idle in a client's pool, or held
  // by an earlier stall) are closed, so that no request goes over a connection of the old mode.
  const reset = async () => {
    for (const s of sockets) s.destroy()
    await new Promise((r) => setTimeout(r, 100))
  }
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  const port = (server.address() as net.AddressInfo).port
  return {
    url: `http://127.0.0.1:${port}`,
    conns,
    seq: () => seq,
    async stall(s) {
      mode = s
      budget = Infinity
      await reset()
    },
    async stallOnce(s) {
      mode = s
      budget = 1
      await reset()
    },
    async close() {
      for (const s of sockets) s.destroy()
      await new Promise<void>((r) => server.close(() => r()))
    },
  }
}

/**
 * The resumed request of a pull: among the requests from `since` (a `seq()`) on, how many had a
 * Range, whether a connection that carried one of them stalled, whether the first Range request
 * was the last of its connection, where its Range starts and the bytes answered to it (its head
 * included).
 */
export function resumed(conns: ConnLog[], since: number): { ranges: number; stalled: boolean; last: boolean; from: number; after: number } {
  const mine = conns.filter((c) => c.requests.some((r) => r.seq >= since))
  const found = mine
    .flatMap((c) => c.requests.map((r, k) => ({ c, r, last: k === c.requests.length - 1 })))
    .filter(({ r }) => r.seq >= since && /^range: bytes=/im.test(r.head))
  const stalled = mine.some((c) => c.stalled)
  if (!found.length) return { ranges: 0, stalled, last: false, from: -1, after: -1 }
  const { c, r, last } = found[0]
  return { ranges: found.length, stalled, last, from: Number(/^range: bytes=(\d+)-/im.exec(r.head)![1]), after: c.answered - r.at }
}
