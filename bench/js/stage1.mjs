// Stage 1 on one thread: each wasm build and backend vs the native CLI's backends, same bytes.
//   node bench/js/stage1.mjs [SIZE=64m] [RUNS=5]
//   node --experimental-wasm-relaxed-simd bench/js/stage1.mjs ...   (adds the simd128-relaxed build on Node 20)
// Each row gives MB/s by wall time and, in brackets, by CPU time of the process (user + system):
// on a machine shared with other work the CPU-time figure is the one to compare.
// Names say what ran, so rows from different runs and machines line up:
// stage1/<runtime>-<build>/<backend>/<family>/<size>; MB/s min/median/max.
// Every wasm build and backend must find the same candidates (strict and loose) as the first one
// run for the profile: a difference is reported and the exit status is 1.
//   node bench/js/stage1.mjs diff [CASES=300]
// A seeded differential loop instead: random profiles (windows 3..257, small and large masks,
// magic, gear levels), data (random, sparse, 4-valued, zero runs), slices and segment sizes;
// every wasm build and backend against the scalar kernel of the plain build.
import { readFileSync } from 'node:fs'
import { execFileSync, spawnSync } from 'node:child_process'
import { cli, dataFile, fmt, loadBuild, machine, stats } from './common.mjs'

if (process.argv[2] === 'diff') {
  await differential(Number(process.argv[3] ?? 300))
  process.exit(process.exitCode ?? 0)
}

const size = process.argv[2] ?? '64m'
const runs = Number(process.argv[3] ?? 5)
const file = dataFile(size)
const data = readFileSync(file)
const n = data.length
const profiles = ['gear:2k:8k:64k', 'crc32:2k:16k:64k', 'rabin:4k:8k:12k']
console.log(`# stage 1, one thread, ${size} random bytes; ${machine()}`)
console.log(`# name                                        min  median    max  MB/s`)
const best = {}
const line = (name, s, c) => console.log(`${name.padEnd(42)} ${fmt(s.min)} ${fmt(s.median)} ${fmt(s.max)}   [cpu ${fmt(c.median)}]`)
const bestCpu = {}

const relaxed = WebAssembly.validate(new Uint8Array([0, 97, 115, 109, 1, 0, 0, 0, 1, 5, 1, 96, 0, 1, 123, 3, 2, 1, 0, 10, 15, 1, 13, 0, 65, 0, 253, 15, 65, 0, 253, 15, 253, 128, 2, 11]))
if (!relaxed) console.log('# simd128-relaxed skipped: this engine has no relaxed SIMD (Node 20: --experimental-wasm-relaxed-simd)')
const seen = {}
let differ = 0
for (const flavor of relaxed ? ['simd128', 'simd128-relaxed', 'plain'] : ['simd128', 'plain']) {
  const { mod, memory } = await loadBuild(flavor)
  for (const profile of profiles) {
    for (const backend of mod.backends()) {
      const st = new mod.Stage1(profile, backend, n)
      new Uint8Array(memory.buffer, st.inputPtr(), n).set(data)
      st.scan(Math.min(n, 1 << 22), 0, Math.min(n, 1 << 22), 0) // warm the JIT
      const xs = []
      const cs = []
      for (let r = 0; r < runs; r++) {
        const t0 = performance.now()
        const c0 = process.cpuUsage()
        st.scan(n, 0, n, 0)
        const c1 = process.cpuUsage(c0)
        xs.push(n / ((performance.now() - t0) / 1000) / 1e6)
        cs.push(n / ((c1.user + c1.system) / 1e6) / 1e6)
      }
      const got = `${st.strictOffsets().join(',')}/${st.looseOffsets().join(',')}`
      const first = seen[profile]
      if (!first) seen[profile] = { got, who: `${flavor}/${backend}` }
      else if (first.got !== got) {
        differ++
        console.log(`# CANDIDATES DIFFER: ${flavor}/${backend} vs ${first.who} on ${profile}`)
      }
      st.free()
      const s = stats(xs)
      const c = stats(cs)
      line(`stage1/node-wasm-${flavor}/${backend}/${profile.split(':')[0]}/${size}`, s, c)
      const k = `${flavor}/${profile}`
      best[k] = Math.max(best[k] ?? 0, s.median)
      bestCpu[k] = Math.max(bestCpu[k] ?? 0, c.median)
    }
  }
}

