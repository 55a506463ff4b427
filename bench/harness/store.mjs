// The store end to end on this machine, everything on 127.0.0.1 (one JSON row per line on stdout,
// read by run.mjs; progress on stderr):
//   node bench/harness/store.mjs [--quick] [--size 1g] [--reps 3]
//
// Data: `cutpoint gen --size S --versions 1 --mods M --mod-size 64k --seed 9`: v0 (random) and v1,
// with M edits of 64 KiB (insert, delete or overwrite) covering 1% of the bytes.
// Each repetition starts `cutpoint serve` on a fresh temporary directory and measures, in order:
//   chunk+hash  `cutpoint stats v0 --json` (read, SS-CDC, BLAKE3 per chunk: the push's own work)
//   first push  v0 into the empty store            identical re-push  v0 again
//   1% push     v1 (its novel chunks only)         pull               v1, verified, to a file
//   compressed  the TypeScript release tars (bench/data/real, when cached) pushed one after the
//               other with --compression auto into a namespace of their own: the store decompresses and
//               re-hashes every compressed frame
//   plain upload v0 PUT (streamed, Node's http client) to a minimal HTTP sink (Node, fsync at the end): the whole-file
//                upload a user would otherwise do, to the same machine
//   Node / Deno  `cutpoint-js push` (web/src/cli, the library's client) of v0 then v1 into a
//                namespace of their own (so the first push is as novel as the native one): rows
//                store/push-node/{first,mod} and store/push-deno/{first,mod}, with the native
//                push's time over theirs (`speed_vs_native`)
// and the server's CPU seconds (utime + stime from /proc) during each push. Figures are medians.
// The yardstick of the store's ingest CPU (issue #28: ≤ 2): BLAKE3 of v0's bytes in 8 KiB pieces
// on one core (native/target/release/examples/blake3_rate); rows store/ingest-cpu/{raw,compressed}
// give the store's CPU per GiB received (raw bytes, decompressed) over it.
import { execFileSync, spawn } from 'node:child_process'
import { existsSync, mkdtempSync, readFileSync, readdirSync, rmSync, statSync, createReadStream, createWriteStream, mkdirSync } from 'node:fs'
import { createServer, request } from 'node:http'
import os from 'node:os'
import { storeDataset } from './store-data.mjs'

const root = new URL('../../', import.meta.url).pathname
const argv = process.argv.slice(2)
const opt = (f, d) => (argv.includes(f) ? argv[argv.indexOf(f) + 1] : d)
const quick = argv.includes('--quick')

// `--sink DIR`: be the plain-upload baseline server (PUT body → DIR/upload, fsync, 201).
if (argv.includes('--sink')) {
  const dir = opt('--sink')
  const srv = createServer((req, res) => {
    const f = createWriteStream(`${dir}/upload`)
    req.pipe(f)
    f.on('finish', () => {
      execFileSync('sync', [`${dir}/upload`])
      res.writeHead(201).end()
    })
  })
  srv.listen(0, '127.0.0.1', () => process.stdout.write(`sink on http://127.0.0.1:${srv.address().port}\n`))
  await new Promise(() => {})
}

const cli = `${root}native/target/release/cutpoint`
const size = opt('--size', quick ? '16m' : '1g')
const reps = Number(opt('--reps', quick ? '1' : '3'))
const log = (l) => process.stderr.write(`${l}\n`)
const { total, mods, dataDir, v0, v1 } = storeDataset(root, cli, size, log)
const clk = Number(execFileSync('getconf', ['CLK_TCK'], { encoding: 'utf8' }).trim()) || 100
const serverCpu = (pid) => {
  const f = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1].split(' ')
  return (Number(f[11]) + Number(f[12])) / clk // utime + stime
}

/** Starts a process and resolves with it and its first stdout line. */
function startServer(cmd, args) {
  return new Promise((resolve, reject) => {
    const p = spawn(cmd, args, { stdio: ['ignore', 'pipe', 'inherit'] })
    let buf = ''
    p.stdout.on('data', (d) => {
      buf += d
      const nl = buf.indexOf('\n')
      if (nl >= 0 && !p.url) {
        p.url = buf.slice(0, nl).match(/(http:\/\/\S+)/)?.[1]
        resolve(p)
      }
    })
    p.on('error', reject)
    p.on('exit', (c) => (p.url ? null : reject(new Error(`${cmd} exited with ${c} before it listened`))))
  })
}
const timed = (cmd, args) => {
  const t0 = performance.now()
  const out = execFileSync(cmd, args, { encoding: 'utf8', maxBuffer: 1 << 28, stdio: ['ignore', 'pipe', 'inherit'] })
  return { s: (performance.now() - t0) / 1000, out }
}

/** PUT a file's bytes, streamed (Node's http client): the seconds until the sink answered. */
function plainUpload(file, url) {
  return new Promise((resolve, reject) => {
    const t0 = performance.now()
    const req = request(url, { method: 'PUT', headers: { 'content-length': statSync(file).size } }, (res) => {
      res.resume()
      res.on('end', () => (res.statusCode === 201 ? resolve((performance.now() - t0) / 1000) : reject(new Error(`sink answered ${res.statusCode}`))))
    })
    req.on('error', reject)
    createReadStream(file, { highWaterMark: 1 << 20 }).pipe(req)
  })
}

