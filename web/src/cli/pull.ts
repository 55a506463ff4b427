// `cutpoint-js pull`: as `cutpoint pull`. The output appears only when it verified (written to
// a temporary file beside it, then renamed); to standard output (`-o -`) the bytes flow as they
// verify, and a failure exits 3.
import process from 'node:process'
import { existsSync } from 'node:fs'
import { open, rename, rm } from 'node:fs/promises'
import { dirname, basename, join } from 'node:path'
import { createClient } from '../client/client.js'
import { failOf, human, progressBar, storeFlags, storeOf, usageFail } from './common.js'

export const flags = {
  ...storeFlags,
  output: { type: 'string', short: 'o' },
  version: { type: 'string' },
  force: { type: 'boolean' },
  json: { type: 'boolean' },
} as const

export async function run(v: Record<string, any>, args: string[]) {
  if (args.length !== 1) throw usageFail('pull needs one name')
  const name = args[0]
  let version: number | undefined
  if (v.version !== undefined) {
    version = Number(v.version)
    if (!Number.isInteger(version) || version < 0) throw usageFail(`--version '${v.version}' is not a version number`)
    if (version === 0) throw usageFail('versions start at 1')
  }
  let out: string = v.output
  if (out === undefined) {
    out = name.split('/').pop() || name
    if (existsSync(out) && !v.force) throw usageFail(`${out} exists: use -o FILE or --force`)
  }
  const toStdout = out === '-'
  const client = createClient({ ...storeOf(v) })
  const t0 = performance.now()
  const bar = progressBar(!v.json, name)
  const tmp = toStdout ? '' : join(dirname(out), `.${basename(out)}.cutpoint-partial-${process.pid}`)
  let fh: any
  try {
    const { stream, info } = await client.pullWithInfo(name, { version })
    if (!toStdout) fh = await open(tmp, 'w')
    let done = 0
    const reader = stream.getReader()
    for (;;) {
      const { done: end, value } = await reader.read()
      if (end) break
      if (toStdout) {
        if (!process.stdout.write(value)) await new Promise((r) => process.stdout.once('drain', r))
      } else await fh.write(value)
      done += value.length
      bar.update(done, info.bytes, done / ((performance.now() - t0) / 1000))
    }
    bar.clear()
    if (fh) {
      await fh.sync()
      await fh.close()
      fh = undefined
      await rename(tmp, out)
    }
    const secs = (performance.now() - t0) / 1000
    const rep = { name, version: info.version, bytes: info.bytes, chunks: info.chunks, digest: info.digest, seconds: secs }
    const line = v.json
      ? JSON.stringify(rep)
      : `${name} version ${info.version} -> ${toStdout ? '<stdout>' : out}: ${human(info.bytes)} in ${info.chunks} chunks, verified (${info.digest}), ${(secs > 0 ? info.bytes / secs / 1e6 : 0).toFixed(0)} MB/s`
    if (toStdout) process.stderr.write(line + '\n')
    else process.stdout.write(line + '\n')
  } catch (e) {
    bar.clear()
    if (fh) await fh.close().catch(() => {})
    if (tmp) await rm(tmp, { force: true })
    throw failOf(e)
  } finally {
    await client.close()
  }
}
