// Shared helpers for the JavaScript benchmarks (Node).
import { readFileSync, existsSync, mkdirSync } from 'node:fs'
import { execFileSync } from 'node:child_process'
import os from 'node:os'

export const root = new URL('../../', import.meta.url).pathname
export const cli = `${root}native/target/release/cutpoint`

export function machine() {
  const cpu = os.cpus()[0]?.model ?? 'unknown cpu'
  return `${cpu}, ${os.cpus().length} cores, node ${process.version}`
}

/** A file of `size` random bytes from the native generator (seeded), cached under bench/data/. */
export function dataFile(size, seed = 5) {
  const dir = `${root}bench/data`
  mkdirSync(dir, { recursive: true })
  const f = `${dir}/random-${size}-${seed}.bin`
  if (!existsSync(f)) {
    if (!existsSync(cli)) execFileSync('cargo', ['build', '--release', '-p', 'cutpoint-cli'], { cwd: `${root}native`, stdio: 'inherit' })
    execFileSync('sh', ['-c', `"${cli}" gen --stream --size ${size} --seed ${seed} > "${f}"`])
  }
  return f
}

export function stats(xs) {
  const s = [...xs].sort((a, b) => a - b)
  return { min: s[0], median: s[Math.floor(s.length / 2)], max: s[s.length - 1] }
}

export const fmt = (x) => x.toFixed(0).padStart(6)

export async function loadBuild(flavor) {
  const mod = await import(`${root}web/dist/wasm/${flavor}/cutpoint_wasm.js`)
  const ex = mod.initSync({ module: readFileSync(`${root}web/dist/wasm/${flavor}/cutpoint_wasm_bg.wasm`) })
  return { mod, memory: ex.memory }
}
