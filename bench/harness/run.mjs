// `npm run bench` (scripts/bench.sh builds first, then runs this): every measurement of the
// benchmark issue in one run on this machine, written as
//   <out>/<host>-<date>.json   machine, versions, backends, skipped parts, every row with its unit
//   <out>/<host>-<date>.md     the tables (bench/harness/report.mjs)
//   <out>/<host>-<date>-*.svg  the plots (vega-lite, rendered headless in Node)
// and, for a full run into bench/results, the performance section of docs/performance.md (readme.mjs).
//
//   node bench/harness/run.mjs [--quick] [--out DIR] [--no-readme] [--only native,node,deno,chromium,e2e,mtfbc,rapid,store,edge,browser-push,browser-comp,restic,folder,page-folder]
//   (opt-in, not in the default list: --only index-scale, the store's index at 10^7 chunks;
//   --only big, a file of up to 32 GiB pushed and pulled, bench/harness/big-file.mjs)
//
// Sizes: full = 64 MiB of seeded random bytes for speed rows, medians of 5 (JS: 3); a synthetic
// versioned dataset of 4 × 32 MiB (`cutpoint gen`); four TypeScript releases as real data
// (bench/real-data.sh). --quick = 4 MiB, one timed run, 3 × 4 MiB, two 4 MiB slices of the
// cached real data (or skipped): it proves the harness works, its numbers mean nothing.
import { execFileSync, spawn, spawnSync } from 'node:child_process'
import { existsSync, mkdirSync, readFileSync, writeFileSync, readdirSync, openSync, readSync, closeSync } from 'node:fs'
import os from 'node:os'
import { limitsWasm } from './limits-wasm.mjs'
import { parseMtfbc, parseMarkdownTables } from './parse.mjs'
import { writeReport } from './report.mjs'
import { updateReadme } from './readme.mjs'
import { findRestic } from './peer-lib.mjs'

const root = new URL('../../', import.meta.url).pathname
const argv = process.argv.slice(2)
const flag = (f) => argv.includes(f)
const opt = (f, d) => (argv.includes(f) ? argv[argv.indexOf(f) + 1] : d)
const quick = flag('--quick')
const outDir = opt('--out', `${root}bench/results`)
const only = opt('--only', 'native,node,deno,chromium,e2e,memory,mtfbc,rapid,store,edge,browser-push,browser-comp,restic,folder,page-folder').split(',')
const cli = `${root}native/target/release/cutpoint`
const ex = (name) => `${root}native/target/release/examples/${name}`
const cores = os.availableParallelism?.() ?? os.cpus().length
const workers = [...new Set([1, 2, cores])].filter((w) => w <= Math.max(2, cores)).sort((a, b) => a - b)
const threads = [...new Set([1, 2, cores])].filter((w) => w <= cores || w <= 2).sort((a, b) => a - b)
const started = new Date()
const log = (l) => process.stderr.write(`${l}\n`)

const rows = []
const skipped = []
const tables = []
const addRow = (r) => {
  if (r.skipped) skipped.push({ name: r.name, section: r.section, runtime: r.runtime, reason: r.reason })
  else rows.push(r)
}
const skip = (name, section, runtime, reason) => addRow({ name, section, runtime, skipped: true, reason })

