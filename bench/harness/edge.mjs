#!/usr/bin/env node
// `npm run bench` step `edge` (issue #29): the edge store (edge/: the Worker in workerd through
// miniflare, with miniflare's local R2 and Durable Object storage) beside `cutpoint serve`, the
// same file pushed by the native client to each, fresh stores, in one run.
// * edge/push/first-vs-serve: first push, serve's seconds ÷ the edge's (goal ≥ 0.5), with the
//   whole workerd process's CPU per MiB (the Worker, its Durable Object, and the local stand-ins
//   of R2 and Durable Object storage, which on the platform run outside the Worker);
// * edge/push/mod: the 1%-modified re-push (cutpoint gen: edits of 64 KiB covering 1%), bytes
//   sent ÷ novel bytes (goal ≤ 1.05);
// * edge/cpu/query-1000: workerd CPU per existence query of 1,000 ids (HTTP, Worker, the Durable
//   Object's SQLite), half of them present;
// * edge/cpu/ingest-wasm and edge/cpu/ids-wasm: the Worker's own verification in wasm (edge/bench.mjs);
// * edge/memory/4x32MiB: workerd's peak RSS (VmHWM, the whole process: the runtime, the local R2
//   and storage included) during 4 concurrent uploads of ~32 MiB packs (max_pack_bytes), in a
//   fresh runtime;
// * edge/memory/isolate-4x32MiB: the Worker's isolate's peak memory during the same uploads, read
//   through V8's inspector (miniflare's inspectorPort, `Runtime.getHeapUsage` sampled every
//   ~10 ms): the V8 heap, the embedder's heap and the ArrayBuffer backing stores (the body
//   pieces among them), plus the wasm memory's size after the uploads (it never shrinks: its
//   peak; the Worker names it as globalThis.cutpointWasmMemory); goal < 128 MB (the platform's
//   limit per isolate).
// Usage: node bench/harness/edge.mjs [--quick] [--size 1g] [--max-recipe BYTES] [--only pushes,repush,wasm,memory].
// Prints one JSON row per measure. `--only repush`: only the 1%-modified re-push row (edge/push/mod),
// with serve's bytes for the same two pushes beside it; `--max-recipe 16k` (given to serve and the
// edge) commits a file of a few MiB in parts, as a 1 GiB one is at the defaults.
import { spawn, spawnSync, execFileSync } from 'node:child_process'
import { closeSync, mkdtempSync, openSync, readFileSync, readSync, rmSync, statSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { createInterface } from 'node:readline'
import { randomBytes } from 'node:crypto'
import { fileURLToPath, pathToFileURL } from 'node:url'
import { blake3 } from 'hash-wasm'

const root = fileURLToPath(new URL('../../', import.meta.url))
const bin = process.env.CUTPOINT_BIN ?? `${root}native/target/release/cutpoint`
const args = process.argv.slice(2)
if (args.includes('--help') || args.includes('-h')) {
  console.log('usage: node bench/harness/edge.mjs [--quick] [--size 64m|1g] [--max-recipe BYTES] [--only pushes,repush,wasm,memory]')
  process.exit(0)
}
const maxRecipe = args.includes('--max-recipe') ? ['--max-recipe', args[args.indexOf('--max-recipe') + 1]] : []
const quick = args.includes('--quick')
const sizeArg = args.includes('--size') ? args[args.indexOf('--size') + 1] : quick ? '32m' : '1g'
const m = /^(\d+)([mg])$/i.exec(sizeArg)
if (!m) throw new Error(`--size ${sizeArg}: give e.g. 64m or 1g`)
const size = Number(m[1]) * (m[2].toLowerCase() === 'g' ? 2 ** 30 : 2 ** 20)
const MiB = 2 ** 20
const log = (l) => process.stderr.write(`${l}\n`)
const emit = (row) => process.stdout.write(`${JSON.stringify({ section: 'edge', runtime: 'native', server: 'workerd (miniflare)', size, ...row })}\n`)
const dir = mkdtempSync(join(tmpdir(), 'cutpoint-bench-edge-'))

/** CPU seconds (user + system) of a process so far. */
function cpu(pid) {
  const f = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1].split(' ')
  return (Number(f[11]) + Number(f[12])) / 100
}
const status = (pid, k) => Number(new RegExp(`${k}:\\s+(\\d+)`).exec(readFileSync(`/proc/${pid}/status`, 'utf8'))[1]) / 1024

