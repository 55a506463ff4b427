// The benchmark harness still works: `npm run bench -- --quick` into a temporary directory must
// write the results JSON (machine, versions, backends, rows with units, skipped parts with
// reasons), the Markdown tables and the SVG plots. Asserts structure only, never speed.
// scripts/test-js.sh has built the wasm modules and the library already (CUTPOINT_BENCH_REBUILD=0).
// About 45 s on the idle 2-core VM, plus the restic comparisons (restic.mjs, folder.mjs: about 30 s)
// and the edge store's step (edge.mjs: about 60 s, three workerd start-ups); the generous timeout
// is for a machine shared with other work.
import { expect, it } from 'vitest'
import { spawn } from 'node:child_process'
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { root } from './helpers'

/** Runs a command without blocking the event loop (Vitest's worker must keep answering). */
function run(cmd: string, args: string[], env: NodeJS.ProcessEnv, timeoutMs: number): Promise<{ status: number | null; out: string }> {
  return new Promise((resolve) => {
    const p = spawn(cmd, args, { cwd: root, env, stdio: ['ignore', 'pipe', 'pipe'] })
    let out = ''
    p.stdout.on('data', (d) => (out += d))
    p.stderr.on('data', (d) => (out += d))
    const timer = setTimeout(() => p.kill('SIGTERM'), timeoutMs)
    p.on('close', (status) => {
      clearTimeout(timer)
      resolve({ status, out })
    })
  })
}

