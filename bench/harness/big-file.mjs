#!/usr/bin/env node
// `npm run bench -- --only big` (opt-in, issue #32): push and pull one large generated input
// through a fresh `cutpoint serve --data DIR` on 127.0.0.1 with default settings (a file of any
// size is committed in recipe parts), checks the pull is byte-identical, and reports the peak
// RSS of the client (GNU time) and of the server (VmHWM) for the push and the pull, and the
// seconds per GiB.
// * Stream (the default): `cutpoint gen --stream --size N | cutpoint push - --name big`; the
//   pull goes to standard output and its SHA-256 is compared with the generator's (run again):
//   no source file nor pulled copy on disk, only the store. A size above 1 GiB also runs 1 GiB
//   first; `--sizes 1g,2g,4g,8g` runs each of those sizes (each in a fresh store, removed after
//   it). Issue #32's rows: the peak RSS slope per GiB of the client and of the server (least
//   squares over the sizes run: flat memory is a slope near 0) and the push time per GiB of the
//   largest ÷ that of 1 GiB (goal ≤ 1.1 for 32 GiB).
// * --file: the old way, a file pushed and pulled to a file, compared with cmp (three copies).
// Size: SIZE if given (e.g. 1g), else the largest of 32, 16, 8, 4, 2, 1 GiB that the free disk
// of the temporary directory holds (stream: once, the store's packs; --file: three times) with
// 2 GiB to spare; the size and why are printed.
// Usage: node bench/harness/big-file.mjs [SIZE] [--sizes S1,S2,...] [--file]. Prints one JSON
// row per measure.
import { spawn, spawnSync } from 'node:child_process'
import { mkdtempSync, rmSync, statfsSync, readFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { createInterface } from 'node:readline'
import { fileURLToPath } from 'node:url'

const root = fileURLToPath(new URL('../../', import.meta.url))
const bin = process.env.CUTPOINT_BIN ?? `${root}native/target/release/cutpoint`
const GiB = 2 ** 30
const dir = mkdtempSync(join(tmpdir(), 'cutpoint-bench-big-'))
const log = (l) => process.stderr.write(`${l}\n`)

const args = process.argv.slice(2)
const fileMode = args.includes('--file')
const copies = fileMode ? 3 : 1
const sizesAt = args.indexOf('--sizes')
const sizeList = sizesAt >= 0 ? (args[sizesAt + 1] ?? '').split(',').map(parseSize) : undefined

function parseSize(arg) {
  const m = /^(\d+)([mg])$/i.exec(arg)
  if (!m) throw new Error(`size '${arg}': give e.g. 512m or 4g`)
  return Number(m[1]) * (m[2].toLowerCase() === 'g' ? GiB : 2 ** 20)
}

/** Least-squares slope of `ys` over `xs` (0 with fewer than two distinct x). */
function slope(xs, ys) {
  const n = xs.length
  const mx = xs.reduce((a, b) => a + b, 0) / n
  const my = ys.reduce((a, b) => a + b, 0) / n
  const sxx = xs.reduce((a, x) => a + (x - mx) ** 2, 0)
  return sxx ? xs.reduce((a, x, i) => a + (x - mx) * (ys[i] - my), 0) / sxx : 0
}

function pickSize() {
  if (sizeList) return { bytes: Math.max(...sizeList), why: `given (--sizes ${args[sizesAt + 1]})` }
  const arg = args.find((a, i) => !a.startsWith('--') && (sizesAt < 0 || i !== sizesAt + 1))
  if (arg) return { bytes: parseSize(arg), why: 'given' }
  const fs = statfsSync(dir)
  const free = fs.bavail * fs.bsize
  for (const g of [32, 16, 8, 4, 2, 1]) {
    if (copies * g * GiB + 2 * GiB <= free) return { bytes: g * GiB, why: `the largest of 32..1 GiB that ${(free / GiB).toFixed(1)} GiB free holds ${copies} time(s)` }
  }
  throw new Error(`not enough free disk in ${dir} (${(free / GiB).toFixed(1)} GiB) for a 1 GiB file`)
}

/** Runs `cmd` under GNU time: [exit code, stdout, peak RSS MiB, seconds]. */
function timed(args, opts = {}) {
  const r = spawnSync('/usr/bin/time', ['-f', '%M %e', bin, ...args], { encoding: 'utf8', maxBuffer: 1 << 26, ...opts })
  const [kib, secs] = (r.stderr.trim().split('\n').pop() ?? '').split(' ').map(Number)
  if (r.status !== 0) throw new Error(`cutpoint ${args[0]} failed: ${r.stderr.trim().split('\n').slice(-3).join(' / ')}`)
  return { out: r.stdout, rssMiB: kib / 1024, seconds: secs }
}

/** Runs a bash pipeline whose `cutpoint` step is timed into a file: [stdout, peak RSS MiB, seconds]. */
function piped(script, timeFile) {
  const r = spawnSync('bash', ['-o', 'pipefail', '-c', script], { encoding: 'utf8', maxBuffer: 1 << 26, stdio: ['ignore', 'pipe', 'inherit'] })
  if (r.status !== 0) throw new Error(`failed: ${script}`)
  const [kib, secs] = readFileSync(timeFile, 'utf8').trim().split('\n').pop().split(' ').map(Number)
  return { out: r.stdout, rssMiB: kib / 1024, seconds: secs }
}

const gen = (bytes) => `"${bin}" gen --stream --size ${bytes} --seed 32`
const time = (f) => `/usr/bin/time -f "%M %e" -o "${f}" "${bin}"`

/** Stream mode: one size pushed from the generator and pulled to a digest, in a fresh store. */
async function streamRun(bytes) {
  const s = await serve()
  try {
    const pt = join(dir, 'push.time')
    const push = piped(`${gen(bytes)} | ${time(pt)} push - --name big --json --store ${s.url}`, pt)
    const rep = JSON.parse(push.out)
    const serverPush = s.hwm()
    const lt = join(dir, 'pull.time')
    const pull = piped(`${time(lt)} pull big -o - --store ${s.url} | sha256sum`, lt)
    const want = spawnSync('bash', ['-o', 'pipefail', '-c', `${gen(bytes)} | sha256sum`], { encoding: 'utf8' }).stdout
    const same = pull.out.split(' ')[0] === want.split(' ')[0] && want.length > 0
    if (!same) throw new Error('the pulled stream differs from the pushed one (sha256)')
    return { push, rep, serverPush, pull, serverPull: s.hwm(), same }
  } finally {
    await s.stop()
    rmSync(join(dir, 'store'), { recursive: true, force: true })
  }
}

async function serve() {
  const data = join(dir, 'store')
  const child = spawn(bin, ['serve', '--data', data, '--listen', '127.0.0.1:0'], { stdio: ['ignore', 'pipe', 'inherit'] })
  const line = await new Promise((r) => createInterface({ input: child.stdout }).once('line', r))
  child.stdout.resume()
  const url = /listening on (\S+)/.exec(line)[1]
  const hwm = () => Number(/VmHWM:\s+(\d+)/.exec(readFileSync(`/proc/${child.pid}/status`, 'utf8'))?.[1] ?? 0) / 1024
  const exited = new Promise((r) => child.once('exit', r))
  return { url, hwm, stop: () => (child.kill('SIGKILL'), exited) }
}

try {
  const { bytes, why } = pickSize()
  const gib = bytes / GiB
  log(`big-file: ${gib} GiB (${why}), ${fileMode ? 'a file' : 'a stream'}, in ${dir}`)
  const row = (name, value, unit, extra = {}) => console.log(JSON.stringify({ section: 'big', runtime: 'native', name: `big/${name}/${gib}g`, value, unit, size_bytes: bytes, size_why: why, input: fileMode ? 'file' : 'stream', ...extra }))
  if (!fileMode) {
    // The sizes run, smallest first (1 GiB and the largest unless --sizes names them).
    const sizes = [...new Set(sizeList ?? (gib > 1 ? [GiB, bytes] : [bytes]))].sort((a, b) => a - b)
    const runs = []
    for (const b of sizes) {
      log(`big-file: pushing ${b / GiB} GiB`)
      const x = await streamRun(b)
      runs.push({ gib: b / GiB, x })
      log(`big-file: ${b / GiB} GiB: client ${x.push.rssMiB.toFixed(1)} MiB, server ${x.serverPush.toFixed(1)} MiB, ${x.push.seconds} s, ids held ${x.rep.ids_held}`)
    }
    const r = runs.at(-1).x
    const base = runs.find((u) => u.gib === 1)?.x
    const points = runs.map((u) => ({ gib: u.gib, client_mib: u.x.push.rssMiB, server_mib: u.x.serverPush, seconds: u.x.push.seconds, ids_held: u.x.rep.ids_held }))
    const gibs = runs.map((u) => u.gib)
    row('push-client-peak-rss', r.push.rssMiB, 'MiB', { parts: r.rep.parts, recipe_bytes: r.rep.recipe_bytes, chunks: r.rep.chunks, ids_held: r.rep.ids_held, client_peak_rss_1g: base?.push.rssMiB, goal: 128 })
    row('push-server-peak-rss', r.serverPush, 'MiB', { server_peak_rss_1g: base?.serverPush, goal: 128 })
    // Growth per GiB of input (MiB of peak RSS per GiB pushed), fitted over the sizes run.
    row('push-client-rss-slope-per-gib', slope(gibs, runs.map((u) => u.x.push.rssMiB)), 'MiB', { per: 'GiB of input', points })
    row('push-server-rss-slope-per-gib', slope(gibs, runs.map((u) => u.x.serverPush)), 'MiB', { per: 'GiB of input', points })
    row('push-seconds-per-gib', r.push.seconds / gib, 's', { per: 'GiB', seconds: r.push.seconds, ratio_to_1g: base ? r.push.seconds / gib / base.push.seconds : undefined })
    if (base && gib > 1) row('push-time-per-gib-ratio', r.push.seconds / gib / base.push.seconds, 'ratio', { what: `push seconds per GiB, ${gib} GiB ÷ 1 GiB (issue #32: ≤ 1.1 at 32 GiB)`, goal: 1.1, seconds: r.push.seconds, seconds_1g: base.push.seconds })
    row('pull-client-peak-rss', r.pull.rssMiB, 'MiB', { byte_identical: r.same, compared: 'sha256 of the pull vs of the generator' })
    row('pull-server-peak-rss', r.serverPull, 'MiB')
    row('pull-seconds-per-gib', r.pull.seconds / gib, 's', { per: 'GiB', seconds: r.pull.seconds })
    rmSync(dir, { recursive: true, force: true })
    process.exit(0)
  }
  const file = join(dir, 'big.bin')
  const g = spawnSync('bash', ['-c', `"${bin}" gen --stream --size ${bytes} --seed 32 > "${file}"`], { stdio: 'inherit' })
  if (g.status !== 0) throw new Error('cutpoint gen failed')
  const s = await serve()
  try {
    const push = timed(['push', file, '--name', 'big.bin', '--json', '--store', s.url])
    const rep = JSON.parse(push.out)
    const serverPush = s.hwm()
    const out = join(dir, 'pulled.bin')
    const pull = timed(['pull', 'big.bin', '-o', out, '--store', s.url])
    const same = spawnSync('cmp', [file, out]).status === 0
    if (!same) throw new Error('the pulled file differs from the pushed one')
    row('push-client-peak-rss', push.rssMiB, 'MiB', { parts: rep.parts, recipe_bytes: rep.recipe_bytes, chunks: rep.chunks })
    row('push-server-peak-rss', serverPush, 'MiB')
    row('push-seconds-per-gib', push.seconds / gib, 's/GiB', { seconds: push.seconds })
    row('pull-client-peak-rss', pull.rssMiB, 'MiB', { byte_identical: same })
    row('pull-server-peak-rss', s.hwm(), 'MiB')
    row('pull-seconds-per-gib', pull.seconds / gib, 's/GiB', { seconds: pull.seconds })
  } finally {
    s.stop()
  }
} finally {
  rmSync(dir, { recursive: true, force: true })
}