/**
 * A POST whose connection failed (seen now and then on this loaded machine: EPIPE while the
 * body was still being sent) is tried again, at most twice, and said so; HTTP answers are not.
 */
async function post(url, body) {
  for (let t = 0; ; t++) {
    try {
      return await fetch(url, { method: 'POST', body })
    } catch (e) {
      if (t >= 2) throw e
      log(`POST ${new URL(url).pathname}: ${e?.cause?.code ?? e}; trying again`)
    }
  }
}

function timedPush(file, name, url) {
  const t0 = performance.now()
  const out = execFileSync(bin, ['push', file, '--name', name, '--json', '--no-cache', '--store', url], { encoding: 'utf8', maxBuffer: 1 << 26 })
  return { s: (performance.now() - t0) / 1000, ...JSON.parse(out.trim().split('\n').pop()) }
}

async function firstLine(child) {
  return new Promise((resolve, reject) => {
    createInterface({ input: child.stdout }).once('line', resolve)
    child.once('exit', (c) => reject(new Error(`exited ${c} before listening`)))
  })
}

async function serve() {
  const child = spawn(bin, ['serve', '--data', join(dir, 'serve'), '--listen', '127.0.0.1:0', ...maxRecipe], { stdio: ['ignore', 'pipe', 'inherit'] })
  const url = /(http:\/\/127\.0\.0\.1:\d+)/.exec(await firstLine(child))[1]
  child.stdout.resume()
  return { url, stop: () => child.kill('SIGKILL') }
}

/** `node edge/dev.mjs` in its own process group, and its workerd process. */
async function edge(sub, extra = []) {
  const child = spawn(process.execPath, [`${root}edge/dev.mjs`, '--port', '0', '--dir', join(dir, sub), ...maxRecipe, ...extra], { stdio: ['ignore', 'pipe', 'inherit'], detached: true })
  const url = /(http:\/\/127\.0\.0\.1:\d+)/.exec(await firstLine(child))[1]
  child.stdout.resume()
  const ps = spawnSync('ps', ['-o', 'pid=,comm=', '-g', String(child.pid)], { encoding: 'utf8' }).stdout
  const workerd = Number(ps.split('\n').map((l) => l.trim().split(/\s+/)).find((f) => f[1] === 'workerd')?.[0])
  if (!workerd) throw new Error('no workerd process under the edge store')
  return { url, workerd, stop: () => { try { process.kill(-child.pid, 'SIGKILL') } catch {} } }
}

/** A framed pack (PROTOCOL.md 3.1) of random 8 KiB chunks, at most `max` bytes. */
async function pack(max) {
  const n = Math.floor((max - 52) / (36 + 8192))
  const parts = [Buffer.from('CPPACK\x00\x01\x01\x00\x00\x00\x00\x00\x00\x00', 'latin1')]
  for (let i = 0; i < n; i++) {
    const c = randomBytes(8192)
    const head = Buffer.alloc(36)
    head.writeUInt32LE(c.length, 0)
    Buffer.from(await blake3(c), 'hex').copy(head, 4)
    parts.push(head, c)
  }
  const end = Buffer.alloc(36)
  end.writeBigUInt64LE(BigInt(n), 4)
  parts.push(end)
  return Buffer.concat(parts)
}

/** The data: v0 random, v1 with 64 KiB edits covering 1% of it. */
function gen() {
  const mods = Math.max(1, Math.round(size / 100 / 65536))
  execFileSync(bin, ['gen', '--out', join(dir, 'data'), '--size', String(size), '--versions', '1', '--mods', String(mods), '--mod-size', '65536', '--seed', '9'], { stdio: ['ignore', 'ignore', 'inherit'] })
  return [join(dir, 'data', 'v0.bin'), join(dir, 'data', 'v1.bin')]
}

