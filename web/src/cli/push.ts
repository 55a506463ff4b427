// `cutpoint-js push`: as `cutpoint push` (same flags where they overlap, same `--json` fields).
import process from 'node:process'
import { basename } from 'node:path'
import { Readable } from 'node:stream'
import { createClient } from '../client/client.js'
import { COMPRESSIONS, type PushResult } from '../client/push.js'
import { engineFlags, engineOf, failOf, human, parseSize, progressBar, storeFlags, storeOf, usageFail } from './common.js'

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

export async function run(v: Record<string, any>, files: string[]) {
  if (!files.length) throw usageFail('push needs at least one file')
  if (v.name !== undefined && files.length > 1) throw usageFail('--name works with one file; several files are stored under their own names')
  const eng = engineOf(v, true)
  const packSize = parseSize(v['pack-size'] ?? '8m')
  if (packSize === undefined || packSize < 64 << 10 || packSize > 256 << 20) throw usageFail(`--pack-size '${v['pack-size']}' is not a size from 64k to 256m`)
  const uploads = Number(v.uploads ?? 2)
  if (!Number.isInteger(uploads) || uploads < 1 || uploads > 64) throw usageFail('--uploads must be 1 to 64')
  const compression = v.compression ?? 'auto'
  if (!COMPRESSIONS.includes(compression)) throw usageFail(`--compression '${compression}' is not auto, off or max`)
  const names = files.map((f) => {
    if (v.name !== undefined) return v.name as string
    if (f === '-') throw usageFail('standard input needs --name')
    return basename(f)
  })
  const client = createClient({ ...storeOf(v), profile: eng.profile, workers: eng.workers, hash: eng.hash as 'blake3' | 'sha256', concurrency: uploads, packSize, compression })
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