// ---- machine and versions ------------------------------------------------------------------------
const sh = (cmd, args, o = {}) => {
  try {
    return execFileSync(cmd, args, { encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'], ...o }).trim()
  } catch (e) {
    return null
  }
}
const cpuinfo = existsSync('/proc/cpuinfo') ? readFileSync('/proc/cpuinfo', 'utf8') : ''
const flags = (cpuinfo.match(/^flags\s*:\s*(.*)$/m)?.[1] ?? '').split(' ')
const pkgVersion = (p) => {
  for (const base of [`${root}bench/node_modules/`, `${root}node_modules/`]) {
    try {
      return JSON.parse(readFileSync(`${base}${p}/package.json`, 'utf8')).version
    } catch {}
  }
  return null
}
const lockVersion = (crate) => readFileSync(`${root}native/Cargo.lock`, 'utf8').match(new RegExp(`name = "${crate}"\\nversion = "([^"]+)"`))?.[1] ?? null
const host = os.hostname()
const date = started.toISOString().slice(0, 10)
const machine = {
  host,
  cpu: os.cpus()[0]?.model ?? 'unknown',
  cores,
  memory_gib: +(os.totalmem() / 2 ** 30).toFixed(1),
  os: `${os.type()} ${os.release()}`,
  distro: (existsSync('/etc/os-release') ? readFileSync('/etc/os-release', 'utf8').match(/^PRETTY_NAME="?([^"\n]*)/m)?.[1] : null) ?? null,
  isa: ['sse4_2', 'avx2', 'avx512f', 'avx512bw', 'avx512vbmi', 'gfni', 'vpclmulqdq'].filter((f) => flags.includes(f)),
  loadavg_start: os.loadavg().map((x) => +x.toFixed(2)),
}
const chromiumExe = process.env.CUTPOINT_CHROMIUM ?? '/usr/bin/chromium'
const denoExe = `${root}node_modules/.bin/deno`
const versions = {
  rustc: sh('rustc', ['--version']),
  cargo: sh('cargo', ['--version']),
  node: process.version,
  deno: existsSync(denoExe) ? sh(denoExe, ['--version'], { env: { ...process.env, DENO_NO_UPDATE_CHECK: '1' } })?.split('\n')[0] ?? null : null,
  chromium: existsSync(chromiumExe) ? sh(chromiumExe, ['--version']) : null,
  cutpoint: sh(cli, ['--version']),
  git: sh('git', ['-C', root, 'rev-parse', '--short', 'HEAD']),
  // Files modified in the working tree when the run started (measured as they were, not as committed).
  git_dirty: (sh('git', ['-C', root, 'status', '--porcelain', '--untracked-files=no']) ?? '').split('\n').filter(Boolean).map((l) => l.replace(/^\s*\S+\s+/, '')),
  'fastcdc (crate)': lockVersion('fastcdc'),
  blake3: lockVersion('blake3'),
  sha2: lockVersion('sha2'),
  'hash-wasm': pkgVersion('hash-wasm'),
  'playwright-core': pkgVersion('playwright-core'),
  '@huggingface/xetchunk-wasm': pkgVersion('@huggingface/xetchunk-wasm'),
  '@dstanesc/wasm-chunking-fastcdc-node': pkgVersion('@dstanesc/wasm-chunking-fastcdc-node'),
  'rabin-wasm': pkgVersion('rabin-wasm'),
  restic: findRestic().version ?? null,
  vega: pkgVersion('vega'),
  'vega-lite': pkgVersion('vega-lite'),
}
const backendsOut = sh(cli, ['backends']) ?? ''
// `cutpoint backends`: one line per backend, then (after "per family") the per-family choice and
// whether the skip-MIN engine is used; only the first part names backends.
const backendLines = backendsOut.split('\n')
const perFamily = backendLines.findIndex((l) => l.startsWith('per family'))
const backends = backendLines.slice(0, perFamily < 0 ? undefined : perFamily).map((l) => l.trim()).filter(Boolean).map((l) => ({ name: l.replace('*', '').trim().split(/\s+/)[0], available: !/not/.test(l), default: l.startsWith('*'), note: l.replace('*', '').trim().split(/\s+/).slice(1).join(' ') }))
const skipMinLine = backendLines.map((l) => l.trim()).find((l) => l.startsWith('skip-min') && /not used/.test(l))
log(`# cutpoint bench${quick ? ' --quick' : ''} — ${started.toISOString()}`)
log(`cpu: ${machine.cpu} | cores: ${cores} | isa: ${machine.isa.join(' ')} | ${machine.distro ?? machine.os}`)
log(`backends: ${backends.map((b) => `${b.name}${b.default ? '*' : ''}${b.available ? '' : '(n/a)'}`).join(' ')}`)
log(`versions: ${Object.entries(versions).map(([k, v]) => `${k} ${Array.isArray(v) ? `[${v.join(', ')}]` : (v ?? 'MISSING')}`).join(' | ')}`)
for (const b of backends) if (!b.available) skip(`backend/${b.name}`, 'chunking', 'native', `${b.name}: ${b.note}`)
if (skipMinLine) skip('engine/skip-min', 'chunking', 'native', `the skip-MIN engine (gear): ${skipMinLine.replace(/^skip-min\s*/, 'stage-1 GB/s ')}`)

