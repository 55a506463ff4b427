// Markdown tables and SVG plots from one results JSON (bench/harness/run.mjs writes it).
//   node bench/harness/report.mjs bench/results/HOST-DATE.json   -> HOST-DATE.md, HOST-DATE-*.svg
// Plots: vega-lite specs compiled to vega and rendered headless by vega's own SVG renderer
// (no browser, no canvas); bench/package.json pins both.
import { readFileSync, writeFileSync } from 'node:fs'
import { createRequire } from 'node:module'
import { basename } from 'node:path'

const root = new URL('../../', import.meta.url).pathname
const f2 = (x, d = 2) => (x === undefined || x === null || Number.isNaN(x) ? '—' : typeof x === 'number' ? x.toFixed(d) : String(x))
const kib = (n) => (n >= 1 << 20 ? `${n / (1 << 20)} MiB` : `${n / 1024} KiB`)

function table(head, body) {
  if (!body.length) return '_(no rows)_\n'
  return `| ${head.join(' | ')} |\n|${head.map(() => '---').join('|')}|\n${body.map((r) => `| ${r.join(' | ')} |`).join('\n')}\n`
}

/** Rows of one pivot: keys(row) -> row label, col(row) -> column, cell(row) -> text. */
function pivot(rows, rowKey, colKey, cellOf, colOrder) {
  const cols = colOrder ?? [...new Set(rows.map(colKey))]
  const labels = [...new Set(rows.map(rowKey))]
  return {
    cols,
    body: labels.map((l) => [l, ...cols.map((c) => {
      const r = rows.find((x) => rowKey(x) === l && colKey(x) === c)
      return r ? cellOf(r) : '—'
    })]),
  }
}

const PROFILE_ORDER = ['crc32', 'rabin', 'gear'].flatMap((f) => ['2k:8k:64k', '4k:16k:128k', '16k:64k:512k'].map((s) => `${f}:${s}`)).concat(['crc32:2k:16k:64k'])