/** `--only repush`: v0 then v1 pushed to serve and to the edge; the edge's re-push row, serve's bytes beside it. */
async function repush() {
  const [v0, v1] = gen()
  const s = await serve()
  let sm
  try {
    timedPush(v0, 'f', s.url)
    sm = timedPush(v1, 'f', s.url)
  } finally {
    s.stop()
  }
  const e = await edge('edge')
  try {
    const ef = timedPush(v0, 'f', e.url)
    const mod = timedPush(v1, 'f', e.url)
    emit({ name: 'edge/push/mod', what: '1%-modified re-push to the edge store: bytes sent ÷ novel bytes', value: mod.sent_bytes / Math.max(1, mod.novel_bytes), unit: 'ratio', goal: '≤ 1.05',
      seconds: mod.s, sent_bytes: mod.sent_bytes, novel_bytes: mod.novel_bytes, parts: mod.parts, parts_sent: mod.parts_sent, first_parts: ef.parts,
      serve_sent_bytes: sm.sent_bytes, serve_novel_bytes: sm.novel_bytes, serve_seconds: sm.s, max_recipe: maxRecipe[1] ?? null })
  } finally {
    e.stop()
  }
}

async function pushes() {
  const [v0, v1] = gen()
  const mib = statSync(v0).size / MiB

  const s = await serve()
  let first
  try {
    first = timedPush(v0, 'f', s.url)
  } finally {
    s.stop()
  }
  log(`serve: first push ${first.s.toFixed(2)} s`)

  const e = await edge('edge')
  try {
    const c0 = cpu(e.workerd)
    const ef = timedPush(v0, 'f', e.url)
    const fcpu = cpu(e.workerd) - c0
    log(`edge: first push ${ef.s.toFixed(2)} s, workerd ${fcpu.toFixed(1)} s CPU`)
    emit({ name: 'edge/push/first-vs-serve', what: 'first push of the same file: cutpoint serve\'s seconds ÷ the local edge store\'s', value: first.s / ef.s, unit: 'ratio', goal: '≥ 0.5',
      serve_seconds: first.s, edge_seconds: ef.s, workerd_cpu_ms_per_mib: (fcpu * 1000) / mib, sent_bytes: ef.sent_bytes, novel_bytes: ef.novel_bytes })
    const floor = await r2Floor(v0)
    log(`bare R2 put of the same bytes: ${floor.s.toFixed(2)} s, workerd ${floor.cpu.toFixed(1)} s CPU`)
    emit({ name: 'edge/push/r2-floor-vs-serve', what: 'a bare Worker that only puts the same bytes (8 MiB bodies, 2 at a time) into the local R2 stand-in: serve\'s first push seconds ÷ its seconds (the most the local edge can reach)',
      value: first.s / floor.s, unit: 'ratio', seconds: floor.s, workerd_cpu_ms_per_mib: (floor.cpu * 1000) / mib })
    const mod = timedPush(v1, 'f', e.url)
    emit({ name: 'edge/push/mod', what: '1%-modified re-push to the edge store: bytes sent ÷ novel bytes', value: mod.sent_bytes / Math.max(1, mod.novel_bytes), unit: 'ratio', goal: '≤ 1.05',
      seconds: mod.s, sent_bytes: mod.sent_bytes, novel_bytes: mod.novel_bytes })
    // Existence queries of 1,000 ids, half of them stored (from v0's recipe).
    const recipe = await (await fetch(`${e.url}/v1/ns/default/recipes/f?version=1`)).text()
    const have = [...recipe.matchAll(/^([0-9a-f]{64}) /gm)].map((x) => Buffer.from(x[1], 'hex'))
    const n = quick ? 20 : 200
    const bodies = Array.from({ length: n }, (_, q) => Buffer.concat(Array.from({ length: 1000 }, (_, i) => (i % 2 && have.length ? have[(q * 500 + i) % have.length] : randomBytes(32)))))
    const q0 = cpu(e.workerd)
    const t0 = performance.now()
    for (const b of bodies) {
      const r = await post(`${e.url}/v1/ns/default/query`, b)
      if (r.status !== 200) throw new Error(`query: ${r.status}`)
      await r.arrayBuffer()
    }
    emit({ name: 'edge/cpu/query-1000', what: 'workerd CPU per existence query of 1,000 ids (half present): HTTP, Worker, Durable Object SQLite', value: ((cpu(e.workerd) - q0) * 1000) / n, unit: 'ms',
      wall_ms: (performance.now() - t0) / n, queries: n })
  } finally {
    e.stop()
  }
}