// ---- data ----------------------------------------------------------------------------------------
mkdirSync(`${root}bench/data`, { recursive: true })
mkdirSync(`${root}bench/results/tmp`, { recursive: true })
mkdirSync(outDir, { recursive: true })
const size = quick ? '4m' : '64m'
const input = `${root}bench/data/random-${size}-5.bin`
if (!existsSync(input)) execFileSync('sh', ['-c', `"${cli}" gen --stream --size ${size} --seed 5 > "${input}.tmp" && mv "${input}.tmp" "${input}"`])
const synSpec = quick ? { size: '4m', versions: 3, mods: 100 } : { size: '32m', versions: 4, mods: 1000 }
const synDir = `${root}bench/data/bench-syn-${synSpec.size}-${synSpec.versions}-${synSpec.mods}`
if (!existsSync(`${synDir}/v${synSpec.versions - 1}.bin`)) {
  execFileSync(cli, ['gen', '--out', synDir, '--size', synSpec.size, '--versions', String(synSpec.versions - 1), '--mods', String(synSpec.mods), '--seed', '3'], { stdio: ['ignore', 'ignore', 'inherit'] })
}
const syn = readdirSync(synDir).filter((f) => /^v\d+\.bin$/.test(f)).sort((a, b) => parseInt(a.slice(1)) - parseInt(b.slice(1))).map((f) => `${synDir}/${f}`).slice(0, synSpec.versions)
let real = []
let realNote = null
{
  // Quick runs never touch the network: they use the releases only when bench/real-data.sh cached them.
  const cached = `${root}bench/data/real/typescript`
  if (!quick) {
    const r = spawnSync('bash', [`${root}bench/real-data.sh`], { encoding: 'utf8', timeout: 600_000 })
    if (r.status === 0) real = r.stdout.trim().split('\n').filter(Boolean).map((p) => (p.startsWith('/') ? p : `${root}${p}`))
    else realNote = `bench/real-data.sh failed (${(r.stderr || r.error?.message || '').trim().split('\n').pop()})`
  }
  if (!real.length && existsSync(cached)) real = readdirSync(cached).filter((f) => f.endsWith('.tar')).sort().map((f) => `${cached}/${f}`)
  if (!real.length) realNote = `no real data: ${realNote ?? 'quick runs use only releases bench/real-data.sh has cached in bench/data/real (none)'}`
  else realNote = null
  if (quick && real.length) {
    // Quick: two 4 MiB slices of the first releases, enough to exercise every real-data row.
    real = real.slice(0, 2).map((f, i) => {
      const out = `${root}bench/results/tmp/real-quick-${i}.tar`
      const buf = Buffer.alloc(4 << 20)
      const fd = openSync(f, 'r')
      const got = readSync(fd, buf, 0, buf.length, 0)
      closeSync(fd)
      writeFileSync(out, buf.subarray(0, got))
      return out
    })
  }
}
if (realNote) skip('dedup/real', 'dedup', 'native', realNote)
const bytesOf = (fs) => fs.reduce((a, f) => a + readFileSync(f).length, 0)
const datasets = {
  input: { path: input.replace(root, ''), bytes: readFileSync(input).length, what: `cutpoint gen --stream --size ${size} --seed 5 (seeded random bytes)` },
  synthetic: { files: syn.map((f) => f.replace(root, '')), bytes: bytesOf(syn), what: `cutpoint gen --size ${synSpec.size} --versions ${synSpec.versions - 1} --mods ${synSpec.mods} --seed 3 (base + edited versions)` },
  real: { files: real.map((f) => f.replace(root, '')), bytes: real.length ? bytesOf(real) : 0, what: quick ? 'first 4 MiB of two TypeScript release tars (quick)' : 'TypeScript 5.4.2..5.4.5 npm tarballs, uncompressed (bench/real-data.sh)' },
}
const limitsPath = `${root}bench/results/tmp/limits.wasm`
writeFileSync(limitsPath, limitsWasm())

