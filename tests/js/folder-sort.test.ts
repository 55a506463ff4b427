// The page's folder walks sort a folder's entries by name in slices (web/app/sources.ts,
// issue #33: 5,000 names sorted in one task held the page's thread for 135 ms on a loaded machine).
import { describe, expect, it } from 'vitest'
import { sortByName } from '../../web/app/sources.js'

describe('sortByName (the page’s folder walks)', () => {
  it('sorts as a stable sort does, at every size around its runs', async () => {
    let seed = 7
    const rand = () => ((seed = (seed * 1103515245 + 12345) >>> 0) / 2 ** 32)
    for (const n of [0, 1, 2, 255, 256, 257, 511, 513, 700, 5000]) {
      // Repeated names: their order must be kept (stable).
      const list = Array.from({ length: n }, (_, i) => ({ name: `f${Math.floor((rand() * n) / 3)}`, i }))
      const want = [...list].sort((p, q) => (p.name < q.name ? -1 : p.name > q.name ? 1 : 0))
      const got = await sortByName(list, { maybe: async () => {} })
      expect(got.map((x) => x.i), `n=${n}`).toEqual(want.map((x) => x.i))
    }
  })

  it('gives the thread back while it sorts a large folder', async () => {
    const list = Array.from({ length: 5000 }, (_, i) => ({ name: `f${(i * 7919) % 5000}` }))
    let asked = 0
    const got = await sortByName(list, { maybe: async () => void asked++ })
    expect(got.map((x) => x.name)).toEqual(list.map((x) => x.name).sort())
    // Runs of 256 and every 256 merged entries at least: many chances to yield, not one task.
    expect(asked).toBeGreaterThan(50)
  })

  it('reads each name once (a getter into the browser)', async () => {
    let reads = 0
    const list = Array.from({ length: 1000 }, (_, i) => ({
      get name() {
        reads++
        return `n${999 - i}`
      },
    }))
    await sortByName(list, { maybe: async () => {} })
    expect(reads).toBe(1000)
  })
})
