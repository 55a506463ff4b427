// `cutpoint-js push`: as `cutpoint push` (same flags where they overlap, same `--json` fields).
import process from 'node:process'
import { basename, join } from 'node:path'
import { readdir, stat } from 'node:fs/promises'
import { Readable } from 'node:stream'
import { createClient } from '../client/client.js'
import { COMPRESSIONS, type PushResult } from '../client/push.js'
import type { PushManyResult } from '../client/many.js'
import { engineFlags, engineOf, Fail, failOf, human, parseSize, progressBar, storeFlags, storeOf, usageFail } from './common.js'

export const flags = {
  ...storeFlags,
  ...engineFlags,
  name: { type: 'string' },
  rapid: { type: 'string' },
  'pack-size': { type: 'string' },
  uploads: { type: 'string' },
  compression: { type: 'string' },
  json: { type: 'boolean' },
} as const

/** The native report's field names (`cutpoint push --json`). */
export function jsonOf(r: PushResult) {
  return {
    name: r.name,
    bytes: r.bytes,
    chunks: r.chunks,
    novel_chunks: r.novelChunks,
    novel_bytes: r.novelBytes,
    compressed_bytes: r.compressedBytes,
    compressed_chunks: r.compressedChunks,
    sent_bytes: r.sentBytes,
    pack_bytes: r.packBytes,
    packs: r.packs,
    recipe_bytes: r.recipeBytes,
    delta_base: r.deltaBase ?? null,
    parts: r.parts,
    parts_sent: r.partsSent,
    parts_delta: r.partsDelta,
    base_part_bytes: r.basePartBytes,
    ids_held: r.idsHeld,
    known_from_base: r.knownFromBase,
    hinted_chunks: r.hintedChunks,
    version: r.version,
    digest: r.digest,
    dedup_ratio: Number.isFinite(r.dedupRatio) ? r.dedupRatio : null,
    seconds: r.seconds,
    profile: r.profile,
    hash: r.hash,
  }
}

export function summary(r: PushResult): string {
  const dedup = r.novelBytes === 0 ? 'all known' : `${r.dedupRatio.toFixed(1)}x`
  const rate = r.seconds > 0 ? r.bytes / r.seconds / 1e6 : 0
  return (
    `${r.name} -> version ${r.version}: ${human(r.bytes)} processed, ${r.chunks} chunks, ${r.novelChunks} novel (${human(r.novelBytes)}), ` +
    `${human(r.compressedBytes)} compressed, ${human(r.sentBytes)} sent, dedup ${dedup}, ${rate.toFixed(0)} MB/s` +
    (r.hintedChunks > 0 ? `, ${r.hintedChunks} chunks cut at RapidCDC hints` : '')
  )
}

/** The totals line of a push of many files. */
export function totals(m: PushManyResult): string {
  return (
    `${m.files} files: ${m.committed} committed${m.failed ? `, ${m.failed} failed` : ''}, ${human(m.bytes)} processed, ${human(m.novelBytes)} novel (${human(m.compressedBytes)} compressed), ` +
    `${human(m.sentBytes)} sent in ${m.packs} packs and ${m.commitRequests} commit requests, ${m.seconds.toFixed(2)} s`
  )
}

/**
 * The files under `dir` (recursively, depth first in name order), each named by its path
 * relative to `dir` ('/'-separated, under `prefix` if given); links and other non-files are
 * left out. As the native `cutpoint push DIR`.
 */
export async function walk(dir: string, prefix: string | undefined, out: { path: string; name: string }[]): Promise<void> {
  const stack: [string, string | undefined][] = [[dir, prefix]]
  while (stack.length) {
    const [d, pre] = stack.pop()!
    let ents
    try {
      ents = await readdir(d, { withFileTypes: true })
    } catch (e: any) {
      throw new Fail(1, `${d}: ${e?.message ?? e}`)
    }
    ents.sort((a, b) => (Buffer.from(a.name) < Buffer.from(b.name) ? -1 : Buffer.from(a.name) > Buffer.from(b.name) ? 1 : 0))
    const subdirs: [string, string][] = []
    for (const e of ents) {
      const name = pre !== undefined ? `${pre}/${e.name}` : e.name
      if (e.isDirectory()) subdirs.push([join(d, e.name), name])
      else if (e.isFile()) out.push({ path: join(d, e.name), name })
    }
    stack.push(...subdirs.reverse())
  }
}