// ---- steps ---------------------------------------------------------------------------------------
const steps = []
/** Runs a command that prints JSON rows; a failure becomes a skipped row with the reason. */
function jsonRows(step, runtime, cmd, args, env = {}) {
  return new Promise((resolve) => {
    const t0 = Date.now()
    log(`## ${step}: ${[cmd, ...args].map((a) => a.replaceAll(root, '')).join(' ')}`)
    const p = spawn(cmd, args, { cwd: root, env: { ...process.env, ...env }, stdio: ['ignore', 'pipe', 'pipe'] })
    let out = ''
    let err = ''
    p.stdout.on('data', (d) => (out += d))
    p.stderr.on('data', (d) => {
      err += d
      process.stderr.write(d)
    })
    p.on('close', (code) => {
      let n = 0
      for (const line of out.split('\n')) {
        if (!line.startsWith('{')) continue
        const r = JSON.parse(line)
        if (r.section === 'meta') steps.push({ step, meta: r })
        else addRow(r)
        n++
      }
      const secs = (Date.now() - t0) / 1000
      steps.push({ step, seconds: +secs.toFixed(1), rows: n, exit: code })
      if (code !== 0) skip(`${step}`, step, runtime, `${cmd.replace(root, '')} exited with ${code}: ${err.trim().split('\n').slice(-3).join(' / ')}`)
      resolve({ out, err, code })
    })
  })
}
const cfgPath = `${root}bench/results/tmp/js-config.json`
// The wasm builds there are (simd128 and plain; a relaxed-SIMD variant where built): each is measured.
const flavorRank = (f) => ({ simd128: 0, 'simd128-relaxed': 1, plain: 2 })[f] ?? 3
const flavors = existsSync(`${root}web/dist/wasm`) ? readdirSync(`${root}web/dist/wasm`).filter((d) => existsSync(`${root}web/dist/wasm/${d}/cutpoint_wasm_bg.wasm`)).sort((a, b) => flavorRank(a) - flavorRank(b)) : []
const jsCfg = { input, limits: limitsPath, syn, real, workers, reps: quick ? 1 : 3, quick, flavors }
writeFileSync(cfgPath, JSON.stringify(jsCfg))
if (!flavors.length) skip('wasm', 'chunking', 'node', 'no wasm build in web/dist/wasm (scripts/build-wasm.sh + npm run build -w web make them)')

