// `cutpoint push` against restic 0.18.1 on the same versioned files, in order (issue #28's
// Measure table). One JSON row per line on stdout (read by run.mjs), progress on stderr.
//   node bench/harness/restic.mjs [--quick] [--syn FILE,FILE,...]
//
// Datasets: "real" = TypeScript releases from npm as uncompressed tars (bench/real-data.sh; the
// 13 releases of RELEASES in peer-lib.mjs, about 400 MiB, or CUTPOINT_RESTIC_RELEASES="5.0.2 5.0.3 ...");
// "synthetic" = the bench's `cutpoint gen` versions (--syn, from run.mjs). --quick: the first
// 4 MiB of up to three releases already cached in bench/data/real (none cached: real skipped)
// and the quick synthetic versions; its numbers mean nothing.
//
// Per dataset, each side on a fresh store / repository in a temporary directory:
//   restic   `restic init`, then per version the file copied to one fixed path and
//            `restic backup --json PATH` (default settings: compression auto), bytes sent =
//            the summary's data_added_packed; `restic restore latest` of the last version.
//   cutpoint `cutpoint serve` on 127.0.0.1, per version `cutpoint push FILE --name NAME --json`
//            (bytes sent = its sent_bytes: every request body, i.e. queries, packs, the commit),
//            once per --compression mode when the CLI has the flag (off and auto), else once
//            (no compression in this build); `cutpoint pull` of the last version.
// CUTPOINT_RESTIC_SENT=proxy: every push through the counting proxy (a cross-check of sent_bytes).
// Both restores are compared byte for byte with the last version. Bytes stored = every file of
// the store's directory (objects and index) vs every file of the restic repository, after the
// last push. Per version also the size of `gzip -6` of the whole file.
import { copyFileSync, existsSync, mkdirSync, mkdtempSync, openSync, readSync, closeSync, writeFileSync, readdirSync, rmSync, statSync } from 'node:fs'
import { spawnSync } from 'node:child_process'
import { basename } from 'node:path'
import os from 'node:os'
import { RELEASES, cli, countingProxy, dirBytes, storeBytes, emit, findRestic, gzipSize, log, pushHelp, resticRepo, root, run, sameBytes, startStore } from './peer-lib.mjs'

const argv = process.argv.slice(2)
const quick = argv.includes('--quick')
const opt = (f, d) => (argv.includes(f) ? argv[argv.indexOf(f) + 1] : d)
const semver = (f) => (basename(f).match(/(\d+)\.(\d+)\.(\d+)/) ?? [0, 0, 0, 0]).slice(1).map(Number)
const bySemver = (a, b) => {
  const [x, y] = [semver(a), semver(b)]
  return x[0] - y[0] || x[1] - y[1] || x[2] - y[2]
}

const restic = findRestic()
const skipRow = (name, reason) => emit({ section: 'restic', runtime: 'native', name, skipped: true, reason })
if (!restic.exe) {
  skipRow('restic', restic.reason)
  process.exit(0)
}
const help = pushHelp()
const modes = /--compression/.test(help) ? ['off', 'auto'] : ['default']
emit({ section: 'meta', restic: restic.version, cutpoint_modes: modes })
log(`restic: ${restic.version}; cutpoint push modes: ${modes.join(', ')}${modes[0] === 'default' ? ' (this build has no --compression: chunks travel raw)' : ''}`)

// ---- datasets ------------------------------------------------------------------------------------
function realFiles() {
  const cached = `${root}bench/data/real/typescript`
  if (!quick) {
    const r = spawnSync('bash', [`${root}bench/real-data.sh`, 'typescript', ...RELEASES], { encoding: 'utf8', timeout: 900_000 })
    if (r.status !== 0) return { reason: `bench/real-data.sh failed (${(r.stderr || r.error?.message || '').trim().split('\n').pop()})` }
    return { files: r.stdout.trim().split('\n').filter(Boolean).map((p) => (p.startsWith('/') ? p : `${root}${p}`)), what: `TypeScript ${RELEASES.join(', ')} (npm, uncompressed tars)` }
  }
  const have = existsSync(cached) ? readdirSync(cached).filter((f) => f.endsWith('.tar')).map((f) => `${cached}/${f}`).sort(bySemver) : []
  if (!have.length) return { reason: 'quick runs use only releases bench/real-data.sh has cached in bench/data/real (none)' }
  mkdirSync(`${root}bench/results/tmp`, { recursive: true })
  const files = have.slice(0, 3).map((f, i) => {
    const out = `${root}bench/results/tmp/restic-quick-${i}.tar`
    const buf = Buffer.alloc(4 << 20)
    const fd = openSync(f, 'r')
    const got = readSync(fd, buf, 0, buf.length, 0)
    closeSync(fd)
    writeFileSync(out, buf.subarray(0, got))
    return out
  })
  return { files, what: `first 4 MiB of ${have.slice(0, 3).map((f) => basename(f)).join(', ')} (quick)` }
}
const datasets = []
{
  const r = realFiles()
  if (r.files) datasets.push({ id: 'real', name: 'typescript.tar', ...r })
  else skipRow('restic/real', r.reason)
  const syn = (opt('--syn', '') ?? '').split(',').filter(Boolean)
  if (syn.length) datasets.push({ id: 'synthetic', name: 'synthetic.bin', files: syn, what: `cutpoint gen versions: ${syn.map((f) => basename(f)).join(', ')}` })
}