/** The sections of the Markdown report; `readme` = the subset for docs/performance.md. */
export function markdown(res, { readme = false, svgPrefix = '' } = {}) {
  const R = res.rows
  const out = []
  const m = res.machine
  out.push(`Machine: **${m.cpu}**, ${m.cores} cores, ${m.memory_gib} GiB, ${m.distro ?? m.os}; ISA: ${m.isa.join(', ')}; load average ${m.loadavg_start.join('/')} at the start, ${m.loadavg_end?.join('/')} at the end.`)
  out.push(`Backends: ${res.backends.map((b) => `${b.name}${b.default ? ' (default)' : ''}${b.available ? '' : ' — not available'}`).join(', ')}; dispatch per family: ${Object.entries(res.dispatch ?? {}).map(([k, v]) => `${k} → ${v}`).join(', ')}.`)
  out.push(`Versions: ${Object.entries(res.versions).filter(([k]) => k !== 'git_dirty').map(([k, v]) => `${k} ${v ?? '**missing**'}`).join('; ')}${res.versions.git_dirty?.length ? `; working tree modified in: ${res.versions.git_dirty.join(', ')}` : ''}.`)
  out.push(`Run: \`${res.command}\`, ${res.started} → ${res.finished} (${Math.round(res.seconds)} s). Throughput = bytes / median wall time (GB = 1e9 B), native medians of ${res.config.reps_native}, JavaScript medians of ${res.config.reps_js}. Inputs: ${res.datasets.input.what}, ${kib(res.datasets.input.bytes)}; synthetic versions: ${res.datasets.synthetic.what}, ${(res.datasets.synthetic.bytes / 2 ** 20).toFixed(0)} MiB; real: ${res.datasets.real.what}${res.datasets.real.bytes ? `, ${(res.datasets.real.bytes / 2 ** 20).toFixed(0)} MiB` : ' — none'}. Ratios are within this run.${res.quick ? ' **Quick run: tiny sizes, one timed run: the numbers mean nothing.**' : ''}`)
  if (res.skipped.length) {
    out.push('\n**Skipped** (with the reason):\n')
    out.push(res.skipped.map((s) => `* \`${s.name}\` (${s.runtime}): ${s.reason}`).join('\n'))
  }
  const img = (name, alt) => out.push(`\n![${alt}](${svgPrefix}${name})\n`)

  // Limits
  out.push('\n### Limits (memory bandwidth, same buffer)\n')
  const lim = R.filter((r) => r.section === 'limits')
  out.push(table(['runtime', 'what', 'implementation', 'GB/s'], lim.map((r) => [r.runtime, r.what, r.impl ?? (r.what === 'memcpy' ? 'copy_from_slice' : 'u64 xor loop'), f2(r.value)])))

  // Native chunking
  const ch = R.filter((r) => r.section === 'chunking')
  const nat = ch.filter((r) => r.runtime === 'native')
  const label = (r) => {
    if (r.engine === 'reference' || r.engine === 'sequential') return `${r.engine} (1 thread)`
    if (r.engine === 'stage1') return `stage 1 only: ${r.backend}`
    if (r.engine === 'sscdc') return `SS-CDC ${r.backend}, 1 thread`
    if (r.engine === 'sscdc-threads') return `SS-CDC default engine (${r.backend}), ${r.threads} thread${r.threads > 1 ? 's' : ''}`
    if (r.engine === 'skip-min') return `skip-MIN engine (gear), ${r.threads} thread${r.threads > 1 ? 's' : ''}`
    if (r.engine === 'naive') return `naive 1 MiB segments, ${r.threads} thread${r.threads > 1 ? 's' : ''}`
    return r.name
  }
  const order = (rows) => rows.sort((a, b) => rank(a) - rank(b))
  const rank = (r) => ({ reference: 0, sequential: 1, stage1: 2, sscdc: 3, 'sscdc-threads': 4, 'skip-min': 5, naive: 6 })[r.engine] * 100 + (r.threads ?? 0)
  const cols = PROFILE_ORDER.filter((p) => nat.some((r) => r.profile === p))
  out.push('\n### Chunking, native: GB/s (× the optimized sequential chunker, the paper\'s baseline)\n')
  out.push('Profiles are `FAMILY:AVG/4:AVG:AVG×8`. "stage 1 only" rows time the rolling-hash kernel alone (`avx512-gather` = the SS-CDC paper\'s gather design, `avx512` = what dispatch runs: GF(2)-affine for crc32/rabin); SS-CDC rows are the whole engine (stage 1 + stage 2, no fingerprints).\n')
  {
    const p = pivot(order([...nat]), label, (r) => r.profile, (r) => `${f2(r.value)} (${f2(r.ratio_to_reference)}×)`, cols)
    out.push(table(['engine', ...p.cols], p.body))
  }
  img('chunking-native.svg', 'native chunking throughput per engine and profile')
  out.push('\nRatio to memcpy (native memcpy of the same buffer) and parallel efficiency (GB/s ÷ (1-thread GB/s × threads)), native:\n')
  {
    const sel = order(nat.filter((r) => r.engine === 'sscdc-threads' || r.engine === 'skip-min' || r.engine === 'naive' || (r.engine === 'sscdc' && r.backend === res.dispatch?.[r.family])))
    const p = pivot(sel, label, (r) => r.profile, (r) => `${f2(r.ratio_to_memcpy)}${r.efficiency ? ` / eff ${f2(r.efficiency)}` : ''}`, cols)
    out.push(table(['engine', ...p.cols], p.body))
  }

  // WebAssembly chunking
  const wasm = ch.filter((r) => r.runtime !== 'native')
  out.push('\n### Chunking in WebAssembly: stage 1 alone, one thread, GB/s (× native sequential)\n')
  {
    const s1 = wasm.filter((r) => r.engine === 'stage1')
    const p = pivot(s1, (r) => `${r.runtime} ${r.build}: ${r.backend}`, (r) => r.profile, (r) => `${f2(r.value)} (${f2(r.ratio_to_reference)}×)`, cols.filter((c) => s1.some((r) => r.profile === c)))
    out.push(table(['runtime, build: kernel', ...p.cols], p.body))
  }
  img('chunking-wasm.svg', 'stage 1 per runtime and build vs native')
  out.push('\nThe library\'s `chunk()` over the same bytes (`hash: none`; stage 1 in 1..N workers, stage 2 on the calling thread; the bytes in a SharedArrayBuffer where the runtime has one, workers kept across runs by `createPool`, chunks taken by `batches()`):\n')
  {
    const c = wasm.filter((r) => r.engine === 'web-chunk')
    out.push(table(['runtime', 'build', 'profile', 'workers', 'GB/s', '× native sequential', '× runtime memcpy', 'efficiency', 'chunks'],
      c.map((r) => [r.runtime, r.build, r.profile, r.workers, f2(r.value), f2(r.ratio_to_reference), f2(r.ratio_to_runtime_memcpy, 3), f2(r.efficiency), r.chunks])))
  }
  img('threads.svg', 'scaling with threads and workers')

  // Peers
  const peers = R.filter((r) => r.section === 'peers')
  out.push('\n### Peers on the same bytes (speed)\n')
  out.push(table(['peer', 'runtime', 'version', 'MIN:AVG:MAX', 'GB/s', 'chunks', 'cutpoint ÷ peer (same runtime, gear, one thread: native SS-CDC / Node chunk() without workers)', 'note'],
    peers.map((r) => [r.peer, r.runtime, r.version, r.name.split('/').pop().includes(':') ? r.name.split('/').pop() : `avg ${kib(r.avg)}`, f2(r.value), r.chunks, f2(r.ours_vs_peer), r.note ?? ''])))
  img('peers.svg', 'peer chunkers vs cutpoint')

  // Dedup per profile
  const dd = R.filter((r) => r.section === 'dedup' && r.what === 'profile')
  if (dd.length) {
    out.push('\n### Dedup ratio per chunker (versioned data, files in order; bytes ÷ unique bytes)\n')
    const p = pivot(dd, (r) => `${r.family === r.engine ? r.engine : `SS-CDC ${r.family}`}`, (r) => `${r.dataset} avg ${kib(r.avg)}`, (r) => f2(r.value, 3))
    out.push(table(['chunker', ...p.cols], p.body))
  }
  // Naive vs SS-CDC
  const nv = R.filter((r) => r.section === 'dedup' && r.what === 'naive')
  if (nv.length) {
    out.push('\n### SS-CDC (= sequential) vs naive segment-parallel chunking: dedup ratio (SS-CDC paper, Figures 8–9)\n')
    out.push(table(['dataset', 'varies', 'profile', 'segment', 'SS-CDC', 'naive', 'reduction %'],
      nv.map((r) => [r.dataset, r.sweep, r.profile, kib(r.segment), f2(r.sscdc, 3), f2(r.naive, 3), f2(r.reduction_pct, 1)])))
    img('dedup-naive.svg', 'dedup ratio reduction of naive segment-parallel chunking')
  }

  // Hash
  const hs = R.filter((r) => r.section === 'hash')
  out.push('\n### Fingerprints, one thread, GB/s by piece size\n')
  {
    const p = pivot(hs, (r) => `${r.runtime} ${r.impl} ${r.alg}`, (r) => kib(r.piece), (r) => f2(r.value), [2048, 8192, 16384, 65536].map(kib))
    out.push(table(['runtime, implementation, algorithm', ...p.cols], p.body))
  }
  img('hash.svg', 'fingerprint throughput')

  // End to end
  const e2e = R.filter((r) => r.section === 'e2e')
  out.push('\n### End to end: chunk + BLAKE3 + dedup against the earlier files (synthetic versions, default profile)\n')
  out.push(table(['runtime', 'threads/workers', 'GB/s', 'dedup ratio', 'chunks', '× native memcpy'], e2e.map((r) => [r.name.split('/')[1], r.threads, f2(r.value), f2(r.dedup_ratio, 3), r.chunks, f2(r.ratio_to_memcpy, 3)])))

  // browser-push.mjs: CPU seconds of each side, and the least wall time they allow on this many cores
  const cpuCell = (r) =>
    typeof r.cpu_store === 'number'
      ? `${f2(r.cpu_chromium, 1)} + ${f2(r.cpu_store, 1)} (${f2(r.cpu_bound_seconds, 1)} s on ${r.cores}); ${f2(r.native_cpu_client, 1)} + ${f2(r.native_cpu_store, 1)}`
      : typeof r.cpu_chromium === 'number'
        ? `${f2(r.cpu_chromium, 1)} (Chromium)`
        : '—'
  const st = R.filter((r) => r.section === 'store')
  if (st.length) {
    out.push(`\n### Store: push and pull through \`cutpoint serve\` on 127.0.0.1 (${st[0].size} file, medians of ${st[0].reps}; bench/harness/store.mjs${st.some((r) => r.runtime === 'chromium') ? ', browser-push.mjs' : ''})\n`)
    const mib = (n) => (typeof n === 'number' ? `${(n / 2 ** 20).toFixed(1)} MiB` : '—')
    out.push(table(['what', 'GB/s', 'seconds', 'wall ÷ chunk+hash', '× native push', 'novel', 'sent', 'sent ÷ novel', 'server CPU s/GiB', 'CPU s: Chromium + store (÷ cores); native client + store'], st.map((r) => [r.what, f2(r.value), f2(r.seconds), f2(r.push_over_chunk), f2(r.vs_native), mib(r.novel_bytes), mib(r.sent_bytes), f2(r.sent_over_novel, 3), f2(r.server_cpu_s_per_gib), cpuCell(r)])))
  }
  const ed = R.filter((r) => r.section === 'edge')
  if (ed.length) {
    out.push(`\n### Edge store: the Worker in workerd (miniflare, local R2 and Durable Objects) beside \`cutpoint serve\` (${ed[0].size} bytes; bench/harness/edge.mjs)\n`)
    out.push(table(['what', 'value', 'unit', 'goal', 'seconds', 'workerd CPU ms/MiB'], ed.map((r) => [r.what, f2(r.value, 3), r.unit, r.goal ?? '—', f2(r.edge_seconds ?? r.seconds), f2(r.workerd_cpu_ms_per_mib, 1)])))
  }
  const mem = R.filter((r) => r.section === 'memory')
  if (mem.length) {
    out.push('\n### Peak memory: `cutpoint chunk -` over a generated stream (bench/memory.sh); the web page\'s push in Chromium (bench/harness/browser-push.mjs)\n')
    out.push(table(['what', 'input', 'hash', 'peak RSS MiB', 'chunks', 'seconds'], mem.map((r) => [r.what ?? `${r.runtime} cutpoint chunk -`, r.size, r.hash, f2(r.value, 1), r.chunks, f2(r.seconds, 1)])))
  }
  const bc = R.filter((r) => r.section === 'compression' && !r.skipped)
  if (bc.length) {
    out.push('\n### Browser push with compression: the web page in Chromium, TypeScript releases in order (bench/harness/browser-comp.mjs)\n')
    const ratio = bc.find((r) => r.mode === 'auto/off')
    if (ratio) out.push(`Bytes sent with compression auto ÷ off, all versions: **${f2(ratio.value, 3)}** (goal ≤ ${ratio.goal}; ${mb(ratio.sent_bytes)} vs ${mb(ratio.off_sent_bytes)} MB).\n`)
    out.push(table(['compression', 'versions', 'MB pushed', 'novel MB', 'novel MB as sent (compressed)', 'chunks compressed', 'MB sent', 'seconds'], bc.filter((r) => r.mode !== 'auto/off').map((r) => [r.mode, r.versions, mb(r.bytes), mb(r.novel_bytes), mb(r.compressed_bytes), r.compressed_chunks, mb(r.sent_bytes), f2(r.seconds, 1)])))
  }

  resticSections(R, res, out)

  if (readme) return out.join('\n')

  // Tables from the other examples
  for (const sec of ['mtfbc', 'rapid']) {
    const ts = res.tables.filter((t) => t.section === sec)
    if (!ts.length) continue
    out.push(sec === 'mtfbc' ? '\n### MT-FBC (examples/mtfbc_bench): TTTD, FBC single- vs multi-thread, beside SS-CDC\n' : '\n### RapidCDC (examples/rapid_bench)\n')
    if (sec === 'mtfbc') img('mtfbc.svg', 'MT-FBC single vs multi-thread')
    for (const t of ts) {
      out.push(`\n#### ${t.title}\n`)
      if (t.notes?.length) out.push(t.notes.map((n) => `${n}`).join('\n') + '\n')
      out.push(table(t.columns, t.rows.map((r) => r.map((c) => String(c)))))
    }
  }
  return out.join('\n')
}