if (only.includes('native')) {
  const args = ['--input', input, '--reps', quick ? '1' : '5', '--threads', threads.join(','), '--syn', syn.join(','), '--real', real.join(',')]
  await jsonRows('native', 'native', ex('bench_rows'), quick ? [...args, '--quick'] : args)
}
if (only.includes('node')) await jsonRows('node', 'node', process.execPath, [`${root}bench/harness/node.mjs`, cfgPath])
if (only.includes('deno')) {
  if (!existsSync(denoExe)) skip('deno', 'chunking', 'deno', `deno not found at ${denoExe} (scripts/install-js.sh installs the npm package 'deno')`)
  else await jsonRows('deno', 'deno', denoExe, ['run', '-A', `${root}bench/harness/deno.mjs`, cfgPath], { DENO_NO_UPDATE_CHECK: '1', NO_COLOR: '1' })
}
if (only.includes('chromium')) {
  if (!existsSync(chromiumExe)) skip('chromium', 'chunking', 'chromium', `no browser at ${chromiumExe} (scripts/install-js.sh installs Debian's chromium; CUTPOINT_CHROMIUM=PATH picks another)`)
  else await jsonRows('chromium', 'chromium', process.execPath, [`${root}bench/harness/chromium.mjs`, cfgPath], { CUTPOINT_CHROMIUM: chromiumExe })
}
if (only.includes('e2e')) {
  // The native CLI end to end: `cutpoint stats` (read, chunk, BLAKE3, dedup against earlier files).
  for (const t of [1, cores]) {
    const xs = []
    let ratio = 0
    let chunks = 0
    for (let r = 0; r < (quick ? 1 : 3) + 1; r++) {
      const t0 = performance.now()
      const out = execFileSync(cli, ['stats', '--json', '--threads', String(t), ...syn], { encoding: 'utf8' })
      const s = (performance.now() - t0) / 1000
      if (r > 0) xs.push(s)
      const j = JSON.parse(out)
      ratio = j.total.dedup_ratio
      chunks = j.total.chunks
    }
    xs.sort((a, b) => a - b)
    const bytes = datasets.synthetic.bytes
    addRow({ section: 'e2e', runtime: 'native', name: `e2e/native-cli/gear:2k:8k:64k/blake3/t${t}`, value: bytes / xs[Math.floor(xs.length / 2)] / 1e9, unit: 'GB/s',
      min: bytes / xs[xs.length - 1] / 1e9, max: bytes / xs[0] / 1e9, seconds: xs[Math.floor(xs.length / 2)], bytes, threads: t, dedup_ratio: ratio, chunks, files: syn.length, profile: 'gear:2k:8k:64k', note: 'whole process: start, read files, chunk, hash, dedup' })
    if (cores === 1) break
  }
}
if (only.includes('memory')) {
  // Peak RSS of the CLI chunking a generated stream from stdin (bounded memory).
  const msize = quick ? '64m' : '8g'
  const r = await textStep('memory', 'bash', [`${root}bench/memory.sh`, msize])
  for (const m of r.out.matchAll(/--hash (\w+)\): (\d+) chunks, peak RSS ([\d.]+) MiB, ([\d.]+) s/g)) {
    addRow({ section: 'memory', runtime: 'native', name: `memory/native-cli/${msize}/${m[1]}`, value: Number(m[3]), unit: 'MiB', size: msize, hash: m[1], chunks: Number(m[2]), seconds: Number(m[4]) })
  }
}
if (only.includes('mtfbc')) {
  const r = await textStep('mtfbc', ex('mtfbc_bench'), quick ? ['--quick', '--reps', '1', '--workers', '1,2'] : ['--workers', '1,2,3,4'])
  if (r.code === 0) for (const t of parseMtfbc(r.out)) addTable('mtfbc', t)
}
if (only.includes('rapid')) {
  const env = quick ? { CUTPOINT_MIB: '4', CUTPOINT_FILES: '3', CUTPOINT_REPS: '1', CUTPOINT_FIGS: '8', CUTPOINT_MODS: '1000,5000' } : { CUTPOINT_MIB: '16', CUTPOINT_FILES: '10', CUTPOINT_REPS: '5', CUTPOINT_WORST_REPS: '15' }
  const r = await textStep('rapid', ex('rapid_bench'), [], env)
  if (r.code === 0) for (const t of parseMarkdownTables(r.out)) addTable('rapid', t)
  if (!quick) {
    // The paper measured against sequential Rabin CDC; the same tables against this crate's
    // scalar backend (one rolling chain) give that kind of baseline.
    const rs = await textStep('rapid-scalar', ex('rapid_bench'), [], { ...env, CUTPOINT_FIGS: '8', CUTPOINT_MODS: '1000,2000,5000,10000,20000', CUTPOINT_BACKEND: 'scalar', CUTPOINT_REPS: '3' })
    if (rs.code === 0) for (const t of parseMarkdownTables(rs.out)) addTable('rapid', { ...t, title: `${t.title} — against scalar (sequential) regular CDC, the paper's kind of baseline` })
  }
  if (!quick && real.length) {
    const rr = await textStep('rapid-real', ex('rapid_bench'), [], { CUTPOINT_DATASET: `${root}bench/data/real/typescript`, CUTPOINT_REPS: '3' })
    if (rr.code === 0) for (const t of parseMarkdownTables(rr.out)) addTable('rapid', { ...t, title: `${t.title || t.notes.at(-1) || 'RapidCDC'} (real: TypeScript releases)` })
  }
}

