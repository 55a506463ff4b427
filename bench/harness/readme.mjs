// Regenerates the performance section of docs/performance.md (linked from the README) from one
// results JSON: everything between
// `<!-- bench:begin -->` and `<!-- bench:end -->` is replaced, never typed by hand.
//   node bench/harness/readme.mjs [bench/results/HOST-DATE.json]   (default: the newest full run)
import { readFileSync, writeFileSync, readdirSync } from 'node:fs'
import { dirname, relative } from 'node:path'
import { markdown } from './report.mjs'

const root = new URL('../../', import.meta.url).pathname
const BEGIN = '<!-- bench:begin -->'
const END = '<!-- bench:end -->'
const f2 = (x, d = 2) => (typeof x === 'number' ? x.toFixed(d) : '—')

function headline(res) {
  const R = res.rows
  const get = (name) => R.find((r) => r.name === name)
  const out = []
  const memcpy = get('limits/native/memcpy')
  const cores = res.machine.cores
  for (const p of ['crc32:2k:16k:64k', 'gear:2k:8k:64k']) {
    const fam = p.split(':')[0]
    const b = res.dispatch?.[fam]
    const ss = get(`chunk/native/sscdc/${b}/${p}/t1`)
    const seq = get(`chunk/native/sequential/${p}`)
    if (ss && seq) out.push([`SS-CDC (${b}) vs optimized sequential CDC, \`${p}\`, one thread`, `${f2(ss.value)} vs ${f2(seq.value)} GB/s = **${f2(ss.value / seq.value)}×**`])
  }
  const g1 = get(`chunk/native/sscdc/${res.dispatch?.gear}/gear:2k:8k:64k/t1`)
  const fc = get('peer/native/fastcdc-v2020/2k:8k:64k')
  const fc16 = get('peer/native/fastcdc-v2016/2k:8k:64k')
  if (g1 && fc) out.push(['default profile vs the `fastcdc` crate v2020 / v2016, 2k:8k:64k, one thread', `${f2(g1.value)} vs ${f2(fc.value)} / ${f2(fc16?.value)} GB/s = **${f2(g1.value / fc.value)}× / ${f2(g1.value / (fc16?.value ?? NaN))}×**`])
  if (g1 && memcpy) out.push(['default profile, one thread, vs native memcpy of the same buffer', `${f2(g1.value / memcpy.value)} (memcpy ${f2(memcpy.value)} GB/s)`])
  const gN = get(`chunk/native/sscdc-threads/gear:2k:8k:64k/t${cores}`)
  if (gN && cores > 1) out.push([`${cores} threads on one buffer, default profile`, `${f2(gN.value)} GB/s, efficiency **${f2(gN.efficiency)}**`])
  for (const rt of ['node', 'deno', 'chromium']) {
    const n = get(`stage1/native/${res.dispatch?.crc32}/crc32:4k:16k:128k`)
    const a2 = get('stage1/native/avx2/crc32:4k:16k:128k')
    for (const b of ['simd128', 'simd128-relaxed']) {
      const s = get(`stage1/${rt}-wasm-${b}/simd128/crc32:4k:16k:128k`)
      if (s && n) out.push([`wasm ${b} stage 1 in ${rt} vs native ${res.dispatch?.crc32} / avx2, \`crc32:4k:16k:128k\`, one thread`, `${f2(s.value)} vs ${f2(n.value)} / ${f2(a2?.value)} GB/s = ${f2(s.value / n.value)} / ${f2(s.value / (a2?.value ?? NaN))}`])
    }
  }
  const e2e = R.filter((r) => r.section === 'e2e')
  if (e2e.length) out.push(['end to end (chunk + BLAKE3 + dedup), synthetic versions', e2e.map((r) => `${r.name.split('/')[1]} ${r.threads}t ${f2(r.value)} GB/s`).join(', ')])
  const naive = R.filter((r) => r.section === 'dedup' && r.what === 'naive' && r.sweep === 'segment')
  for (const set of ['synthetic', 'real']) {
    const xs = naive.filter((r) => r.dataset === set)
    if (xs.length) out.push([`dedup lost by naive segment-parallel chunking (${set}, crc32:2k:16k:64k, segments ${xs.map((r) => `${r.segment >> 10}k`).join('/')})`, `${xs.map((r) => `${f2(r.reduction_pct, 1)}%`).join(' / ')} (SS-CDC loses 0: same chunks as sequential)`])
  }
  // RapidCDC (examples/rapid_bench): ff's chunking speedup against 0.8 × its dedup ratio (the
  // RapidCDC paper's Figure 8 claim), against the SS-CDC baseline and the scalar one; Figure 12.
  const T = (res.tables ?? []).filter((t) => t.section === 'rapid')
  const col = (t, name) => t.columns.indexOf(name)
  for (const t of T.filter((t) => t.title?.startsWith('Figure 8 analog'))) {
    const ff = t.rows.filter((r) => r[col(t, 'criterion')] === 'ff')
    if (!ff.length) continue
    const kind = t.title.includes('overwrite') ? 'overwrite' : 'insert/delete'
    const base = t.title.includes('scalar') ? 'scalar (sequential) regular CDC, the paper\'s kind of baseline' : `SS-CDC regular CDC (${res.dispatch?.rabin ?? 'best backend'})`
    const cells = ff.map((r) => {
      const sp = r[col(t, 'speedup')]
      const dd = r[col(t, 'dedup')]
      return `${r[col(t, 'paper mods')]}: ${f2(sp)} vs ${f2(0.8 * dd)}${sp >= 0.8 * dd ? ' ✓' : ''}`
    })
    out.push([`RapidCDC ff chunking speedup vs 0.8 × its dedup ratio, ${kind}, against ${base} (paper mods: speedup vs goal)`, cells.join('; ')])
  }
  const w = T.find((t) => t.title?.startsWith('Figure 12 analog'))
  if (w) {
    const xs = w.rows.map((r) => r[col(w, 'chunking slowdown %')])
    out.push(['RapidCDC worst case (every hint rejected): chunking slowdown vs regular CDC over all rows', `${f2(Math.min(...xs), 1)}% … ${f2(Math.max(...xs), 1)}% (median ${f2([...xs].sort((a, b) => a - b)[xs.length >> 1], 1)}%)`])
  }
  for (const m of R.filter((r) => r.section === 'memory')) {
    if (m.runtime === 'chromium') out.push([`peak PSS of Chromium's processes during the web page's push of a ${m.size} File (${m.workers} workers${m.name.endsWith('/gc') ? ', GC before each sample' : ''})`, `${f2(m.value, 1)} MiB (${f2(m.before_mib, 1)} before the push)`])
    else out.push([`peak RSS, \`cutpoint chunk -\` over a ${m.size} generated stream, --hash ${m.hash}`, `${f2(m.value, 1)} MiB`])
  }
  // The store: each client's first push of the same file to a fresh store on 127.0.0.1, against
  // the native \`cutpoint push\` measured in the same run (issue #16's goals: browser >= 0.5x).
  const nat = get('store/push/first')
  for (const [name, who] of [['store/push-node/first', 'Node (library, a path)'], ['store/push-deno/first', 'Deno (library, a path)'], ['store/browser-push/first', 'Chromium (web page, 2 workers, a File)']]) {
    const r = get(name)
    if (!r) continue
    const ns = r.native_seconds ?? nat?.seconds
    if (ns) out.push([`first push of a${r.size ? ` ${r.size}` : ''} file to \`cutpoint serve\`: ${who} vs native \`cutpoint push\``, `${f2(r.seconds)} vs ${f2(ns)} s = **${f2(ns / r.seconds)}×**`])
  }
  const mod = get('store/browser-push/mod')
  if (mod?.sent_over_novel) out.push(['1%-modified re-push from the browser: bytes sent ÷ novel bytes', `${f2(mod.sent_over_novel, 3)} (native: ${f2(get('store/push/mod')?.sent_over_novel, 3)})`])
  // restic 0.18.1 beside `cutpoint push` (bench/harness/restic.mjs, folder.mjs; issues #28, #33).
  const ok = (x, goal) => (x <= goal ? ' ✓' : '')
  for (const t of R.filter((r) => r.section === 'restic' && r.dataset === 'real' && r.name.endsWith('/total'))) {
    const how = t.mode === 'default' ? '' : `, --compression ${t.mode}`
    out.push([`TypeScript releases in order (${t.versions}) vs restic${how}: bytes sent / stored, ÷ restic (goal ≤ 0.6)`, `**${f2(t.sent_over_restic)}**${ok(t.sent_over_restic, 0.6)} / **${f2(t.stored_over_restic)}**${ok(t.stored_over_restic, 0.6)} (${f2(t.sent_bytes / 1e6, 1)} vs ${f2(t.restic_sent_bytes / 1e6, 1)} MB sent)`])
    out.push([`the same: each push's time ÷ restic backup, median / worst (goal ≤ 0.5); restore ÷ restic restore (goal ≤ 0.5)`, `${f2(t.time_over_restic_median)} / ${f2(t.time_over_restic_max)}${ok(t.time_over_restic_max, 0.5)}; ${f2(t.restore_over_restic)}${ok(t.restore_over_restic, 0.5)}`])
  }
  for (const f of R.filter((r) => r.section === 'folder')) {
    out.push([`a folder of ${f.files} ${f.variant.startsWith('random') ? 'random' : 'real small'} files vs restic: first push / unchanged re-push time ÷ restic (goal ≤ 1.0); requests per file; stored ÷ files`, `${f2(f.first_over_restic)}${ok(f.first_over_restic, 1)} / ${f2(f.again_over_restic)}${ok(f.again_over_restic, 1)}; ${f2(f.requests_per_file, 3)}; ${f2(f.stored_over_bytes)}`])
  }
  return `| what | result |\n|---|---|\n${out.map((r) => `| ${r.join(' | ')} |`).join('\n')}\n`
}