export async function run(v: Record<string, any>, files: string[]) {
  if (!files.length) throw usageFail('push needs at least one file')
  if (v.name !== undefined && files.length > 1) throw usageFail('--name works with one file; several files are stored under their own names')
  let dirs = false
  const many: { path: string; name: string }[] = []
  for (const f of files) {
    if (f === '-') continue
    let st
    try {
      st = await stat(f)
    } catch (e: any) {
      throw new Fail(1, `${f}: ${e?.message ?? e}`)
    }
    if (st.isDirectory()) {
      dirs = true
      await walk(f, v.name, many)
    } else many.push({ path: f, name: v.name ?? basename(f) })
  }
  // Several files or a directory (not standard input, not RapidCDC, whose hints come from each
  // name's base): one pipeline (`pushMany`).
  if ((files.length > 1 || dirs) && !files.includes('-') && v.rapid === undefined) return runMany(v, many)
  const names = files.map((f) => {
    if (v.name !== undefined) return v.name as string
    if (f === '-') throw usageFail('standard input needs --name')
    return basename(f)
  })
  const client = createClient(clientOptions(v))
  try {
    for (let i = 0; i < files.length; i++) {
      const f = files[i]
      const bar = progressBar(!v.json, names[i])
      const input = f === '-' ? (Readable.toWeb(process.stdin) as unknown as ReadableStream<Uint8Array>) : f
      let r: PushResult
      try {
        r = await client.push(input, {
          name: names[i],
          rapid: v.rapid,
          onProgress: (p) => bar.update(p.bytes, p.total, p.throughput, p.novelBytes || p.sentBytes ? `novel ${human(p.novelBytes)} sent ${human(p.sentBytes)}` : ''),
        })
      } catch (e) {
        throw failOf(e)
      } finally {
        bar.clear()
      }
      process.stdout.write((v.json ? JSON.stringify(jsonOf(r)) : summary(r)) + '\n')
    }
  } finally {
    await client.close()
  }
}

/** The client's options from the flags (checked before anything is read or asked). */
function clientOptions(v: Record<string, any>) {
  const eng = engineOf(v, true)
  const packSize = parseSize(v['pack-size'] ?? '8m')
  if (packSize === undefined || packSize < 64 << 10 || packSize > 256 << 20) throw usageFail(`--pack-size '${v['pack-size']}' is not a size from 64k to 256m`)
  const uploads = Number(v.uploads ?? 2)
  if (!Number.isInteger(uploads) || uploads < 1 || uploads > 64) throw usageFail('--uploads must be 1 to 64')
  const compression = v.compression ?? 'auto'
  if (!COMPRESSIONS.includes(compression)) throw usageFail(`--compression '${compression}' is not auto, off or max`)
  return { ...storeOf(v), profile: eng.profile, workers: eng.workers, hash: eng.hash as 'blake3' | 'sha256', concurrency: uploads, packSize, compression: compression as 'auto' | 'off' | 'max' }
}

/**
 * Many files as one pipeline: a summary line (or a `--json` object) per committed file on
 * stdout, each failure on stderr, then the totals line (not with `--json`); a failure makes the
 * exit status non-zero, as the native CLI's.
 */
async function runMany(v: Record<string, any>, inputs: { path: string; name: string }[]) {
  const opts = clientOptions(v)
  if (!inputs.length) throw usageFail('no files to push (the directories are empty)')
  const client = createClient(opts)
  const bar = progressBar(!v.json, `${inputs.length} files`)
  let m: PushManyResult
  try {
    m = await client.pushMany(
      inputs.map((f) => ({ input: f.path, name: f.name })),
      { onProgress: (p) => bar.update(p.allBytes, undefined, 0, `${p.filesDone} of ${p.files} committed, sent ${human(p.sentBytes)}`) },
    )
  } catch (e) {
    throw failOf(e)
  } finally {
    bar.clear()
    await client.close()
  }
  let failed: Fail | undefined
  for (const r of m.results) {
    if ('error' in r) {
      const f = failOf(r.error)
      process.stderr.write(`cutpoint: ${r.name}: ${f.message}\n`)
      failed ??= f
    } else process.stdout.write((v.json ? JSON.stringify(jsonOf(r)) : summary(r)) + '\n')
  }
  if (!v.json) process.stdout.write(totals(m) + '\n')
  if (failed) throw new Fail(failed.code, 'some files were not committed (see above)')
}