/** ≤ goal: ✓, above: ✗, no goal: the value alone. */
const vsGoal = (x, goal, d = 2) => (typeof x !== 'number' ? '—' : typeof goal === 'number' ? `${f2(x, d)} ${x <= goal ? '✓' : '✗'}` : f2(x, d))
const mb = (n) => (typeof n === 'number' ? (n / 1e6).toFixed(2) : '—')

/** The restic comparisons (bench/harness/restic.mjs, folder.mjs): goals of issues #28 and #33. */
function resticSections(R, res, out) {
  const rr = R.filter((r) => r.section === 'restic')
  const restic = res.versions?.restic?.match(/^restic \S+/)?.[0] ?? 'restic'
  const on = `on **${res.machine.cpu}** (${res.machine.cores} cores)`
  if (rr.length) {
    out.push(`\n### ${restic} vs \`cutpoint push\`: versioned files in order, ${on} (bench/harness/restic.mjs)\n`)
    out.push('Each side on a fresh local store / repository on this machine (CPU above), one run; restic with default settings (compression auto), bytes sent = its `data_added_packed` (its index and snapshot files, which a remote repository would receive too, not counted: \`restic_repo_growth\` in the JSON has them); cutpoint bytes sent = every request body of the push, queries and commits included (its \`--json\`, see \`sent_via\`). Stored = every file of the store directory (objects + index) vs the restic repository. Restores are of the last version, both compared byte for byte. ✓ = within the goal of the issue.\n')
    for (const ds of [...new Set(rr.map((r) => r.dataset))]) {
      const tot = rr.filter((r) => r.dataset === ds && r.name.endsWith('/total'))
      if (!tot.length) continue
      out.push(`\n#### ${ds}: ${tot[0].dataset_what}, ${tot[0].versions} versions, ${mb(tot[0].bytes)} MB\n`)
      const cols = tot.map((t) => (t.mode === 'default' ? 'cutpoint (this build has no --compression)' : `cutpoint --compression ${t.mode}`))
      const line = (what, goal, cell) => [what, goal, ...tot.map(cell)]
      const ao = rr.find((r) => r.dataset === ds && r.name.endsWith('/auto-over-off'))
      const body = [
        line('bytes sent, all versions ÷ restic `data_added_packed`', '≤ 0.6', (t) => `${vsGoal(t.sent_over_restic, t.goal_sent_over_restic)} (${mb(t.sent_bytes)} vs ${mb(t.restic_sent_bytes)} MB)`),
        line('bytes stored after all versions ÷ restic repository', '≤ 0.6', (t) => `${vsGoal(t.stored_over_restic, t.goal_stored_over_restic)} (${mb(t.stored_bytes)} vs ${mb(t.restic_stored_bytes)} MB; objects ${mb(t.stored_objects_bytes)}, index ${mb(t.stored_index_bytes)})`),
        line('bytes sent by each push ÷ `gzip -6` of that file, every version after the first: worst (versions within)', '≤ 1.0', (t) => `${vsGoal(t.sent_over_gzip_max_later, t.goal_sent_over_gzip)} (${t.later_versions_within_gzip} of ${t.versions - 1})`),
        line('the same, first version', 'report', (t) => f2(t.sent_over_gzip_first)),
        line('wall time of each push ÷ restic backup of the same file: median / worst', '≤ 0.5', (t) => `${f2(t.time_over_restic_median)} / ${vsGoal(t.time_over_restic_max, t.goal_time_over_restic)} (${f2(t.seconds, 1)} vs ${f2(t.restic_seconds, 1)} s in all)`),
        line('restore of the last version: `cutpoint pull` ÷ `restic restore` (both verified)', '≤ 0.5', (t) => `${vsGoal(t.restore_over_restic, t.goal_restore_over_restic)} (${f2(t.restore_seconds)} vs ${f2(t.restic_restore_seconds)} s${t.restore_verified ? ', identical' : ', **differs**'})`),
      ]
      if (ao) body.push(line('native push bytes sent, compression auto ÷ off (the issue\'s goal is for the browser push, on the tars)', typeof ao.goal === 'number' ? `≤ ${ao.goal}` : 'report', (t) => (t.mode === 'auto' ? vsGoal(ao.value, ao.goal) : '')))
      out.push(table(['row', 'goal', ...cols], body))
      const per = rr.filter((r) => r.dataset === ds && /\/v\d+$/.test(r.name))
      const modes = tot.map((t) => t.mode)
      const vs = [...new Set(per.map((r) => r.version))].sort((a, b) => a - b)
      out.push(`\nPer version (MB = 10⁶ bytes; sent ÷ gzip, goal ≤ 1.0 after the first; time ÷ restic, goal ≤ 0.5):\n`)
      out.push(
        table(
          ['version', 'MB', 'gzip -6 MB', 'restic sent MB', 'restic repository grew MB', 'restic s', ...modes.flatMap((m) => [`${m}: sent MB`, `${m}: ÷ gzip`, `${m}: s`, `${m}: ÷ restic`])],
          vs.map((v) => {
            const xs = modes.map((m) => per.find((r) => r.version === v && r.mode === m))
            const a = xs.find(Boolean)
            return [a.what, mb(a.bytes), mb(a.gzip6_bytes), mb(a.restic_sent_bytes), mb(a.restic_repo_growth), f2(a.restic_seconds), ...xs.flatMap((r) => (r ? [mb(r.sent_bytes), vsGoal(r.sent_over_gzip, r.goal_sent_over_gzip), f2(r.seconds), vsGoal(r.time_over_restic, r.goal_time_over_restic)] : ['—', '—', '—', '—']))]
          }),
        ),
      )
    }
  }
  const fo = R.filter((r) => r.section === 'folder')
  if (fo.length) {
    out.push(`\n### A folder of small files: ${restic} vs \`cutpoint push\`, ${on} (bench/harness/folder.mjs)\n`)
    out.push(`Real files under 256 KiB from this repository's node_modules, bench/node_modules, then the locked crates' sources (the list: \`bench/results/tmp/folder-VARIANT.list\`, its SHA-256 in the JSON), copied to a temporary folder; "random": the same paths and sizes, seeded random bytes. ${fo[0].push_mode}; the re-push uses the push cache of the first (unchanged files are not read, as restic skips them by its parent snapshot), "--no-cache" reads every file again. Requests counted by a proxy in front of the store (a second, untimed pass). ✓ = within the goal of issue #33.\n`)
    out.push(
      table(
        ['folder', 'files', 'MB', 'first push s: cutpoint / restic', 'first ÷ restic (≤ 1.0)', 're-push s: cutpoint / restic', 're-push ÷ restic (≤ 1.0)', 're-push --no-cache s (÷ restic)', 'stored ÷ files (≤ 1.05, random) / restic', 'store MB: objects + index', 'requests per file: first (≤ 0.05 at 10,000) / re-push'],
        fo.map((r) => [r.variant, r.files, mb(r.bytes), `${f2(r.seconds)} / ${f2(r.restic_seconds)}`, vsGoal(r.first_over_restic, r.goal_first_over_restic), `${f2(r.again_seconds)} / ${f2(r.restic_again_seconds)}`, vsGoal(r.again_over_restic, r.goal_again_over_restic), r.again_no_cache_seconds == null ? '—' : `${f2(r.again_no_cache_seconds)} (${f2(r.again_no_cache_over_restic)})`, `${vsGoal(r.stored_over_bytes, r.goal_stored_over_bytes)} / ${f2(r.restic_stored_over_bytes)}`, `${mb(r.stored_objects_bytes)} + ${mb(r.stored_index_bytes)}`, `${vsGoal(r.requests_per_file, r.goal_requests_per_file, 3)} / ${f2(r.requests_per_file_again, 3)}`]),
      ),
    )
  }
}