// BLAKE3 of the same bytes on one core, seconds per GiB (the best of 3, CPU time).
const b3 = `${root}native/target/release/examples/blake3_rate`
const blake3 = existsSync(b3) ? JSON.parse(execFileSync(b3, [v0], { encoding: 'utf8' })) : null
if (!blake3) log(`no ${b3}: the ingest-cpu rows are left out (cargo build --release -p cutpoint-store --examples)`)
const realDir = `${root}bench/data/real/typescript`
const realTars = existsSync(realDir) ? readdirSync(realDir).filter((f) => f.endsWith('.tar')).sort().map((f) => `${realDir}/${f}`) : []
const runs = []
for (let r = 0; r < reps; r++) {
  const dir = mkdtempSync(`${os.tmpdir()}/cutpoint-store-bench-`)
  const srv = await startServer(cli, ['serve', '--data', `${dir}/store`, '--listen', '127.0.0.1:0'])
  const store = ['--store', srv.url, '--json']
  const run = {}
  try {
    run.chunk = timed(cli, ['stats', v0, '--json']).s
    const push = (file, name) => {
      const c0 = serverCpu(srv.pid)
      const t = timed(cli, ['push', file, '--name', name, ...store])
      return { s: t.s, server_cpu: serverCpu(srv.pid) - c0, ...JSON.parse(t.out) }
    }
    run.first = push(v0, 'f')
    run.again = push(v0, 'f')
    run.chunk1 = timed(cli, ['stats', v1, '--json']).s
    run.mod = push(v1, 'f')
    const c0 = serverCpu(srv.pid)
    const pulled = timed(cli, ['pull', 'f', '-o', `${dir}/pulled`, ...store])
    run.pull = { s: pulled.s, server_cpu: serverCpu(srv.pid) - c0 }
    if (statSync(`${dir}/pulled`).size !== statSync(v1).size) throw new Error('pulled size differs')
    rmSync(`${dir}/pulled`)
    if (realTars.length) {
      // Compressible input: every frame the client kept compressed is decompressed and
      // re-hashed by the store. Per GiB of raw (decompressed) bytes received.
      // One push per tar (a push of several files reported raw pack bytes here: see docs/scale.md).
      const c0 = serverCpu(srv.pid)
      const rows = []
      let secs = 0
      for (const tar of realTars) {
        const t = timed(cli, ['push', tar, '--ns', 'comp', '--compression', 'auto', ...store])
        secs += t.s
        rows.push(JSON.parse(t.out))
      }
      const t = { s: secs }
      const sum = (k) => rows.reduce((a, x) => a + (x[k] ?? 0), 0)
      run.comp = { s: t.s, server_cpu: serverCpu(srv.pid) - c0, novel_bytes: sum('novel_bytes'), compressed_bytes: sum('compressed_bytes'), sent_bytes: sum('sent_bytes') }
    }
    // The library's client through its CLI, under Node and Deno (each its own namespace).
    const jsCli = `${root}web/dist/web/src/cli/main.js`
    const deno = `${root}node_modules/.bin/deno`
    for (const [rt, cmd, pre] of [['node', process.execPath, [jsCli]], ['deno', deno, ['run', '-A', jsCli]]]) {
      if (!existsSync(jsCli) || (rt === 'deno' && !existsSync(deno))) continue
      process.env.DENO_NO_UPDATE_CHECK = '1'
      for (const [k, file] of [['first', v0], ['mod', v1]]) {
        const c0 = serverCpu(srv.pid)
        const t = timed(cmd, [...pre, 'push', file, '--name', 'f', '--ns', `js-${rt}`, ...store])
        run[`${rt}-${k}`] = { s: t.s, server_cpu: serverCpu(srv.pid) - c0, ...JSON.parse(t.out) }
      }
    }
    mkdirSync(`${dir}/sink`)
    const sink = await startServer(process.execPath, [new URL(import.meta.url).pathname, '--sink', `${dir}/sink`])
    try {
      run.plain = await plainUpload(v0, `${sink.url}/upload`)
    } finally {
      sink.kill()
    }
  } finally {
    srv.kill()
    rmSync(dir, { recursive: true, force: true })
  }
  log(`rep ${r + 1}/${reps}: chunk+hash ${run.chunk.toFixed(2)} s, first push ${run.first.s.toFixed(2)} s, identical ${run.again.s.toFixed(2)} s, 1% ${run.mod.s.toFixed(2)} s, pull ${run.pull.s.toFixed(2)} s, plain upload ${run.plain.toFixed(2)} s`)
  runs.push(run)
}

