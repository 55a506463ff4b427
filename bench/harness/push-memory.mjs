#!/usr/bin/env node
// Peak memory and time of a push of one large generated file (default 1 GiB) to a fresh
// `cutpoint serve` on 127.0.0.1: the library's client in Node (createClient().push(path), peak
// RSS of the whole process, worker threads included, sampled every 20 ms), and the native
// `cutpoint push`; also the library with the file as a ReadableStream (row js-node-stream)
// (GNU time's maximum RSS). Each push goes to its own fresh store, so every chunk is novel.
// Usage: node bench/harness/push-memory.mjs [SIZE] (e.g. 1g, 256m). Prints JSON lines.
// `node --expose-gc bench/harness/push-memory.mjs 1g`: the library's process collects garbage at
// every sample (every 200 ms), so the peak is what is live, not what V8 has not collected yet;
// it also reports the peak JS heap used and the peak external (ArrayBuffers, wasm) memory.
// Needs native/target/release/cutpoint and web/dist (npm run build:js).
import { spawn, spawnSync } from 'node:child_process'
import { mkdtempSync, rmSync, statSync, openSync, closeSync } from 'node:fs'
import { tmpdir, cpus } from 'node:os'
import { join } from 'node:path'
import { createInterface } from 'node:readline'
import { fileURLToPath } from 'node:url'

const root = fileURLToPath(new URL('../../', import.meta.url))
const bin = `${root}native/target/release/cutpoint`
const size = process.argv[2] ?? '1g'

if (process.argv[3] === '--child') {
  // The measured process: one push through the library.
  const [, , , , url, file, kind] = process.argv
  const cp = await import(`${root}web/dist/web/src/index.js`)
  await cp.init()
  let peak = process.memoryUsage.rss()
  const base = peak
  let heap = 0
  let ext = 0
  const gc = globalThis.gc
  const t = gc
    ? setInterval(() => {
        gc()
        const m = process.memoryUsage()
        peak = Math.max(peak, m.rss)
        heap = Math.max(heap, m.heapUsed)
        ext = Math.max(ext, m.external)
      }, 200)
    : setInterval(() => (peak = Math.max(peak, process.memoryUsage.rss())), 20)
  const c = cp.createClient({ store: url })
  const { openAsBlob } = await import('node:fs')
  const { createReadStream } = await import('node:fs')
  const { Readable } = await import('node:stream')
  // 'stream': the file as a ReadableStream (cannot be read twice: the client keeps a window).
  const input = kind === 'blob' ? await openAsBlob(file) : kind === 'stream' ? Readable.toWeb(createReadStream(file, { highWaterMark: 1 << 20 })) : file
  const t0 = performance.now()
  const r = await c.push(input, { name: 'big.bin' })
  const secs = (performance.now() - t0) / 1000
  clearInterval(t)
  peak = Math.max(peak, process.memoryUsage.rss())
  await c.close()
  console.log(JSON.stringify({ bytes: r.bytes, chunks: r.chunks, novel_bytes: r.novelBytes, sent_bytes: r.sentBytes, seconds: secs, rss_start_mib: base / 2 ** 20, peak_rss_mib: peak / 2 ** 20, ...(gc ? { gc_every_200ms: true, peak_heap_used_mib: heap / 2 ** 20, peak_external_mib: ext / 2 ** 20 } : {}) }))
  process.exit(0)
}

async function serve() {
  const data = mkdtempSync(join(tmpdir(), 'cutpoint-bench-store-'))
  const child = spawn(bin, ['serve', '--data', data, '--listen', '127.0.0.1:0'], { stdio: ['ignore', 'pipe', 'inherit'] })
  const line = await new Promise((r) => createInterface({ input: child.stdout }).once('line', r))
  child.stdout.resume()
  const url = /listening on (\S+)/.exec(line)[1]
  return { url, stop: () => (child.kill('SIGKILL'), rmSync(data, { recursive: true, force: true })) }
}

const dir = mkdtempSync(join(tmpdir(), 'cutpoint-bench-push-'))
const file = join(dir, 'big.bin')
const fd = openSync(file, 'w')
const g = spawnSync(bin, ['gen', '--stream', '--size', size, '--seed', '7'], { stdio: ['ignore', fd, 'inherit'] })
closeSync(fd)
if (g.status !== 0) throw new Error('cutpoint gen failed')
const machine = { cpu: cpus()[0]?.model, cores: cpus().length, node: process.version, file_bytes: statSync(file).size }
console.log(JSON.stringify({ machine }))
try {
  for (const kind of ['path', 'stream']) {
    const s = await serve()
    const flags = globalThis.gc ? ['--expose-gc'] : []
    const r = spawnSync(process.execPath, [...flags, fileURLToPath(import.meta.url), size, '--child', s.url, file, kind], { encoding: 'utf8' })
    s.stop()
    if (r.status !== 0) throw new Error(`the ${kind} push failed: ${r.stderr}`)
    console.log(JSON.stringify({ row: `push/js-node-${kind}/${size}`, ...JSON.parse(r.stdout.trim().split('\n').pop()) }))
  }
  const s = await serve()
  const r = spawnSync('/usr/bin/time', ['-f', '%M %e', bin, 'push', file, '--name', 'big.bin', '--json', '--store', s.url], { encoding: 'utf8' })
  s.stop()
  if (r.status !== 0) throw new Error(`native push failed: ${r.stderr}`)
  const [kib, secs] = r.stderr.trim().split('\n').pop().split(' ').map(Number)
  const rep = JSON.parse(r.stdout)
  console.log(JSON.stringify({ row: `push/native/${size}`, bytes: rep.bytes, chunks: rep.chunks, novel_bytes: rep.novel_bytes, sent_bytes: rep.sent_bytes, seconds: secs, peak_rss_mib: kib / 1024 }))
} finally {
  rmSync(dir, { recursive: true, force: true })
}