// ---- plots ---------------------------------------------------------------------------------------
function specs(res) {
  const R = res.rows
  const W = { width: 560, height: 260 }
  const s = {}
  const nat = R.filter((r) => r.section === 'chunking' && r.runtime === 'native' && r.threads === 1)
  s['chunking-native.svg'] = {
    title: 'Native chunking, one thread (GB/s)', ...W,
    data: { values: nat.map((r) => ({ profile: r.profile, engine: r.engine === 'sscdc' ? `SS-CDC ${r.backend}` : r.engine === 'stage1' || r.engine === 'sscdc-threads' || (r.engine === 'skip-min' && r.threads > 1) ? null : r.engine === 'naive' ? 'naive (1 MiB segments)' : r.engine === 'skip-min' ? 'skip-MIN (gear)' : r.engine, gbs: r.value })).filter((x) => x.engine) },
    mark: 'bar',
    encoding: { x: { field: 'profile', type: 'nominal', sort: PROFILE_ORDER, axis: { labelAngle: -30 } }, xOffset: { field: 'engine' }, y: { field: 'gbs', type: 'quantitative', title: 'GB/s' }, color: { field: 'engine', type: 'nominal', scale: { scheme: 'tableau10' } } },
  }
  const s1 = R.filter((r) => r.section === 'chunking' && (r.engine === 'stage1' || r.engine === 'sequential') && r.threads === 1)
  s['chunking-wasm.svg'] = {
    title: 'Stage 1, one thread: native kernels vs WebAssembly (GB/s)', ...W,
    data: { values: s1.map((r) => ({ profile: r.profile, what: r.engine === 'sequential' ? 'native sequential' : `${r.runtime}${r.build ? `-${r.build}` : ''} ${r.backend}`, gbs: r.value })) },
    mark: 'bar',
    encoding: { x: { field: 'profile', type: 'nominal', sort: PROFILE_ORDER, axis: { labelAngle: -30 } }, xOffset: { field: 'what' }, y: { field: 'gbs', type: 'quantitative', title: 'GB/s' }, color: { field: 'what', type: 'nominal' } },
  }
  const th = R.filter((r) => (r.engine === 'sscdc-threads' || r.engine === 'naive' || (r.engine === 'web-chunk' && r.workers > 0)) && r.family === 'gear' && r.avg === 8192)
  s['threads.svg'] = {
    title: 'Scaling, gear:2k:8k:64k (GB/s by threads / workers)', ...W,
    data: { values: th.map((r) => ({ threads: r.threads, what: r.runtime === 'native' ? `native ${r.engine}` : `${r.runtime} chunk() ${r.build}`, gbs: r.value })) },
    mark: { type: 'line', point: true },
    encoding: { x: { field: 'threads', type: 'ordinal' }, y: { field: 'gbs', type: 'quantitative', title: 'GB/s' }, color: { field: 'what', type: 'nominal' } },
  }
  const pe = R.filter((r) => r.section === 'peers' || (r.section === 'chunking' && r.family === 'gear' && ((r.runtime === 'native' && r.threads === 1 && r.engine === 'sscdc' && r.backend === res.dispatch?.gear) || (r.runtime === 'node' && r.engine === 'web-chunk' && r.workers === 0))))
  s['peers.svg'] = {
    title: 'Peers vs cutpoint on the same bytes, one thread (GB/s)', ...W,
    data: { values: pe.map((r) => ({ avg: `${r.avg / 1024} KiB`, who: r.section === 'peers' ? `${r.runtime} ${r.peer}` : r.runtime === 'native' ? 'native cutpoint gear' : `node cutpoint chunk() ${r.build}, no workers`, gbs: r.value })) },
    mark: 'bar',
    encoding: { x: { field: 'avg', type: 'nominal', sort: ['8 KiB', '16 KiB', '64 KiB'] }, xOffset: { field: 'who' }, y: { field: 'gbs', type: 'quantitative', title: 'GB/s' }, color: { field: 'who', type: 'nominal' } },
  }
  const nv = R.filter((r) => r.section === 'dedup' && r.what === 'naive')
  s['dedup-naive.svg'] = {
    title: 'Dedup ratio lost by naive segment-parallel chunking vs SS-CDC (%)',
    data: { values: nv.map((r) => ({ sweep: r.sweep, x: r.sweep === 'segment' ? kib(r.segment) : r.profile, dataset: r.dataset, loss: r.reduction_pct })) },
    facet: { row: { field: 'dataset', type: 'nominal' }, column: { field: 'sweep', type: 'nominal', sort: ['segment', 'min', 'avg', 'max'] } },
    resolve: { scale: { x: 'independent' } },
    spec: { width: 130, height: 140, mark: 'bar', encoding: { x: { field: 'x', type: 'nominal', sort: null, axis: { labelAngle: -45 }, title: null }, y: { field: 'loss', type: 'quantitative', title: 'reduction %' }, color: { field: 'dataset', type: 'nominal', legend: null } } },
  }
  const hs = R.filter((r) => r.section === 'hash')
  s['hash.svg'] = {
    title: 'Fingerprints by piece size (GB/s)',
    data: { values: hs.map((r) => ({ piece: r.piece / 1024, impl: `${r.runtime} ${r.impl}`, alg: r.alg, gbs: r.value })) },
    facet: { column: { field: 'alg', type: 'nominal' } },
    spec: { width: 260, height: 220, mark: { type: 'line', point: true }, encoding: { x: { field: 'piece', type: 'quantitative', scale: { type: 'log', base: 2 }, title: 'piece KiB' }, y: { field: 'gbs', type: 'quantitative', title: 'GB/s' }, color: { field: 'impl', type: 'nominal' } } },
  }
  const mt = res.tables.filter((t) => t.section === 'mtfbc' && /pass 1/.test(t.title))
  const mv = []
  for (const t of mt) {
    const key = t.title.match(/candidate key (\w+)/)?.[1] ?? t.title
    const ci = t.columns.indexOf('MB/s')
    for (const r of t.rows) if (typeof r[ci] === 'number') mv.push({ key, config: r[0], mbs: r[ci] })
  }
  s['mtfbc.svg'] = {
    title: 'MT-FBC pass 1: single stream vs master + N workers (MB/s)', ...W,
    data: { values: mv },
    mark: 'bar',
    encoding: { y: { field: 'config', type: 'nominal', sort: null, title: null }, yOffset: { field: 'key' }, x: { field: 'mbs', type: 'quantitative', title: 'MB/s' }, color: { field: 'key', type: 'nominal', title: 'candidate key' } },
  }
  return s
}

