// Stage 1 on one thread: each wasm build and backend vs the native CLI's backends, same bytes.
//   node bench/js/stage1.mjs [SIZE=64m] [RUNS=5]
// Each row gives MB/s by wall time and, in brackets, by CPU time of the process (user + system):
// on a machine shared with other work the CPU-time figure is the one to compare.
// Names follow CONVENTIONS 16: stage1/<runtime>-<build>/<backend>/<family>/<size>; MB/s min/median/max.
import { readFileSync } from 'node:fs'
import { execFileSync, spawnSync } from 'node:child_process'
import { cli, dataFile, fmt, loadBuild, machine, stats } from './common.mjs'

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

for (const flavor of ['simd128', 'plain']) {
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
  const r = (m) => `wasm-simd128/native ${(m[`simd128/${profile}`] / m[`native/${profile}`]).toFixed(2)}   wasm-plain/wasm-simd128 ${(m[`plain/${profile}`] / m[`simd128/${profile}`]).toFixed(2)}`
  console.log(`${f.padEnd(6)} wall: ${r(best)}   cpu: ${r(bestCpu)}`)
}