const med = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]
const gib = total / 2 ** 30
const emit = (row) => process.stdout.write(`${JSON.stringify({ section: 'store', runtime: 'native', size, reps, ...row })}\n`)
const chunkS = med(runs.map((x) => x.chunk))
emit({ name: 'store/chunk+hash', what: 'cutpoint stats (chunk + BLAKE3), the push\'s own work', value: total / chunkS / 1e9, unit: 'GB/s', seconds: chunkS })
for (const [k, what] of [['first', 'first push (empty store)'], ['again', 'identical re-push'], ['mod', '1%-modified re-push']]) {
  const s = med(runs.map((x) => x[k].s))
  const last = runs.at(-1)[k]
  emit({
    name: `store/push/${k}`,
    what,
    value: total / s / 1e9,
    unit: 'GB/s',
    seconds: s,
    push_over_chunk: s / chunkS,
    novel_bytes: last.novel_bytes,
    sent_bytes: last.sent_bytes,
    sent_over_novel: last.novel_bytes ? last.sent_bytes / last.novel_bytes : null,
    server_cpu_s_per_gib: med(runs.map((x) => x[k].server_cpu)) / gib,
    chunks: last.chunks,
    novel_chunks: last.novel_chunks,
  })
}
for (const rt of ['node', 'deno']) {
  for (const [k, what] of [['first', 'first push (empty namespace)'], ['mod', '1%-modified re-push']]) {
    const key = `${rt}-${k}`
    if (!runs.every((x) => x[key])) continue
    const s = med(runs.map((x) => x[key].s))
    const last = runs.at(-1)[key]
    process.stdout.write(
      `${JSON.stringify({
        section: 'store',
        runtime: rt,
        size,
        reps,
        name: `store/push-${rt}/${k}`,
        what: `${what}, cutpoint-js under ${rt === 'node' ? 'Node' : 'Deno'} (the library's client)`,
        value: total / s / 1e9,
        unit: 'GB/s',
        seconds: s,
        push_over_chunk: s / chunkS,
        speed_vs_native: med(runs.map((x) => x[k].s)) / s,
        novel_bytes: last.novel_bytes,
        sent_bytes: last.sent_bytes,
        sent_over_novel: last.novel_bytes ? last.sent_bytes / last.novel_bytes : null,
        server_cpu_s_per_gib: med(runs.map((x) => x[key].server_cpu)) / gib,
        chunks: last.chunks,
        novel_chunks: last.novel_chunks,
      })}\n`,
    )
  }
}
if (blake3) {
  // Issue #28 item 2: the store's CPU per GiB of a first push over BLAKE3 of the same bytes on
  // one core (goal ≤ 2), for raw input (v0, random: sent raw) and compressed input.
  const raw = med(runs.map((x) => x.first.server_cpu)) / gib
  emit({ name: 'store/ingest-cpu/raw', what: 'store CPU per GiB of a first push (random bytes, frames raw) ÷ BLAKE3 of the same bytes on one core', value: raw / blake3.s_per_gib, unit: 'ratio', goal: '≤ 2', server_cpu_s_per_gib: raw, blake3_s_per_gib: blake3.s_per_gib })
  if (runs.every((x) => x.comp?.novel_bytes)) {
    const c = med(runs.map((x) => x.comp.server_cpu / (x.comp.novel_bytes / 2 ** 30)))
    const last = runs.at(-1).comp
    emit({ name: 'store/ingest-cpu/compressed', what: `store CPU per GiB of raw bytes received, ${realTars.length} TypeScript tars pushed with --compression auto (frames decompressed and re-hashed) ÷ BLAKE3 on one core`, value: c / blake3.s_per_gib, unit: 'ratio', goal: '≤ 2', server_cpu_s_per_gib: c, blake3_s_per_gib: blake3.s_per_gib, novel_bytes: last.novel_bytes, compressed_bytes: last.compressed_bytes, sent_bytes: last.sent_bytes })
  }
}
// Issue #28 item 4: the 1%-modified re-push over `cutpoint stats` of the same file (v1), each
// the median of the repetitions (goal ≤ 1.2).
const modS = med(runs.map((x) => x.mod.s))
const stats1 = med(runs.map((x) => x.chunk1))
emit({ name: 'store/repush-over-stats', what: '1%-modified re-push (v1) ÷ cutpoint stats of v1 (wall time)', value: modS / stats1, unit: 'ratio', goal: '≤ 1.2', seconds: modS, stats_seconds: stats1, per_rep: runs.map((x) => x.mod.s / x.chunk1) })
const pullS = med(runs.map((x) => x.pull.s))
emit({ name: 'store/pull', what: 'pull of the 1%-modified version, verified, to a file', value: statSync(v1).size / pullS / 1e9, unit: 'GB/s', seconds: pullS, server_cpu_s_per_gib: med(runs.map((x) => x.pull.server_cpu)) / gib })
const plainS = med(runs.map((x) => x.plain))
emit({ name: 'store/plain-upload', what: 'plain upload: the whole file PUT to a minimal HTTP sink on 127.0.0.1 (baseline)', value: total / plainS / 1e9, unit: 'GB/s', seconds: plainS })