/**
 * The floor the local runtime sets: a bare Worker that only puts each request body into the
 * same local R2 stand-in (no verification, no index), fed the file in 8 MiB bodies, two at a
 * time (as the native client uploads its packs). Seconds and workerd CPU.
 */
async function r2Floor(file) {
  const { Miniflare } = await import(pathToFileURL(`${root}edge/node_modules/miniflare/dist/src/index.js`).href)
  const script = `export default { async fetch(req, env) {
    await env.B.put('k/' + crypto.randomUUID(), req.body);
    return new Response('ok');
  } };`
  const mf = new Miniflare({ host: '127.0.0.1', port: 0, modules: true, script, compatibilityDate: '2025-09-01', r2Buckets: { B: 'b' }, r2Persist: join(dir, 'bare') })
  try {
    const url = await mf.ready
    const ps = spawnSync('ps', ['-o', 'pid=,comm=', '--ppid', String(process.pid)], { encoding: 'utf8' }).stdout
    const workerd = Number(ps.split('\n').map((l) => l.trim().split(/\s+/)).find((f) => f[1] === 'workerd')?.[0])
    const fd = openSync(file, 'r')
    const total = statSync(file).size
    const piece = 8 * MiB
    let next = 0
    const c0 = cpu(workerd)
    const t0 = performance.now()
    const lane = async () => {
      while (next < total) {
        const at = next
        next += piece
        const buf = Buffer.alloc(Math.min(piece, total - at))
        readSync(fd, buf, 0, buf.length, at)
        const r = await post(url, buf)
        if (r.status !== 200) throw new Error(`bare put: ${r.status}`)
        await r.text()
      }
    }
    await Promise.all([lane(), lane()])
    closeSync(fd)
    return { s: (performance.now() - t0) / 1000, cpu: cpu(workerd) - c0 }
  } finally {
    await mf.dispose()
  }
}

function wasm() {
  // The Worker's own wasm: pack verification per MiB and the id list check (edge/bench.mjs).
  const wb = JSON.parse(execFileSync(process.execPath, [`${root}edge/bench.mjs`, '32'], { encoding: 'utf8' }).trim().split('\n').pop())
  emit({ name: 'edge/cpu/ingest-wasm', what: 'the Worker\'s pack verification in wasm (re-hash every chunk, frame the stored pack), CPU per MiB', value: wb.ingest_cpu_ms_per_mib_median, unit: 'ms', goal: '≤ 5', best: wb.ingest_cpu_ms_per_mib_best })
  emit({ name: 'edge/cpu/ids-wasm', what: 'the Worker\'s id list check in wasm, CPU per 1,000 ids', value: wb.id_list_check_cpu_ms_per_1000_ids, unit: 'ms' })
}

/** A free TCP port on 127.0.0.1. */
async function freePort() {
  const { createServer } = await import('node:net')
  return new Promise((resolve) => {
    const srv = createServer().listen(0, '127.0.0.1', () => {
      const p = srv.address().port
      srv.close(() => resolve(p))
    })
  })
}

/**
 * The Worker's isolate through V8's inspector (miniflare's inspector proxy, target `core:user:`:
 * the Worker and its Durable Objects): `sample()` reads `Runtime.getHeapUsage` (V8 heap,
 * embedder heap, ArrayBuffer backing stores); `start()` samples every ~10 ms until `stop()`,
 * which returns the peak of their sum and its parts.
 */