if (only.includes('store')) {
  // The store end to end: push (first, identical, 1%-modified) and pull of a 1 GiB file through
  // `cutpoint serve` on 127.0.0.1, against chunk + hash alone and a plain whole-file upload.
  await jsonRows('store', 'native', process.execPath, [`${root}bench/harness/store.mjs`, ...(quick ? ['--quick'] : [])])
}
if (only.includes('edge')) {
  // The edge store (edge/, the Worker in workerd through miniflare, local R2 and Durable Objects)
  // beside `cutpoint serve`, the same file (1 GiB; --quick 32 MiB): first push ÷ serve, a bare
  // local R2 put of the same bytes (the local floor), 1%-re-push sent ÷ novel, workerd CPU per MiB
  // and per 1,000-id query, the wasm's own CPU, peak RSS during 4 concurrent 32 MiB uploads.
  if (!existsSync(`${root}edge/pkg/cutpoint_edge_wasm_bg.wasm`)) skip('edge', 'edge', 'native', 'edge/pkg is not built (bash scripts/build-edge.sh)')
  else await jsonRows('edge', 'native', process.execPath, [`${root}bench/harness/edge.mjs`, ...(quick ? ['--quick'] : [])])
}
if (only.includes('index-scale')) {
  // Opt-in (not in the default list; ~6 min on 2 vCPUs): the store's SQLite index filled with
  // 10^7 chunks through Store::ingest (ids in sorted order: appends), then Store::query batches
  // of 16384 ids, half present: p50/p99 per batch, ids/s, index size, peak RSS; then the same
  // store served by `cutpoint serve` and queried over HTTP by 4 client threads (batches of 1,000
  // and 16,384 ids): ids/s, p99, the server's RSS and CPU (issue #28). --quick: 10^5 chunks.
  await jsonRows('index-scale', 'native', ex('index_scale'), ['--json', '--sorted', '--chunks', quick ? '100000' : '10000000', '--batches', quick ? '20' : '200', '--serve', `${root}native/target/release/cutpoint`, '--clients', '4'])
}
if (only.includes('big')) {
  // Opt-in (not in the default list; issue #32): push a generated stream (`cutpoint push -`) of
  // the largest size the free disk allows up to 32 GiB (--size or CUTPOINT_BIG_SIZE, e.g. 1g, to
  // choose) and pull it, compared by SHA-256; peak RSS of client and server, seconds per GiB and
  // its ratio to 1 GiB. --big-file: a file on disk instead (three copies). --quick: 256 MiB.
  const size = opt('--size', process.env.CUTPOINT_BIG_SIZE ?? (quick ? '256m' : undefined))
  // --big-sizes 1g,2g,4g,8g (or CUTPOINT_BIG_SIZES): each of those sizes, for the slopes per GiB.
  const sizes = opt('--big-sizes', process.env.CUTPOINT_BIG_SIZES)
  await jsonRows('big', 'native', process.execPath, [`${root}bench/harness/big-file.mjs`, ...(size ? [size] : []), ...(sizes ? ['--sizes', sizes] : []), ...(flag('--big-file') ? ['--file'] : [])])
}
if (only.includes('browser-push')) {
  // The web page in Chromium pushing through the library's client (2 workers) vs `cutpoint push`,
  // and its 1%-modified re-push (sent ÷ novel).
  if (!existsSync(chromiumExe)) skip('store/browser-push', 'store', 'chromium', `no browser at ${chromiumExe}`)
  else await jsonRows('browser-push', 'chromium', process.execPath, [`${root}bench/harness/browser-push.mjs`, ...(quick ? ['--quick'] : [])], { CUTPOINT_CHROMIUM: chromiumExe })
}
if (only.includes('browser-comp')) {
  // The web page in Chromium pushing the TypeScript releases in order with Compression off and
  // auto: bytes sent auto ÷ off (bench/harness/browser-comp.mjs). --quick: the first 3 releases.
  if (!existsSync(chromiumExe)) skip('compression/browser-comp', 'compression', 'chromium', `no browser at ${chromiumExe}`)
  else await jsonRows('browser-comp', 'chromium', process.execPath, [`${root}bench/harness/browser-comp.mjs`, ...(quick ? ['--versions', '3'] : [])], { CUTPOINT_CHROMIUM: chromiumExe })
}

