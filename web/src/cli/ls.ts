// `cutpoint-js ls`: as `cutpoint ls` (a table, or `--json`: the store's list).
import process from 'node:process'
import { createClient } from '../client/client.js'
import { failOf, human, storeFlags, storeOf, usageFail } from './common.js'

export const flags = { ...storeFlags, json: { type: 'boolean' } } as const

function utc(secs: number): string {
  return new Date(secs * 1000).toISOString().slice(0, 19).replace('T', ' ')
}

export async function run(v: Record<string, any>, args: string[]) {
  if (args.length > 1) throw usageFail('ls takes at most one name')
  const client = createClient({ ...storeOf(v) })
  try {
    let files = await client.list()
    if (args[0] !== undefined) files = files.filter((f) => f.name === args[0])
    if (v.json) {
      process.stdout.write(JSON.stringify(files, null, 2) + '\n')
      return
    }
    const lines = [`${'name'.padEnd(40)} ${'version'.padStart(7)} ${'bytes'.padStart(12)} ${'chunks'.padStart(8)}  ${'committed (UTC)'.padEnd(19)}  digest`]
    for (const f of files) {
      lines.push(`${f.name.padEnd(40)} ${String(f.version).padStart(7)} ${human(f.bytes).padStart(12)} ${String(f.chunks).padStart(8)}  ${utc(f.created)}  ${f.digest.slice(0, 16)}`)
    }
    process.stdout.write(lines.join('\n') + '\n')
  } catch (e) {
    throw failOf(e)
  } finally {
    await client.close()
  }
}