async function isolateHeap(port) {
  const { default: WebSocket } = await import(pathToFileURL(`${root}edge/node_modules/ws/wrapper.mjs`).href)
  const ws = new WebSocket(`ws://127.0.0.1:${port}/core:user:`)
  await new Promise((resolve, reject) => {
    ws.once('open', resolve)
    ws.once('error', reject)
  })
  let seq = 0
  const waiting = new Map()
  let context = null
  ws.on('message', (m) => {
    const j = JSON.parse(m)
    if (j.method === 'Runtime.executionContextCreated') context ??= j.params.context.id
    waiting.get(j.id)?.(j)
    waiting.delete(j.id)
  })
  const call = (method, params = {}) => new Promise((resolve, reject) => {
    const id = ++seq
    waiting.set(id, (j) => (j.result ? resolve(j.result) : reject(new Error(JSON.stringify(j.error)))))
    ws.send(JSON.stringify({ id, method, params }))
  })
  const sample = () => call('Runtime.getHeapUsage')
  await call('Runtime.enable')
  // The wasm memory is outside these counts: the Worker names it (globalThis.cutpointWasmMemory).
  const wasmBytes = async () => {
    const r = await call('Runtime.evaluate', { expression: 'globalThis.cutpointWasmMemory?.buffer.byteLength ?? 0', ...(context === null ? {} : { contextId: context }) })
    return Number(r.result?.value ?? 0)
  }
  const total = (u) => u.usedSize + (u.embedderHeapUsedSize ?? 0) + (u.backingStorageSize ?? 0)
  let peak = null
  let samples = 0
  let running = false
  let loop
  return {
    sample,
    wasmBytes,
    start() {
      // Asked every 10 ms without waiting for the answers: the isolate answers between its tasks.
      running = true
      loop = setInterval(() => {
        sample().then((u) => {
          samples++
          if (!peak || total(u) > total(peak)) peak = u
        }, () => {})
      }, 10)
    },
    async stop() {
      running = false
      clearInterval(loop)
      // One more once the uploads are done: the wasm memory never shrinks, so its high-water mark is in it.
      const u = await sample()
      samples++
      if (!peak || total(u) > total(peak)) peak = u
      const wasm = await wasmBytes()
      ws.close()
      // The wasm memory never shrinks: its size now is its peak, added whole (an upper bound).
      return { peak, wasm, total: (peak ? total(peak) : 0) + wasm, samples }
    },
  }
}

async function memory() {
  // Memory: a fresh runtime, 4 pack uploads of ~32 MiB at once; the isolate read through its inspector.
  const port = await freePort()
  const m2 = await edge('memory', ['--inspector-port', String(port)])
  try {
    const v = await (await fetch(`${m2.url}/v1`)).json()
    const packs = []
    for (let i = 0; i < 4; i++) packs.push(await pack(v.limits.max_pack_bytes))
    const heap = await isolateHeap(port)
    const idle = await heap.sample()
    const idleWasm = await heap.wasmBytes()
    const before = status(m2.workerd, 'VmRSS')
    heap.start()
    const t0 = performance.now()
    const rs = await Promise.all(packs.map((p) => post(`${m2.url}/v1/ns/mem/packs`, p)
      .then(async (r) => [r.status, await r.text()], (e) => [0, String(e?.cause?.code ?? e)])))
    const seconds = (performance.now() - t0) / 1000
    const h = await heap.stop()
    for (const [st, t] of rs) if (st !== 200) throw new Error(`pack upload: ${st} ${t}`)
    emit({ name: 'edge/memory/4x32MiB', what: 'workerd peak RSS (whole process: runtime, local R2 and storage) during 4 concurrent ~32 MiB pack uploads', value: status(m2.workerd, 'VmHWM'), unit: 'MiB',
      rss_before_mib: before, pack_bytes: packs[0].length })
    const mb = (x) => x / 1e6
    emit({ name: 'edge/memory/isolate-4x32MiB', what: 'peak isolate memory (V8 heap + embedder heap + ArrayBuffer backing stores, Runtime.getHeapUsage through the inspector, sampled ~every 10 ms; plus the wasm memory\'s size after, its peak) during 4 concurrent ~32 MiB pack uploads',
      value: mb(h.total), unit: 'MB', goal: '< 128', v8_heap_mb: mb(h.peak.usedSize), embedder_heap_mb: mb(h.peak.embedderHeapUsedSize ?? 0),
      backing_stores_mb: mb(h.peak.backingStorageSize ?? 0), wasm_memory_mb: mb(h.wasm),
      idle_mb: mb(idle.usedSize + (idle.embedderHeapUsedSize ?? 0) + (idle.backingStorageSize ?? 0) + idleWasm), samples: h.samples, seconds })
  } finally {
    m2.stop()
  }
}

const only = args.includes('--only') ? args[args.indexOf('--only') + 1].split(',') : ['pushes', 'wasm', 'memory']
try {
  if (only.includes('pushes')) await pushes()
  if (only.includes('repush')) await repush()
  if (only.includes('wasm')) wasm()
  if (only.includes('memory')) await memory()
} finally {
  rmSync(dir, { recursive: true, force: true })
}
