// Worker entry for browsers (Web Worker), Deno (Web Worker) and Node (worker_threads).
// Handles one message at a time, in order; reads ahead for a message that waits behind another.
import { Handler } from './handler.js'
import type { Request, Response } from '../common/protocol.js'

const g = globalThis as any
const handler = new Handler()
let chain: Promise<void> = Promise.resolve()

let queued = 0

function serve(post: (res: Response, transfer: ArrayBuffer[]) => void) {
  return (msg: Request) => {
    // A job behind another one: read its bytes now (the pool sends up to two at a time).
    if (queued++ > 0) handler.prefetch(msg)
    chain = chain.then(async () => {
      try {
        const { res, transfer } = await handler.handle(msg)
        post(res, transfer)
      } catch (e: any) {
        post({ type: 'cutpoint:error', id: msg?.id ?? -1, message: String(e?.message ?? e) }, [])
      }
      queued--
    })
  }
}

if (typeof g.Deno === 'undefined' && typeof g.process?.versions?.node === 'string' && typeof g.WorkerGlobalScope === 'undefined') {
  const wt = 'node:worker_threads'
  const { parentPort } = await import(/* @vite-ignore */ wt)
  const on = serve((res, transfer) => parentPort.postMessage(res, transfer))
  parentPort.on('message', on)
} else {
  const on = serve((res, transfer) => g.postMessage(res, transfer))
  g.onmessage = (e: MessageEvent) => on(e.data)
}