/** Writes BASE.md and BASE-*.svg; returns the file names. */
export async function writeReport(res, base) {
  const req = createRequire(`${root}bench/package.json`)
  const files = []
  let plotsNote = ''
  try {
    const vega = await import(req.resolve('vega'))
    const vl = await import(req.resolve('vega-lite'))
    for (const [name, spec] of Object.entries(specs(res))) {
      if (!spec.data.values.length) continue
      const vg = vl.compile({ $schema: 'https://vega.github.io/schema/vega-lite/v6.json', config: { font: 'sans-serif', legend: { labelLimit: 320 }, range: { category: { scheme: 'tableau20' } } }, ...spec }).spec
      const view = new vega.View(vega.parse(vg), { renderer: 'none' })
      const svg = await view.toSVG()
      view.finalize()
      writeFileSync(`${base}-${name}`, svg)
      files.push(`${basename(base)}-${name}`)
    }
  } catch (e) {
    plotsNote = `\n\n**Plots skipped**: vega / vega-lite failed: ${e.message} (bench/package.json pins them; scripts/install-js.sh installs them)\n`
    res.skipped.push({ name: 'plots', section: 'report', runtime: 'node', reason: `vega/vega-lite: ${e.message}` })
  }
  const md = `# cutpoint benchmark — ${res.machine.host}, ${res.started.slice(0, 10)}\n\n${markdown(res, { svgPrefix: `${basename(base)}-` })}${plotsNote}\n`
  writeFileSync(`${base}.md`, md)
  files.unshift(`${basename(base)}.md`)
  return files
}

if (process.argv[1] && import.meta.url === `file://${process.argv[1]}`) {
  const f = process.argv[2]
  const res = JSON.parse(readFileSync(f, 'utf8'))
  console.log((await writeReport(res, f.replace(/\.json$/, ''))).join('\n'))
}