const backends = execFileSync(cli, ['backends']).toString().split('\n').filter((l) => /available/.test(l) && !/not/.test(l)).map((l) => l.replace('*', '').trim().split(/\s+/)[0])
for (const profile of profiles) {
  for (const backend of backends) {
    const xs = []
    const cs = []
    for (let r = 0; r < runs; r++) {
      const args = ['stats', file, '--hash', 'none', '--threads', '1', '--backend', backend, '--profile', profile, '--json']
      const p = spawnSync('bash', ['-c', 'TIMEFORMAT="%3U %3S"; time "$@" > /tmp/cutpoint-bench-stats.json', 'x', cli, ...args], { encoding: 'utf8' })
      const [u, sy] = p.stderr.trim().split('\n').pop().split(' ').map(Number)
      const out = JSON.parse(execFileSync('cat', ['/tmp/cutpoint-bench-stats.json']).toString())
      xs.push(out.total.mb_per_s)
      cs.push(n / (u + sy) / 1e6)
    }
    const s = stats(xs)
    const c = stats(cs)
    line(`stage1/native/${backend}/${profile.split(':')[0]}/${size}`, s, c)
    const k = `native/${profile}`
    best[k] = Math.max(best[k] ?? 0, s.median)
    bestCpu[k] = Math.max(bestCpu[k] ?? 0, c.median)
  }
}
console.log('# ratios (medians; native = best available backend, whole CLI incl. read + stage 2; its CPU time includes the process start)')
for (const profile of profiles) {
  const f = profile.split(':')[0]
  const rel = (m) => (relaxed ? `   wasm-simd128-relaxed/native ${(m[`simd128-relaxed/${profile}`] / m[`native/${profile}`]).toFixed(2)}` : '')
  const r = (m) => `wasm-simd128/native ${(m[`simd128/${profile}`] / m[`native/${profile}`]).toFixed(2)}${rel(m)}   wasm-plain/wasm-simd128 ${(m[`plain/${profile}`] / m[`simd128/${profile}`]).toFixed(2)}`
  console.log(`${f.padEnd(6)} wall: ${r(best)}   cpu: ${r(bestCpu)}`)
}
console.log(differ ? `# ${differ} kernel(s) found other candidates than the first` : '# candidates: every wasm build and backend found the same (per profile)')
if (differ) process.exitCode = 1

async function differential(cases) {
  const relaxedOk = WebAssembly.validate(new Uint8Array([0, 97, 115, 109, 1, 0, 0, 0, 1, 5, 1, 96, 0, 1, 123, 3, 2, 1, 0, 10, 15, 1, 13, 0, 65, 0, 253, 15, 65, 0, 253, 15, 253, 128, 2, 11]))
  const builds = []
  for (const flavor of relaxedOk ? ['plain', 'simd128', 'simd128-relaxed'] : ['plain', 'simd128']) builds.push({ flavor, ...(await loadBuild(flavor)) })
  let s = 12345
  const rnd = (n) => {
    s = (s * 1103515245 + 12345) >>> 0
    return Math.floor((s / 2 ** 32) * n)
  }
  const profiles = ['gear:2k:8k:64k', 'gear:2k:8k:64k:nc=0', 'gear:256:1k:8k:nc=3', 'gear:64:256:1k:nc=1', 'gear:1k:4k:16k:nc=2,seed=9',
    'crc32:2k:16k:64k', 'crc32:256:1k:8k', 'crc32:1k:4k:64k:window=31', 'crc32:64:128:1k:window=16', 'crc32:1k:4k:1m:window=64,magic=7',
    'crc32:2k:8k:64k:window=257', 'crc32:16:32:64:window=5', 'crc32:64k:256k:1m', 'crc32:1m:32m:64m', 'crc32:256:2k:8k:magic=1',
    'rabin:4k:8k:12k', 'rabin:64:256:1k', 'rabin:1k:8k:12k:window=257', 'rabin:64:512:4k:window=17,magic=100', 'rabin:16:64:256:window=3',
    'rabin:2k:64k:256k', 'rabin:64k:256k:1m:magic=3', 'rabin:1m:64m:128m']
  const cap = 3 << 20
  const kernels = {}
  for (const prof of profiles) {
    kernels[prof] = []
    for (const b of builds) for (const backend of b.mod.backends()) kernels[prof].push({ name: `${b.flavor}/${backend}`, st: new b.mod.Stage1(prof, backend, cap), memory: b.memory })
  }
  let bad = 0
  for (let c = 0; c < cases; c++) {
    const prof = profiles[c % profiles.length]
    const len = [rnd(300), rnd(5000), rnd(70000), rnd(cap)][rnd(4)]
    const data = new Uint8Array(len)
    const kind = rnd(4)
    for (let i = 0; i < len; i++) data[i] = kind === 0 ? rnd(256) : kind === 1 ? (rnd(8) === 0 ? rnd(256) : 0) : kind === 2 ? rnd(4) : (i >> 9) % 3 === 0 ? rnd(256) : 0
    const p = rnd(3) === 0 ? 0 : rnd(len + 1)
    const q = p + rnd(len - p + 1)
    const seg = [0, 0, 1 + rnd(100), 1 + rnd(5000), 1 + rnd(200000)][rnd(5)]
    let want
    for (const k of kernels[prof]) {
      new Uint8Array(k.memory.buffer, k.st.inputPtr(), len).set(data)
      k.st.scan(len, p, q, seg)
      const got = `${k.st.strictOffsets().join(',')}/${k.st.looseOffsets().join(',')}`
      if (want === undefined) want = got
      else if (got !== want) {
        bad++
        console.log(`DIFFERENT: ${k.name} ${prof} len ${len} positions ${p}..${q} segment ${seg} data kind ${kind}`)
      }
    }
  }
  console.log(`${cases} cases x ${Object.values(kernels)[0].length} kernels (${builds.map((b) => b.flavor).join(', ')}): ${bad} differences`)
  if (bad) process.exitCode = 1
}
