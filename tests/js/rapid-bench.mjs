// RapidCDC in Node vs regular chunking (not a test; run by hand after `npm run build:js`):
//   node tests/js/rapid-bench.mjs [SIZE=64m] [MODS=1000] [REPS=3]
// Generates `cutpoint gen` data (a base v0 and one version v1), the base recipe, then times
// chunk() over v1 in memory: regular (worker pool, and this thread), and RapidCDC per criterion
// with hints from the base recipe; also RapidCDC over v0 with no hints (every region novel).
// Prints the median MB/s of REPS runs and the native CLI's `chunk --rapid` for reference.
import * as cp from '../../web/dist/web/src/index.js'
import { execFileSync } from 'node:child_process'
import { mkdtempSync, readFileSync, rmSync } from 'node:fs'
import { tmpdir, availableParallelism, cpus } from 'node:os'

const [size = '64m', mods = '1000', reps = '3'] = process.argv.slice(2)
const bin = new URL('../../native/target/release/cutpoint', import.meta.url).pathname
const dir = mkdtempSync(`${tmpdir()}/cutpoint-rapid-bench-`)
try {
  execFileSync(bin, ['gen', '--out', dir, '--size', size, '--versions', '1', '--mods', mods, '--seed', '5'])
  execFileSync(bin, ['stats', '--rapid', 'ff+rwt+fpt', '--no-compare', '--save-recipe', `${dir}/v0.recipe`, `${dir}/v0.bin`])
  const info = await cp.init()
  const v0 = new Uint8Array(readFileSync(`${dir}/v0.bin`))
  const v1 = new Uint8Array(readFileSync(`${dir}/v1.bin`))
  const recipe = new Uint8Array(readFileSync(`${dir}/v0.recipe`))
  console.log(`node ${process.version}, ${info.buildId}, ${availableParallelism()} cores (${cpus()[0]?.model}), ${size} data, ${mods} modifications, median of ${reps}`)
  const median = (a) => a.sort((x, y) => x - y)[a.length >> 1]
  async function time(name, input, opts) {
    const ts = []
    let r
    for (let i = 0; i < +reps; i++) {
      const t0 = performance.now()
      const it = cp.chunk(input, opts)
      for await (const _ of it);
      ts.push(performance.now() - t0)
      r = it.rapid
    }
    const mbps = input.length / median(ts) / 1e3
    const extra = r ? `hinted ${r.stats.hintedChunks}/${r.stats.chunks} chunks, rolled ${((100 * r.stats.rolledBytes) / r.stats.bytes).toFixed(1)}% of positions` : ''
    console.log(`${name.padEnd(44)} ${mbps.toFixed(0).padStart(6)} MB/s  ${extra}`)
  }
  for (const workers of [1, 2]) await time(`regular, ${workers} worker(s)`, v1, { workers })
  await time('regular, workers 0 (this thread)', v1, { workers: 0 })
  for (const criterion of cp.CRITERIA) await time(`rapid ${criterion}, v1 with the v0 recipe`, v1, { workers: 2, rapid: { criterion, base: recipe } })
  await time('rapid ff+rwt+fpt, v0 without hints', v0, { workers: 2, rapid: { criterion: 'ff+rwt+fpt' } })
  for (const criterion of cp.CRITERIA) {
    const ts = []
    for (let i = 0; i < +reps; i++) {
      const t0 = performance.now()
      execFileSync(bin, ['chunk', `${dir}/v1.bin`, '--threads', '2', '--rapid', criterion, '--base', `${dir}/v0.recipe`], { stdio: ['ignore', 'ignore', 'ignore'] })
      ts.push(performance.now() - t0)
    }
    console.log(`${`native chunk --rapid ${criterion} --threads 2`.padEnd(44)} ${(v1.length / median(ts) / 1e3).toFixed(0).padStart(6)} MB/s  (process, text output)`)
  }
} finally {
  rmSync(dir, { recursive: true, force: true })
}
