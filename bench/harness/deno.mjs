// Deno rows of `npm run bench`: the shared WebAssembly benchmark (wasm-bench.mjs) in Deno (V8),
// the library's workers being Deno workers.
//   DENO_NO_UPDATE_CHECK=1 deno run -A bench/harness/deno.mjs CONFIG.json   -> JSON rows on stdout
import { runWasmBench } from './wasm-bench.mjs'
import * as cp from '../../web/dist/web/src/index.js'
import * as hashwasm from '../../node_modules/hash-wasm/dist/index.esm.js'

const root = new URL('../../', import.meta.url)
const cfg = JSON.parse(await Deno.readTextFile(Deno.args[0]))
const enc = new TextEncoder()
const emit = (row) => Deno.stdout.writeSync(enc.encode(`${JSON.stringify(row)}\n`))
const skip = (name, reason) => emit({ section: name.split('/')[0], runtime: 'deno', name, skipped: true, reason })
const log = (l) => Deno.stderr.writeSync(enc.encode(`  ${l}\n`))

async function loadBuild(flavor) {
  const mod = await import(new URL(`web/dist/wasm/${flavor}/cutpoint_wasm.js`, root).href)
  const ex = mod.initSync({ module: await Deno.readFile(new URL(`web/dist/wasm/${flavor}/cutpoint_wasm_bg.wasm`, root)) })
  return { mod, memory: ex.memory }
}

let versionBytes = 0
for (const f of cfg.syn) versionBytes += (await Deno.stat(f)).size
await runWasmBench({
  runtime: 'deno',
  data: await Deno.readFile(cfg.input),
  limits: await Deno.readFile(cfg.limits),
  loadBuild,
  cp,
  hashwasm,
  subtle: crypto.subtle,
  versions: cfg.syn,
  versionBytes,
  workers: cfg.workers,
  flavors: cfg.flavors,
  reps: cfg.reps,
  quick: cfg.quick,
  sections: cfg.sections,
  emit,
  skip,
  log,
})
// Deno keeps the process alive while worker handles linger; the rows are out.
Deno.exit(0)
