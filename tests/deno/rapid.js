// Deno: RapidCDC over a path with a base recipe, then with a file hint cache. Run from
// tests/js/rapid.test.ts: deno run --allow-read --allow-write tests/deno/rapid.js FILE RECIPE CACHE
// Prints {"base": [...chunks], "cache": [...chunks], "hintsLoaded": n}.
import * as cp from '../../web/dist/web/src/index.js'

const [file, recipe, cache] = Deno.args
await cp.init()
const base = await cp.chunkAll(file, { workers: 2, rapid: { criterion: 'ff+rwt', base: recipe } })
const it = cp.chunk(file, { workers: 2, rapid: { criterion: 'ff+mt', cache } })
const withCache = []
for await (const c of it) withCache.push(c)
console.log(JSON.stringify({ base, cache: withCache, hintsLoaded: it.rapid.hintsLoaded }))
