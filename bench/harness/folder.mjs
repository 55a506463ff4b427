// A folder of many small real files: `cutpoint push` against restic 0.18.1 (issue #33's Measure
// table). One JSON row per line on stdout (read by run.mjs), progress on stderr.
//   node bench/harness/folder.mjs [--quick]
//
// The files (real, none generated): regular files of 1 byte to 256 KiB - 1, walked in name
// order from, in turn, this repository's node_modules, bench/node_modules, then the sources of
// the crates native/Cargo.lock names (in ~/.cargo/registry/src, there once the native build
// ran); the first N are copied to a temporary folder (their paths kept). The list is written to
// bench/results/tmp/folder-<variant>.list and its SHA-256 is in the row. Variants:
//   real-1233     N = 1,233 (issue #33's folder: 12.3 MB of this repository's node_modules)
//   real-10000    N = 10,000
//   random-1233   the paths and sizes of real-1233, seeded random bytes (incompressible: the
//                 store's own overhead, goal ≤ 1.05 of the files' size)
// --quick: real-40, real-120, random-40 (proves the step works; numbers mean nothing).
//
// Per variant: restic (`restic backup --json DIR`, a fresh repository, default settings) first
// and again unchanged; `cutpoint push` of the same folder into a fresh `cutpoint serve`, first
// and again, timed directly (the store is stopped after the first push to measure its size,
// index included; the row gives the index, the recipe rows' database and the packs apart), and
// started again on the same port for the re-push, which uses the push
// cache of the first, `--cache` in the variant's temporary folder, as restic uses its parent
// snapshot: an unchanged file whose version is still its name's latest is not committed again,
// one `GET files` in all; then once more with `--no-cache`, every file read: the cache's effect); then a second fresh store behind a counting HTTP proxy, the same two
// pushes, to count the requests (by kind) and request bytes per file. `cutpoint push DIR` is used
// when `cutpoint push --help` offers folders (or CUTPOINT_FOLDER_PUSH=dir), else
// `cutpoint push FILE...` with the relative paths (each stored under its file name: two files
// of the same name become two versions of it; `distinct_names` says how many names).
import { createCipheriv, createHash } from 'node:crypto'
import { cpSync, existsSync, lstatSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { basename, dirname } from 'node:path'
import os from 'node:os'
import { cli, countingProxy, dirBytes, storeBytes, emit, findRestic, log, pushHelp, resticRepo, root, run, startStore } from './peer-lib.mjs'

const quick = process.argv.includes('--quick')
const MAX = 256 << 10
const main = process.argv[1] && import.meta.url === `file://${process.argv[1]}`
// CUTPOINT_FOLDER_VARIANTS="real-1233,random-1233" runs only those (real-N / random-N).
const variants = process.env.CUTPOINT_FOLDER_VARIANTS
  ? process.env.CUTPOINT_FOLDER_VARIANTS.split(',').map((id) => ({ id, n: Number(id.split('-')[1]), random: id.startsWith('random-') }))
  : quick
    ? [{ id: 'real-40', n: 40 }, { id: 'real-120', n: 120 }, { id: 'random-40', n: 40, random: true }]
    : [{ id: 'real-1233', n: 1233 }, { id: 'real-10000', n: 10000 }, { id: 'random-1233', n: 1233, random: true }]

const restic = main ? findRestic() : {}
const skipRow = (name, reason) => emit({ section: 'folder', runtime: 'native', name, skipped: true, reason })
if (main && !restic.exe) {
  skipRow('folder', restic.reason)
  process.exit(0)
}
const help = main ? pushHelp() : ''
const pushDir = process.env.CUTPOINT_FOLDER_PUSH ? process.env.CUTPOINT_FOLDER_PUSH === 'dir' : /\bDIR\b|director|folder/i.test(help)

// ---- the files -----------------------------------------------------------------------------------
/** [label, directory] sources in order. */
function sources() {
  const out = [['node_modules', `${root}node_modules`], ['bench-node_modules', `${root}bench/node_modules`]]
  const reg = `${process.env.CARGO_HOME ?? `${os.homedir()}/.cargo`}/registry/src`
  const regs = existsSync(reg) ? readdirSync(reg).sort().map((d) => `${reg}/${d}`) : []
  const lock = readFileSync(`${root}native/Cargo.lock`, 'utf8')
  const crates = [...lock.matchAll(/\[\[package\]\]\nname = "([^"]+)"\nversion = "([^"]+)"\nsource = "registry/g)].map((m) => `${m[1]}-${m[2]}`).sort()
  for (const c of crates) {
    const d = regs.map((r) => `${r}/${c}`).find((p) => existsSync(p))
    if (d) out.push([`cargo/${c}`, d])
  }
  return out
}

/** The first `n` files: `[{ rel, src, size }]` (rel = label/path inside the source). */
export function pickFiles(n) {
  const picked = []
  const walk = (label, dir, rel) => {
    for (const name of readdirSync(dir).sort()) {
      if (picked.length >= n) return
      const p = `${dir}/${name}`
      const st = lstatSync(p)
      if (st.isDirectory()) walk(label, p, `${rel}/${name}`)
      else if (st.isFile() && st.size > 0 && st.size < MAX) picked.push({ rel: `${label}${rel}/${name}`, src: p, size: st.size })
    }
  }
  for (const [label, dir] of sources()) {
    if (picked.length >= n) break
    if (existsSync(dir)) walk(label, dir, '')
  }
  return picked
}

/** Seeded pseudo-random bytes (AES-256-CTR of zeros, key from the seed): incompressible, repeatable. */
function randomBytesSeeded(seed, n) {
  const key = createHash('sha256').update(`cutpoint-folder-${seed}`).digest()
  const c = createCipheriv('aes-256-ctr', key, Buffer.alloc(16))
  return c.update(Buffer.alloc(n))
}

function materialize(files, folder, random) {
  files.forEach((f, i) => {
    const to = `${folder}/${f.rel}`
    mkdirSync(dirname(to), { recursive: true })
    if (random) writeFileSync(to, randomBytesSeeded(i, f.size))
    else cpSync(f.src, to)
  })
}

// ---- one variant ---------------------------------------------------------------------------------
async function cutpointPush(folder, files, url, extra = []) {
  const args = pushDir ? ['push', folder, '--store', url, '--json', ...extra] : ['push', ...files.map((f) => f.rel), '--store', url, '--json', ...extra]
  const r = await run(cli, args, { cwd: pushDir ? undefined : folder })
  return r.s
}

/** The folder of a variant, materialized in `tmp/folder`, its list written: `{ files, bytes, list, folder }`. */
function prepare(v, tmp) {
  const files = pickFiles(v.n)
  if (files.length < v.n) throw new Error(`only ${files.length} files under 256 KiB found for ${v.n} (node_modules, bench/node_modules, the locked crates' sources)`)
  const list = files.map((f) => `${f.size}\t${f.rel}`).join('\n') + '\n'
  mkdirSync(`${root}bench/results/tmp`, { recursive: true })
  writeFileSync(`${root}bench/results/tmp/folder-${v.id}.list`, list)
  const folder = `${tmp}/folder`
  materialize(files, folder, v.random)
  const bytes = files.reduce((a, f) => a + f.size, 0)
  log(`folder ${v.id}: ${files.length} files, ${bytes} bytes (${files[0].rel} … ${files.at(-1).rel})`)
  return { files, bytes, list, folder }
}

/** restic: a fresh repository, the folder backed up twice (the second unchanged). */
async function resticSide(tmp) {
  const repo = await resticRepo(restic.exe, `${tmp}/restic`)
  const first = await repo.backup(['folder'], { cwd: tmp })
  const stored = dirBytes(repo.dir).bytes
  const again = await repo.backup(['folder'], { cwd: tmp })
  log(`  restic: first ${first.s.toFixed(2)} s, again ${again.s.toFixed(2)} s, repository ${stored} bytes`)
  return { first: first.s, again: again.s, stored }
}

/**
 * cutpoint, timed, straight to the store: the first push, then the store's size once it stopped
 * (the index's write-ahead log folded in), then the same store started again for the re-push.
 */
async function timedSide(folder, files, tmp) {
  const dir = `${tmp}/store`
  const cache = ['--cache', `${tmp}/cache`]
  let port = 0
  const timedPush = async (...runs) => {
    const srv = await startStore(dir, port)
    port = Number(new URL(srv.url).port) // the cache is per store URL: the same one again
    try {
      const s = []
      for (const extra of runs) s.push(await cutpointPush(folder, files, srv.url, extra))
      return s
    } finally {
      await srv.stop()
    }
  }
  const [first] = await timedPush(cache)
  const stored = { ...storeBytes(dir), ...storeParts(dir) }
  const [again, againNoCache] = await timedPush(cache, ['--no-cache'])
  log(`  cutpoint: first ${first.toFixed(2)} s, again ${again.toFixed(2)} s (--no-cache ${againNoCache.toFixed(2)} s), store ${stored.bytes} bytes in ${stored.files} files`)
  rmSync(dir, { recursive: true, force: true })
  return { first, again, againNoCache, stored }
}

/** Where a stopped local store's bytes beside the index are: the recipe rows' database and the packs. */
function storeParts(dir) {
  const rows = `${dir}/objects/recipes.sqlite`
  const nsDir = `${dir}/objects/ns`
  const packs = existsSync(nsDir) ? readdirSync(nsDir).reduce((a, ns) => a + dirBytes(`${nsDir}/${ns}/packs`).bytes, 0) : 0
  return { recipeRows: existsSync(rows) ? lstatSync(rows).size : 0, packs }
}

/** cutpoint through the counting proxy, a fresh store: the requests of a first push and a re-push. */
async function countedSide(folder, files, tmp) {
  const srv = await startStore(`${tmp}/store-counted`)
  const proxy = await countingProxy(srv.url)
  const cache = ['--cache', `${tmp}/cache-counted`]
  try {
    await cutpointPush(folder, files, proxy.url, cache)
    const first = proxy.reset()
    await cutpointPush(folder, files, proxy.url, cache)
    const again = proxy.reset()
    log(`  requests: first ${first.requests} (${JSON.stringify(first.by_kind)}), again ${again.requests} (${JSON.stringify(again.by_kind)})`)
    return { first, again }
  } finally {
    await proxy.close()
    await srv.stop()
  }
}

async function variant(v, tmp) {
  const { files, bytes, list, folder } = prepare(v, tmp)
  const r = await resticSide(tmp)
  const { first, again, againNoCache, stored } = await timedSide(folder, files, tmp)
  const { first: cFirst, again: cAgain } = await countedSide(folder, files, tmp)
  const n = files.length
  return {
    section: 'folder',
    runtime: 'native',
    quick,
    name: `folder/${v.id}`,
    what: `${n} ${v.random ? 'files of seeded random bytes, the paths and sizes of real ones' : 'real files'} under 256 KiB`,
    variant: v.id,
    files: n,
    bytes,
    list: `bench/results/tmp/folder-${v.id}.list`,
    list_sha256: createHash('sha256').update(list).digest('hex'),
    list_first: files[0].rel,
    list_last: files.at(-1).rel,
    push_mode: pushDir ? 'cutpoint push DIR' : 'cutpoint push FILE... (each under its file name)',
    distinct_names: pushDir ? n : new Set(files.map((f) => basename(f.rel))).size,
    seconds: first,
    again_seconds: again,
    restic_seconds: r.first,
    restic_again_seconds: r.again,
    first_over_restic: first / r.first,
    again_over_restic: again / r.again,
    again_no_cache_seconds: againNoCache,
    again_no_cache_over_restic: againNoCache / r.again,
    goal_first_over_restic: 1.0,
    goal_again_over_restic: 1.0,
    stored_bytes: stored.bytes,
    stored_files: stored.files,
    stored_objects_bytes: stored.objects,
    stored_index_bytes: stored.index,
    stored_recipe_rows_bytes: stored.recipeRows,
    stored_packs_bytes: stored.packs,
    stored_packs_over_bytes: stored.packs / bytes,
    stored_over_bytes: stored.bytes / bytes,
    restic_stored_bytes: r.stored,
    restic_stored_over_bytes: r.stored / bytes,
    goal_stored_over_bytes: v.random ? 1.05 : null,
    requests_first: cFirst.requests,
    requests_again: cAgain.requests,
    requests_per_file: cFirst.requests / n,
    requests_per_file_again: cAgain.requests / n,
    goal_requests_per_file: n >= 10000 ? 0.05 : null,
    requests_by_kind_first: cFirst.by_kind,
    requests_by_kind_again: cAgain.by_kind,
    request_bytes_first: cFirst.request_body_bytes,
    request_bytes_again: cAgain.request_body_bytes,
    value: first / r.first,
    unit: 'ratio',
  }
}

if (main) emit({ section: 'meta', restic: restic.version, folder_push: pushDir ? 'dir' : 'files' })
for (const v of main ? variants : []) {
  const tmp = mkdtempSync(`${os.tmpdir()}/cutpoint-folder-bench-`)
  try {
    emit(await variant(v, tmp))
  } catch (e) {
    skipRow(`folder/${v.id}`, e.message)
  } finally {
    rmSync(tmp, { recursive: true, force: true })
  }
}