// ---- one side at a time --------------------------------------------------------------------------
async function resticSide(files, name, tmp) {
  const repo = await resticRepo(restic.exe, `${tmp}/restic`)
  const staged = `${tmp}/src/${name}` // every version backed up under one path, as one file's history
  mkdirSync(`${tmp}/src`)
  const versions = []
  let before = dirBytes(repo.dir).bytes
  for (const f of files) {
    copyFileSync(f, staged)
    const b = await repo.backup([staged])
    // What the repository grew by: the packed data plus restic's index and snapshot files (what
    // would travel to a remote repository besides data_added_packed).
    const now = dirBytes(repo.dir).bytes
    versions.push({ s: b.s, sent: b.summary.data_added_packed, added: b.summary.data_added, grew: now - before })
    before = now
    log(`  restic backup ${basename(f)}: ${b.s.toFixed(2)} s, data_added_packed ${b.summary.data_added_packed}`)
  }
  const target = `${tmp}/restic-restore`
  const restoreS = await repo.restore(target)
  const verified = await sameBytes(`${target}${staged}`, files.at(-1))
  rmSync(target, { recursive: true, force: true })
  rmSync(`${tmp}/src`, { recursive: true, force: true })
  return { versions, restoreS, verified, stored: dirBytes(repo.dir).bytes }
}

/**
 * Pushes every version into a fresh `cutpoint serve`, then pulls the last. Bytes sent: the push's
 * own `sent_bytes`; a build without that field is measured again through a counting proxy in
 * front of the store (request body bytes; its times then include the proxy).
 */
async function cutpointSide(files, name, mode, tmp, viaProxy = false) {
  const dir = `${tmp}/store-${mode}`
  rmSync(dir, { recursive: true, force: true })
  const srv = await startStore(dir)
  const proxy = viaProxy ? await countingProxy(srv.url) : null
  const sentVia = viaProxy ? 'counting proxy in front of the store (request body bytes; times through the proxy)' : 'cutpoint push --json sent_bytes (every request body: queries, packs, commit)'
  const flags = mode === 'default' ? [] : ['--compression', mode]
  const versions = []
  let noField = false
  let restoreS
  let verified
  try {
    for (const f of files) {
      proxy?.reset()
      const r = await run(cli, ['push', f, '--name', name, '--store', proxy?.url ?? srv.url, '--json', ...flags])
      const j = JSON.parse(r.out.trim().split('\n').pop())
      const sent = viaProxy ? proxy.reset().request_body_bytes : j.sent_bytes
      if (typeof sent !== 'number') {
        noField = true
        break
      }
      const json = Object.fromEntries(Object.entries(j).filter(([k, v]) => /_bytes$/.test(k) && typeof v === 'number'))
      versions.push({ s: r.s, sent, sentVia, json })
      log(`  cutpoint push ${basename(f)} (${mode}): ${r.s.toFixed(2)} s, sent ${sent}`)
    }
    if (!noField) {
      const out = `${tmp}/pulled-${mode}`
      restoreS = (await run(cli, ['pull', name, '-o', out, '--store', srv.url, '--json'])).s
      verified = await sameBytes(out, files.at(-1))
      rmSync(out, { force: true })
    }
  } finally {
    await proxy?.close()
    await srv.stop()
  }
  if (noField) {
    log('  cutpoint push --json has no sent_bytes: measured again through a counting proxy')
    return cutpointSide(files, name, mode, tmp, true)
  }
  const st = storeBytes(dir)
  return { versions, restoreS, verified, stored: st.bytes, storedObjects: st.objects, storedIndex: st.index }
}

// ---- rows ----------------------------------------------------------------------------------------
const sum = (xs) => xs.reduce((a, b) => a + b, 0)

