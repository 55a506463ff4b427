// `cutpoint-js chunk` and `stats`: as `cutpoint chunk` (text or JSON lines) and `cutpoint stats`
// (per-file chunks, sizes, dedup across the files in order, throughput; `--json`).
import process from 'node:process'
import { chunk, info, parseProfile } from '../index.js'
import { defaultWorkers } from '../workers.js'
import { engineFlags, engineOf, failOf, progressBar, usageFail } from './common.js'

export const chunkFlags = { ...engineFlags, format: { type: 'string' } } as const
export const statsFlags = { ...engineFlags, json: { type: 'boolean' } } as const

async function write(s: string) {
  if (!process.stdout.write(s)) await new Promise((r) => process.stdout.once('drain', r))
}

export async function runChunk(v: Record<string, any>, args: string[]) {
  if (args.length !== 1) throw usageFail('chunk needs one file')
  const eng = engineOf(v)
  const format = v.format ?? 'text'
  if (format !== 'text' && format !== 'jsonl') throw usageFail(`--format '${format}': text or jsonl`)
  try {
    for await (const batch of chunk(args[0], { profile: eng.profile, workers: eng.workers, hash: eng.hash }).batches()) {
      let s = ''
      for (const c of batch) {
        if (format === 'text') s += c.hash ? `${c.offset}\t${c.length}\t${c.hash}\n` : `${c.offset}\t${c.length}\n`
        else s += c.hash ? `{"offset":${c.offset},"length":${c.length},"hash":"${c.hash}"}\n` : `{"offset":${c.offset},"length":${c.length}}\n`
      }
      await write(s)
    }
  } catch (e) {
    throw failOf(e)
  }
}

interface FileStats {
  file: string
  bytes: number
  chunks: number
  avg_chunk: number
  unique_bytes: number | null
  dedup_ratio: number | null
  seconds: number
  mb_per_s: number
}

function stats(file: string, bytes: number, chunks: number, unique: number | null, secs: number): FileStats {
  return {
    file,
    bytes,
    chunks,
    avg_chunk: chunks ? bytes / chunks : 0,
    unique_bytes: unique,
    dedup_ratio: unique ? bytes / unique : null,
    seconds: secs,
    mb_per_s: secs > 0 ? bytes / secs / 1e6 : 0,
  }
}

export async function runStats(v: Record<string, any>, args: string[]) {
  if (!args.length) throw usageFail('stats needs at least one file')
  const eng = engineOf(v)
  const seen = new Set<string>()
  const files: FileStats[] = []
  let tb = 0
  let tc = 0
  let tu = 0
  let ts = 0
  try {
    for (const f of args) {
      const t0 = performance.now()
      let bytes = 0
      let n = 0
      let unique = 0
      const bar = progressBar(!v.json, f)
      for await (const batch of chunk(f, { profile: eng.profile, workers: eng.workers, hash: eng.hash }).batches()) {
        for (const c of batch) {
          bytes += c.length
          n++
          if (c.hash && !seen.has(c.hash)) {
            seen.add(c.hash)
            unique += c.length
          }
        }
        bar.update(bytes, undefined, bytes / ((performance.now() - t0) / 1000))
      }
      bar.clear()
      const secs = (performance.now() - t0) / 1000
      files.push(stats(f, bytes, n, eng.hash === 'none' ? null : unique, secs))
      tb += bytes
      tc += n
      tu += unique
      ts += secs
    }
  } catch (e) {
    throw failOf(e)
  }
  const profile = parseProfile(eng.profile ?? 'gear:2k:8k:64k').canonical
  const report = {
    profile,
    mode: 'ss-cdc',
    backend: info().defaultBackend,
    // The workers used: all cores unless --threads said otherwise.
    threads: eng.workers ?? (await defaultWorkers()),
    hash: eng.hash,
    files,
    total: stats('total', tb, tc, eng.hash === 'none' ? null : tu, ts),
  }
  if (v.json) {
    await write(JSON.stringify(report, null, 2) + '\n')
    return
  }
  let s = `profile ${profile}  backend ${report.backend}  threads ${report.threads}  hash ${report.hash}\n`
  s += `${'file'.padEnd(40)} ${'bytes'.padStart(14)} ${'chunks'.padStart(9)} ${'avg'.padStart(9)} ${'unique'.padStart(14)} ${'dedup'.padStart(7)} ${'MB/s'.padStart(9)}\n`
  for (const r of [...files, report.total]) {
    const name = r.file.length > 40 ? `…${r.file.slice(-39)}` : r.file
    const dedup = r.dedup_ratio !== null ? r.dedup_ratio.toFixed(3) : r.unique_bytes === 0 && r.bytes > 0 ? 'inf' : '-'
    s += `${name.padEnd(40)} ${String(r.bytes).padStart(14)} ${String(r.chunks).padStart(9)} ${r.avg_chunk.toFixed(0).padStart(9)} ${String(r.unique_bytes ?? '-').padStart(14)} ${dedup.padStart(7)} ${r.mb_per_s.toFixed(0).padStart(9)}\n`
  }
  await write(s)
}