if (only.includes('restic')) {
  // restic 0.18.1 (scripts/install.sh) against `cutpoint push` on the same versioned files in
  // order: 13 TypeScript releases and the synthetic versions (bench/harness/restic.mjs).
  await jsonRows('restic', 'native', process.execPath, [`${root}bench/harness/restic.mjs`, '--syn', syn.join(','), ...(quick ? ['--quick'] : [])])
}
if (only.includes('folder')) {
  // A folder of 1,233 and 10,000 small real files (and 1,233 random ones): first push, unchanged
  // re-push, store size, requests per file, against restic (bench/harness/folder.mjs).
  await jsonRows('folder', 'native', process.execPath, [`${root}bench/harness/folder.mjs`, ...(quick ? ['--quick'] : [])])
}

if (only.includes('page-folder')) {
  // The page pushing a chosen folder of 10,000 generated small files as one pipeline (issue #33):
  // the largest requestAnimationFrame gap during the push (goal ≤ 50 ms), one row per way of
  // choosing it (picker: showDirectoryPicker; drop: a folder dropped through CDP drag events;
  // input: webkitdirectory), from tests/js/web-folder.test.ts (which asserts the picker's and the drop's gaps only against
  // CUTPOINT_FOLDER_GAP, 500 ms by default on a loaded machine). --quick: 1,000 files.
  if (!existsSync(chromiumExe)) skip('store/page-folder', 'store', 'chromium', `no browser at ${chromiumExe}`)
  else
    await jsonRows('page-folder', 'chromium', `${root}node_modules/.bin/vitest`, ['run', 'tests/js/web-folder.test.ts', '--silent=false'], {
      CUTPOINT_CHROMIUM: chromiumExe,
      CUTPOINT_FOLDER_FILES: quick ? '1000' : '10000',
    })
}

function textStep(step, cmd, args, env = {}) {
  return new Promise((resolve) => {
    const t0 = Date.now()
    log(`## ${step}: ${[cmd, ...args].map((a) => a.replaceAll(root, '')).join(' ')} ${Object.entries(env).map(([k, v]) => `${k}=${v.replace(root, '')}`).join(' ')}`)
    const p = spawn(cmd, args, { cwd: `${root}native`, env: { ...process.env, ...env }, stdio: ['ignore', 'pipe', 'pipe'] })
    let out = ''
    let err = ''
    p.stdout.on('data', (d) => {
      out += d
      process.stderr.write(d)
    })
    p.stderr.on('data', (d) => (err += d))
    p.on('close', (code) => {
      steps.push({ step, seconds: +((Date.now() - t0) / 1000).toFixed(1), exit: code, command: [cmd.replace(root, ''), ...args].join(' '), env })
      if (code !== 0) skip(step, step, 'native', `${cmd.replace(root, '')} exited with ${code}: ${err.trim().split('\n').slice(-3).join(' / ')}`)
      resolve({ out, code })
    })
  })
}
function addTable(section, t) {
  tables.push({ section, ...t })
}

