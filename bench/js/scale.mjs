// Node: chunk a file by path with 1 and 2 workers (and more if given); throughput, 2-vs-1
// efficiency, and peak RSS of this process (the workers are threads of it).
//   [POOL=1] node bench/js/scale.mjs [SIZE=256m] [WORKERS=1,2] [HASH=none,blake3] [RUNS=3]
import { dataFile, machine, stats, fmt, root } from './common.mjs'

const cp = await import(`${root}web/dist/web/src/index.js`)
const size = process.argv[2] ?? '256m'
const workersList = (process.argv[3] ?? '1,2').split(',').map(Number)
const hashes = (process.argv[4] ?? 'none,blake3').split(',')
const runs = Number(process.argv[5] ?? 3)
// READ_ONCE=1|0 forces the option; unset: the library's default (off for paths).
const readOnce = process.env.READ_ONCE === undefined ? undefined : process.env.READ_ONCE === '1'
// POOL=1: one createPool() per worker count, kept across its runs (an untimed run warms it).
const usePool = process.env.POOL === '1'
const file = dataFile(size)
const info = await cp.init()
console.log(`# Node chunk(path), ${size} random, ${info.buildId}, readOnce ${readOnce ?? 'default'}${usePool ? ', kept pool' : ''}; ${machine()}`)
console.log('# name                                  min median    max MB/s   peak RSS MiB   chunks')
for (const hash of hashes) {
  const med = {}
  for (const workers of workersList) {
    const xs = []
    let peak = 0
    let chunks = 0
    const pool = usePool ? await cp.createPool({ workers }) : undefined
    if (pool) for await (const _ of cp.chunk(file, { pool, hash, readOnce }).batches());
    for (let r = 0; r < runs; r++) {
      const timer = setInterval(() => (peak = Math.max(peak, process.memoryUsage().rss)), 100)
      const t0 = performance.now()
      let bytes = 0
      chunks = 0
      for await (const c of cp.chunk(file, pool ? { pool, hash, readOnce } : { workers, hash, readOnce })) {
        bytes += c.length
        chunks++
      }
      xs.push(bytes / ((performance.now() - t0) / 1000) / 1e6)
      clearInterval(timer)
      peak = Math.max(peak, process.memoryUsage().rss)
    }
    pool?.close()
    const s = stats(xs)
    med[workers] = s.median
    console.log(`${`chunk/node/${hash}/w${workers}/${size}`.padEnd(38)} ${fmt(s.min)} ${fmt(s.median)} ${fmt(s.max)}   ${String(Math.round(peak / 2 ** 20)).padStart(8)}   ${chunks}`)
  }
  if (med[1] && med[2]) console.log(`# ${hash}: 2 workers vs 1 = ${(med[2] / med[1]).toFixed(2)}x, efficiency ${(med[2] / med[1] / 2).toFixed(2)}`)
}