export function updateReadme(readmePath, res, base) {
  const text = readFileSync(readmePath, 'utf8')
  const a = text.indexOf(BEGIN)
  const b = text.indexOf(END)
  if (a < 0 || b < a) throw new Error(`${readmePath}: markers ${BEGIN} ... ${END} not found`)
  // Links relative to the file written (docs/performance.md: one level below the root).
  const up = relative(dirname(readmePath), root)
  const link = up ? `${up}/${base}` : base
  const body = [
    `<!-- generated by bench/harness/readme.mjs from ${base}.json: edit that script, not this text -->`,
    `Generated from \`${base}.json\` (\`npm run bench\`; full tables: [\`${base}.md\`](${link}.md)).`,
    '',
    headline(res),
    markdown(res, { readme: true, svgPrefix: `${link}-` }),
    '',
    `MT-FBC (TTTD, FBC single- vs multi-thread) and RapidCDC tables: [\`${base}.md\`](${link}.md).`,
  ].join('\n')
  writeFileSync(readmePath, `${text.slice(0, a + BEGIN.length)}\n${body}\n${text.slice(b)}`)
}

if (process.argv[1] && import.meta.url === `file://${process.argv[1]}`) {
  let f = process.argv[2]
  if (!f) {
    const dir = `${root}bench/results`
    f = `${dir}/${readdirSync(dir).filter((x) => x.endsWith('.json') && !x.includes('-quick')).sort().pop()}`
  }
  const res = JSON.parse(readFileSync(f, 'utf8'))
  updateReadme(`${root}docs/performance.md`, res, f.replace(root, '').replace(/\.json$/, ''))
  console.log(`docs/performance.md regenerated from ${f}`)
}