/** One row per version: what each side sent and took, beside gzip -6 of the file. */
function versionRows(base, ds, mode, cs, rs) {
  return ds.files.map((f, i) => {
    const v = cs.versions[i]
    const r = rs.versions[i]
    return {
      ...base,
      name: `restic/${ds.id}/${mode}/v${i}`,
      what: basename(f),
      mode,
      version: i,
      bytes: ds.sizes[i],
      gzip6_bytes: ds.gz[i],
      sent_bytes: v.sent,
      sent_via: v.sentVia,
      cutpoint_json: v.json,
      seconds: v.s,
      restic_seconds: r.s,
      restic_sent_bytes: r.sent,
      restic_data_added: r.added,
      restic_repo_growth: r.grew,
      value: v.sent / ds.gz[i],
      unit: 'ratio',
      sent_over_gzip: v.sent / ds.gz[i],
      sent_over_restic: r.sent ? v.sent / r.sent : null,
      time_over_restic: v.s / r.s,
      goal_sent_over_gzip: i === 0 ? null : 1.0,
      goal_time_over_restic: 0.5,
    }
  })
}

/** The totals of one mode against restic, with issue #28's goals. */
function totalRow(base, ds, mode, cs, rs) {
  const sent = sum(cs.versions.map((v) => v.sent))
  const rSent = sum(rs.versions.map((v) => v.sent))
  const later = cs.versions.slice(1).map((v, i) => v.sent / ds.gz[i + 1])
  const tr = cs.versions.map((v, i) => v.s / rs.versions[i].s)
  return {
    ...base,
    name: `restic/${ds.id}/${mode}/total`,
    what: `all ${ds.files.length} versions`,
    mode,
    versions: ds.files.length,
    bytes: sum(ds.sizes),
    gzip6_bytes: sum(ds.gz),
    sent_bytes: sent,
    restic_sent_bytes: rSent,
    restic_repo_growth: sum(rs.versions.map((v) => v.grew)),
    sent_over_restic: sent / rSent,
    goal_sent_over_restic: 0.6,
    stored_bytes: cs.stored,
    stored_objects_bytes: cs.storedObjects,
    stored_index_bytes: cs.storedIndex,
    restic_stored_bytes: rs.stored,
    stored_over_restic: cs.stored / rs.stored,
    goal_stored_over_restic: 0.6,
    seconds: sum(cs.versions.map((v) => v.s)),
    restic_seconds: sum(rs.versions.map((v) => v.s)),
    time_over_restic_max: Math.max(...tr),
    time_over_restic_median: [...tr].sort((a, b) => a - b)[Math.floor(tr.length / 2)],
    goal_time_over_restic: 0.5,
    sent_over_gzip_first: cs.versions[0].sent / ds.gz[0],
    sent_over_gzip_max_later: later.length ? Math.max(...later) : null,
    later_versions_within_gzip: later.filter((x) => x <= 1.0).length,
    goal_sent_over_gzip: 1.0,
    restore_seconds: cs.restoreS,
    restic_restore_seconds: rs.restoreS,
    restore_over_restic: cs.restoreS / rs.restoreS,
    goal_restore_over_restic: 0.5,
    restore_verified: cs.verified && rs.verified,
    sent_via: cs.versions[0].sentVia,
    value: sent / rSent,
    unit: 'ratio',
  }
}

/** Both sides on one dataset: its rows, emitted as each mode finishes. */
async function measure(ds, tmp) {
  ds.sizes = ds.files.map((f) => statSync(f).size)
  ds.gz = []
  for (const f of ds.files) ds.gz.push(await gzipSize(f))
  const rs = await resticSide(ds.files, ds.name, tmp)
  if (!rs.verified) throw new Error('restic restore differs from the last version')
  const base = { section: 'restic', runtime: 'native', dataset: ds.id, dataset_what: ds.what, quick }
  const sides = {}
  for (const mode of modes) {
    const cs = await cutpointSide(ds.files, ds.name, mode, tmp, process.env.CUTPOINT_RESTIC_SENT === 'proxy')
    if (!cs.verified) throw new Error(`cutpoint pull (${mode}) differs from the last version`)
    sides[mode] = cs
    for (const row of versionRows(base, ds, mode, cs, rs)) emit(row)
    emit(totalRow(base, ds, mode, cs, rs))
  }
  if (sides.off && sides.auto) {
    const on = sum(sides.auto.versions.map((v) => v.sent))
    const off = sum(sides.off.versions.map((v) => v.sent))
    emit({ ...base, name: `restic/${ds.id}/auto-over-off`, what: 'native push bytes sent, compression auto ÷ off, all versions (issue #28 asks ≤ 0.35 of the browser push on these tars)', mode: 'auto/off', sent_bytes: on, off_sent_bytes: off, value: on / off, unit: 'ratio', goal: ds.id === 'real' ? 0.35 : null })
  }
}

for (const ds of datasets) {
  log(`restic vs cutpoint, ${ds.id}: ${ds.what}`)
  const tmp = mkdtempSync(`${os.tmpdir()}/cutpoint-restic-bench-`)
  try {
    await measure(ds, tmp)
  } catch (e) {
    skipRow(`restic/${ds.id}`, e.message)
  } finally {
    rmSync(tmp, { recursive: true, force: true })
  }
}