// ---- ratios within this run ----------------------------------------------------------------------
const find = (pred) => rows.find(pred)
const memcpy = find((r) => r.name === 'limits/native/memcpy')?.value
for (const r of rows) {
  if (r.section !== 'chunking' && r.section !== 'peers' && r.section !== 'e2e' && r.section !== 'hash') continue
  if (memcpy) r.ratio_to_memcpy = r.value / memcpy
  const rtMem = find((x) => x.name === `limits/${r.runtime}/wasm-memcpy`)?.value
  if (r.runtime !== 'native' && rtMem) r.ratio_to_runtime_memcpy = r.value / rtMem
  if (r.section === 'chunking' && r.profile) {
    const seq = find((x) => x.name === `chunk/native/sequential/${r.profile}`)?.value
    if (seq) r.ratio_to_reference = r.value / seq
  }
  if (r.section === 'peers' && r.avg) {
    // cutpoint on one thread in the same runtime: native SS-CDC with the dispatched backend;
    // in JavaScript the library's chunk() without workers, simd128 build.
    const ours = r.runtime === 'native'
      ? find((x) => x.runtime === 'native' && x.engine === 'sscdc' && x.family === 'gear' && x.avg === r.avg && x.threads === 1 && x.backend === rows.find((y) => y.name === `chunk/native/sscdc-threads/${x.profile}/t1`)?.backend)
      : find((x) => x.runtime === r.runtime && x.engine === 'web-chunk' && x.family === 'gear' && x.avg === r.avg && x.workers === 0 && x.build === 'simd128')
    if (ours) r.ours_vs_peer = ours.value / r.value
  }
}
// Parallel efficiency: value / (one-thread value × threads) for the same engine and profile.
for (const r of rows) {
  if (!(r.threads > 1)) continue
  const one = find((x) => x !== r && x.section === r.section && x.runtime === r.runtime && x.engine === r.engine && x.profile === r.profile && x.build === r.build && x.threads === 1 && (r.section !== 'chunking' || x.name.replace(/\/[tw]1$/, '') === r.name.replace(/\/[tw]\d+$/, '')))
  if (one) r.efficiency = r.value / (one.value * r.threads)
}

// ---- write ---------------------------------------------------------------------------------------
machine.loadavg_end = os.loadavg().map((x) => +x.toFixed(2))
const finished = new Date()
const result = {
  schema: 'cutpoint-bench/1',
  quick,
  started: started.toISOString(),
  finished: finished.toISOString(),
  seconds: +((finished - started) / 1000).toFixed(1),
  command: `npm run bench${quick ? ' -- --quick' : ''}`,
  machine,
  versions,
  backends,
  dispatch: steps.find((s) => s.meta?.dispatch)?.meta?.dispatch ?? null,
  datasets,
  config: { workers, threads, reps_native: quick ? 1 : 5, reps_js: jsCfg.reps },
  units: { 'GB/s': 'bytes / median wall seconds / 1e9 (min/max: slowest/fastest run)', ratio: 'dedup rows: dedup ratio = bytes / unique bytes, files in order; restic and folder rows: cutpoint ÷ restic (or sent ÷ gzip -6), as the row says' },
  steps: steps.filter((s) => !s.meta),
  skipped,
  rows,
  tables,
}
const base = `${outDir}/${host}-${date}${quick ? '-quick' : ''}`
writeFileSync(`${base}.json`, `${JSON.stringify(result, null, 1)}\n`)
const files = await writeReport(result, base)
log(`wrote ${base}.json, ${files.join(', ')}`)
log(`${rows.length} rows, ${tables.length} tables, ${skipped.length} skipped, ${result.seconds} s`)
for (const s of skipped) log(`  SKIPPED ${s.name}: ${s.reason}`)
if (!quick && !flag('--no-readme') && outDir === `${root}bench/results`) {
  updateReadme(`${root}docs/performance.md`, result, base.replace(`${root}`, ''))
  log('docs/performance.md performance section regenerated')
}