it('bench: npm run bench -- --quick writes JSON, Markdown and SVG plots', async () => {
  const out = mkdtempSync(`${tmpdir()}/cutpoint-bench-test-`)
  const readme = readFileSync(`${root}docs/performance.md`, 'utf8')
  try {
    const r = await run('bash', ['scripts/bench.sh', '--quick', '--out', out], { ...process.env, CUTPOINT_BENCH_REBUILD: '0', DENO_NO_UPDATE_CHECK: '1', NO_COLOR: '1' }, 500_000)
    const log = r.out
    expect(r.status, log.slice(-4000)).toBe(0)
    const files = readdirSync(out)
    const json = files.find((f) => f.endsWith('-quick.json'))
    expect(json, files.join(' ')).toBeTruthy()
    const base = json!.replace(/\.json$/, '')
    const res = JSON.parse(readFileSync(`${out}/${json}`, 'utf8'))

    // Header: machine, versions, backends.
    expect(res.schema).toBe('cutpoint-bench/1')
    expect(res.quick).toBe(true)
    expect(typeof res.machine.cpu).toBe('string')
    expect(res.machine.cores).toBeGreaterThan(0)
    for (const k of ['rustc', 'node', 'deno', 'chromium', 'fastcdc (crate)', 'hash-wasm', '@huggingface/xetchunk-wasm', '@dstanesc/wasm-chunking-fastcdc-node', 'rabin-wasm']) {
      expect(Object.keys(res.versions)).toContain(k)
    }
    expect(res.backends.some((b: any) => b.name === 'scalar' && b.available)).toBe(true)
    expect(Array.isArray(res.skipped)).toBe(true)
    for (const s of res.skipped) expect(typeof s.reason, JSON.stringify(s)).toBe('string')

    // Every row: a name, a section, a runtime, a finite value with its unit.
    expect(res.rows.length).toBeGreaterThan(50)
    for (const row of res.rows) {
      expect(typeof row.name).toBe('string')
      expect(['limits', 'chunking', 'peers', 'hash', 'e2e', 'dedup', 'memory', 'store', 'restic', 'folder', 'compression', 'big', 'page', 'edge']).toContain(row.section)
      expect(['native', 'node', 'deno', 'chromium']).toContain(row.runtime)
      expect(['GB/s', 'ratio', 'MiB', 'MB', 'bytes', 's', 'ms']).toContain(row.unit)
      expect(Number.isFinite(row.value), row.name).toBe(true)
    }
    const has = (pred: (r: any) => boolean) => res.rows.some(pred)
    const rowOrSkip = (frag: string) => res.rows.some((r: any) => r.name.includes(frag)) || res.skipped.some((s: any) => s.name.includes(frag) || s.reason.includes(frag))
    for (const sec of ['limits', 'chunking', 'peers', 'hash', 'e2e', 'dedup', 'memory', 'store']) expect(has((r) => r.section === sec), sec).toBe(true)
    // The store rows: pushes, a pull and the plain-upload baseline, with what they sent.
    for (const n of ['store/chunk+hash', 'store/push/first', 'store/push/again', 'store/push/mod', 'store/pull', 'store/plain-upload']) expect(has((r) => r.name === n), n).toBe(true)
    expect(has((r) => r.name === 'store/push/again' && r.novel_bytes === 0 && r.sent_bytes > 0)).toBe(true)
    // The edge store beside cutpoint serve (bench/harness/edge.mjs), or the reason it was skipped.
    for (const n of ['edge/push/first-vs-serve', 'edge/push/r2-floor-vs-serve', 'edge/push/mod', 'edge/cpu/query-1000', 'edge/cpu/ingest-wasm', 'edge/memory/4x32MiB']) {
      expect(has((r) => r.name === n) || res.skipped.some((s: any) => s.name === 'edge'), n).toBe(true)
    }
    // The library's client (cutpoint-js) under Node and Deno: the same bytes sent as the native push.
    for (const rt of ['node', 'deno']) {
      for (const k of ['first', 'mod']) {
        const row = res.rows.find((r: any) => r.name === `store/push-${rt}/${k}`)
        const nat = res.rows.find((r: any) => r.name === `store/push/${k}`)
        expect(row, `store/push-${rt}/${k}`).toBeDefined()
        expect(row.sent_bytes).toBe(nat.sent_bytes)
        expect(row.novel_bytes).toBe(nat.novel_bytes)
      }
    }
    // The web page in Chromium (bench/harness/browser-push.mjs): the same file as the native
    // push beside it, the same chunks and novel bytes; its 1%-modified re-push.
    for (const k of ['first', 'mod']) {
      const row = res.rows.find((r: any) => r.name === `store/browser-push/${k}`)
      expect(row, `store/browser-push/${k}`).toBeDefined()
      expect(row.runtime).toBe('chromium')
      expect(row.novel_bytes).toBe(row.native_novel_bytes)
      // Each at its own pack size (32 MiB heads-first packs from the page, 8 MiB natively): the
      // same bytes sent but for each pack's 16-byte header and 36-byte end frame.
      expect(Number.isInteger(row.packs) && Number.isInteger(row.native_packs)).toBe(true)
      expect(row.sent_bytes - row.native_sent_bytes).toBe(52 * (row.packs - row.native_packs))
      expect(row.vs_native).toBeGreaterThan(0)
    }
    expect(has((r) => r.name.startsWith('memory/browser-push/') && r.value > 0)).toBe(true)
    // Chromium's own floors beside it (reading the File, uploading it to a sink).
    for (const k of ['floor-read', 'floor-upload']) {
      const row = res.rows.find((r: any) => r.name === `store/browser-push/${k}`)
      expect(row, `store/browser-push/${k}`).toBeDefined()
      expect(row.seconds).toBeGreaterThan(0)
      expect(row.value).toBeGreaterThan(0)
    }
    // restic 0.18.1 beside `cutpoint push` (bench/harness/restic.mjs, folder.mjs): measured, or
    // skipped with the reason (restic not built), never dropped.
    if (res.versions.restic) {
      const syn = res.rows.filter((r: any) => r.section === 'restic' && r.dataset === 'synthetic')
      const tot = syn.filter((r: any) => r.name.endsWith('/total'))
      expect(tot.length, JSON.stringify(res.skipped)).toBeGreaterThan(0)
      for (const t of tot) {
        expect(t.restore_verified).toBe(true)
        expect(t.sent_bytes).toBeGreaterThan(0)
        expect(t.restic_sent_bytes).toBeGreaterThan(0)
        expect(t.stored_bytes).toBeGreaterThan(0)
        expect(t.restic_stored_bytes).toBeGreaterThan(0)
        // Per version: one row each, gzip -6 of the file measured.
        expect(syn.filter((r: any) => r.mode === t.mode && /\/v\d+$/.test(r.name)).length).toBe(t.versions)
      }
      expect(syn.every((r: any) => r.name.endsWith('/total') || r.name.endsWith('/auto-over-off') || r.gzip6_bytes > 0)).toBe(true)
      const folders = res.rows.filter((r: any) => r.section === 'folder')
      expect(folders.length, JSON.stringify(res.skipped)).toBe(3)
      for (const f of folders) {
        expect(f.requests_first).toBeGreaterThan(0)
        expect(f.stored_bytes).toBeGreaterThan(0)
        expect(f.restic_seconds).toBeGreaterThan(0)
      }
    } else {
      expect(res.skipped.some((s: any) => s.name === 'restic'), JSON.stringify(res.skipped)).toBe(true)
      expect(res.skipped.some((s: any) => s.name === 'folder'), JSON.stringify(res.skipped)).toBe(true)
    }
    // gear: the skip-MIN engine's own rows, one thread and more.
    expect(has((r) => r.engine === 'skip-min' && r.family === 'gear' && r.threads === 1 && r.value > 0)).toBe(true)
    expect(has((r) => r.name === 'limits/native/memcpy')).toBe(true)
    expect(has((r) => r.name.startsWith('chunk/native/sequential/'))).toBe(true)
    expect(has((r) => r.name.startsWith('chunk/native/reference/'))).toBe(true)
    expect(has((r) => r.engine === 'naive')).toBe(true)
    expect(has((r) => r.section === 'dedup' && r.what === 'naive')).toBe(true)
    expect(has((r) => r.ratio_to_reference !== undefined && r.ratio_to_memcpy !== undefined)).toBe(true)
    // Each backend, runtime and peer is measured or skipped with a reason, never dropped.
    for (const b of ['scalar', 'interleaved', 'avx2', 'avx512', 'avx512-gather']) {
      expect(rowOrSkip(`/native/${b}/`) || rowOrSkip(`/${b}`) || rowOrSkip(b), b).toBe(true)
    }
    for (const rt of ['node', 'deno', 'chromium']) expect(res.rows.some((r: any) => r.runtime === rt) || res.skipped.some((s: any) => s.runtime === rt), rt).toBe(true)
    for (const p of ['fastcdc-v2020', 'fastcdc-v2016', 'xetchunk-wasm', 'wasm-chunking-fastcdc', 'rabin-wasm']) expect(rowOrSkip(p), p).toBe(true)
    // Tables from the MT-FBC and RapidCDC examples.
    expect(res.tables.some((t: any) => t.section === 'mtfbc' && t.rows.length > 0)).toBe(true)
    expect(res.tables.some((t: any) => t.section === 'rapid' && t.rows.length > 0)).toBe(true)

    // Markdown and plots.
    const md = readFileSync(`${out}/${base}.md`, 'utf8')
    for (const h of ['### Limits', '### Chunking, native', '### Peers', '### Fingerprints', '### End to end', 'MT-FBC', 'RapidCDC']) expect(md).toContain(h)
    if (res.versions.restic) for (const h of ['vs `cutpoint push`: versioned files in order', 'A folder of small files']) expect(md).toContain(h)
    const svgs = files.filter((f) => f.startsWith(base) && f.endsWith('.svg'))
    expect(svgs.length, files.join(' ')).toBeGreaterThanOrEqual(5)
    for (const s of svgs) expect(readFileSync(`${out}/${s}`, 'utf8').startsWith('<svg')).toBe(true)

    // A quick run never rewrites the generated performance section (docs/performance.md).
    expect(readFileSync(`${root}docs/performance.md`, 'utf8')).toBe(readme)
    expect(readme).toMatch(/<!-- bench:begin -->[\s\S]*<!-- bench:end -->/)
  } finally {
    rmSync(out, { recursive: true, force: true })
  }
}, 520_000)
