// The store benches' dataset, shared by store.mjs and browser-push.mjs so that both measure the
// same bytes: `cutpoint gen --size S --versions 1 --mods M --mod-size 64k --seed 9`, v0 random and
// v1 with M edits of 64 KiB covering 1% of it; generated once under bench/data/.
import { existsSync } from 'node:fs'
import { execFileSync } from 'node:child_process'

export const bytesOf = (s) => Number(s.replace(/[kmg]$/i, '')) * { k: 1024, m: 1 << 20, g: 1 << 30 }[s.slice(-1).toLowerCase()]

/** `{ total, mods, dataDir, v0, v1 }` for a dataset of `size` ('16m', '1g'), generated if missing. */
export function storeDataset(root, cli, size, log) {
  const total = bytesOf(size)
  const mods = Math.round((total * 0.01) / 65536)
  const dataDir = `${root}bench/data/store-${size}-${mods}`
  if (!existsSync(`${dataDir}/v1.bin`)) {
    log(`generating ${dataDir} (v0 ${size} random, v1 = ${mods} edits of 64 KiB)`)
    execFileSync(cli, ['gen', '--out', dataDir, '--size', size, '--versions', '1', '--mods', String(mods), '--mod-size', '65536', '--seed', '9'], { stdio: ['ignore', 'ignore', 'inherit'] })
  }
  return { total, mods, dataDir, v0: `${dataDir}/v0.bin`, v1: `${dataDir}/v1.bin` }
}
