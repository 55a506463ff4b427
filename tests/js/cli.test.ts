// `cutpoint-js` (web/src/cli) under Node and Deno against a real `cutpoint serve`: push / pull /
// ls with the native CLI's `--json` fields and numbers, both directions between the CLIs, chunk
// and stats equal to the native ones, and the native exit codes for bad input.
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { spawnSync } from 'node:child_process'
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { availableParallelism, tmpdir } from 'node:os'
import { join } from 'node:path'
import { root } from './helpers'
import { cutpoint, haveCutpoint, nativePush, startStore, type Store } from './store'

const main = `${root}web/dist/web/src/cli/main.js`
const dir = mkdtempSync(join(tmpdir(), 'cutpoint-cli-'))
let store: Store
let ref: Store
const v = (i: number) => join(dir, `v${i}.bin`)

function js(runtime: 'node' | 'deno', args: string[], s?: Store, encoding: 'utf8' | 'buffer' = 'utf8', input?: Buffer) {
  const cmd = runtime === 'node' ? process.execPath : `${root}node_modules/.bin/deno`
  const pre = runtime === 'node' ? [main] : ['run', '-A', main]
  const r = spawnSync(cmd, [...pre, ...args, ...(s ? ['--store', s.url] : [])], {
    cwd: dir,
    encoding: encoding as any,
    input,
    env: { ...process.env, CUTPOINT_TOKEN: '', DENO_NO_UPDATE_CHECK: '1', NO_COLOR: '1' },
    maxBuffer: 256 << 20,
    timeout: 300_000,
  })
  return { status: r.status, stdout: r.stdout as any, stderr: String(r.stderr) }
}

const FIELDS = ['name', 'bytes', 'chunks', 'novel_chunks', 'novel_bytes', 'sent_bytes', 'pack_bytes', 'packs', 'recipe_bytes', 'delta_base', 'version', 'digest']
const pick = (r: Record<string, any>) => Object.fromEntries(FIELDS.map((k) => [k, r[k]]))

beforeAll(async () => {
  if (!haveCutpoint()) throw new Error('build native/target/release/cutpoint first')
  const g = cutpoint(['gen', '--out', dir, '--size', '12m', '--versions', '1', '--mods', '20', '--mod-size', '100', '--seed', '3'])
  expect(g.status, g.stderr).toBe(0)
  store = await startStore()
  ref = await startStore()
})
afterAll(async () => {
  await store?.stop()
  await ref?.stop()
  rmSync(dir, { recursive: true, force: true })
})

describe.each(['node', 'deno'] as const)('cutpoint-js under %s', (rt) => {
  it('push --json equals cutpoint push --json; pull and ls; the native CLI pulls it back', () => {
    const ns = `cli-${rt}`
    for (const i of [0, 1]) {
      const r = js(rt, ['push', v(i), '--name', 'f.bin', '--ns', ns, '--json'], store)
      expect(r.status, r.stderr).toBe(0)
      const mine = JSON.parse(r.stdout)
      const theirs = nativePush(ref, v(i), 'f.bin', ['--ns', ns])
      expect(pick(mine)).toEqual(pick(theirs))
    }
    const again = js(rt, ['push', v(1), '--name', 'f.bin', '--ns', ns, '--json'], store)
    expect(again.status, again.stderr).toBe(0)
    expect(JSON.parse(again.stdout)).toMatchObject({ novel_chunks: 0, pack_bytes: 0, version: 3 })
    // Standard input, as a stream: the same recipe as the file.
    const si = js(rt, ['push', '-', '--name', 'stdin.bin', '--ns', ns, '--json'], store, 'utf8', readFileSync(v(1)))
    expect(si.status, si.stderr).toBe(0)
    expect(JSON.parse(si.stdout)).toMatchObject({ novel_chunks: 0, chunks: JSON.parse(again.stdout).chunks, digest: JSON.parse(again.stdout).digest })
    // A person's summary line.
    const line = js(rt, ['push', v(0), '--name', 'g.bin', '--ns', ns], store)
    expect(line.status, line.stderr).toBe(0)
    expect(line.stdout).toMatch(/^g\.bin -> version 1: .* processed, \d+ chunks, 0 novel/)
    // pull: by the JS CLI, of what the native CLI pushed (ref) and of its own (store).
    const p1 = js(rt, ['pull', 'f.bin', '--ns', ns, '-o', `${rt}-a.bin`, '--version', '1', '--json'], ref)
    expect(p1.status, p1.stderr).toBe(0)
    expect(JSON.parse(p1.stdout)).toMatchObject({ name: 'f.bin', version: 1, bytes: readFileSync(v(0)).length })
    expect(readFileSync(join(dir, `${rt}-a.bin`)).equals(readFileSync(v(0)))).toBe(true)
    const p2 = js(rt, ['pull', 'f.bin', '--ns', ns, '-o', '-'], store, 'buffer')
    expect(p2.status, p2.stderr).toBe(0)
    expect((p2.stdout as Buffer).equals(readFileSync(v(1)))).toBe(true)
    expect(p2.stderr).toMatch(/f\.bin version 3 -> <stdout>: .* verified/)
    const nat = cutpoint(['pull', 'f.bin', '--ns', ns, '-o', join(dir, `${rt}-n.bin`)], store)
    expect(nat.status, nat.stderr).toBe(0)
    expect(readFileSync(join(dir, `${rt}-n.bin`)).equals(readFileSync(v(1)))).toBe(true)
    // ls --json is the native ls --json.
    const l = js(rt, ['ls', '--ns', ns, '--json'], store)
    expect(l.status, l.stderr).toBe(0)
    expect(JSON.parse(l.stdout)).toEqual(JSON.parse(cutpoint(['ls', '--ns', ns, '--json'], store).stdout))
    expect(js(rt, ['ls', '--ns', ns], store).stdout).toMatch(/f\.bin\s+3\s/)
  })

  it('chunk and stats equal the native ones', () => {
    const a = js(rt, ['chunk', v(0), '--format', 'jsonl'])
    expect(a.status, a.stderr).toBe(0)
    expect(a.stdout).toBe(cutpoint(['chunk', v(0), '--format', 'jsonl']).stdout)
    const s = js(rt, ['stats', v(0), v(1), '--json'])
    expect(s.status, s.stderr).toBe(0)
    const mine = JSON.parse(s.stdout)
    const theirs = JSON.parse(cutpoint(['stats', v(0), v(1), '--json']).stdout)
    expect(mine.profile).toBe(theirs.profile)
    const strip = (r: any) => r.files.concat([r.total]).map((f: any) => [f.bytes, f.chunks, f.unique_bytes, f.dedup_ratio])
    expect(strip(mine)).toEqual(strip(theirs))
  })

  it('exit codes: 2 bad usage / profile, 1 unreadable file, unreachable store, wrong token', async () => {
    expect(js(rt, ['push', v(0), '--profile', 'gear:8k:2k:1k'], store).status).toBe(2)
    expect(js(rt, ['push', v(0), '--pack-size', '1k'], store).status).toBe(2)
    expect(js(rt, ['frobnicate']).status).toBe(2)
    expect(js(rt, ['pull', 'x', '--version', '0'], store).status).toBe(2)
    const missing = js(rt, ['push', join(dir, 'nope.bin')], store)
    expect(missing.status).toBe(1)
    expect(missing.stderr).toMatch(/nope\.bin/)
    const nothing = js(rt, ['pull', 'never-pushed', '-o', 'x.bin'], store)
    expect(nothing.status).toBe(1)
    expect(nothing.stderr).toMatch(/no file 'never-pushed'/)
    const s = await startStore({ tokens: { rw: 'default:rw' } })
    const url = s.url
    try {
      const bad = js(rt, ['push', v(0), '--token', 'cp_wrong'], s)
      expect(bad.status).toBe(1)
      expect(bad.stderr).toMatch(/401/)
    } finally {
      await s.stop()
    }
    const dead = js(rt, ['ls', '--store', url])
    expect(dead.status).toBe(1)
    expect(dead.stderr).toMatch(/cannot reach the store/)
  })
})

// Issue #30: what a newcomer types first.
describe('the first commands of a new user', () => {
  it('cutpoint-js chunk FILE | head: ends quietly (no EPIPE trace), exit 0', () => {
    const r = spawnSync('bash', ['-c', `"${process.execPath}" "${main}" chunk "${v(0)}" 2>err.txt | head -n 1 >/dev/null; echo "\${PIPESTATUS[0]}"; cat err.txt`], { cwd: dir, encoding: 'utf8', timeout: 120_000 })
    const [status, ...err] = r.stdout.split('\n')
    expect(err.join('\n')).not.toMatch(/EPIPE|Error/)
    expect(status).toBe('0')
  })

  it('cutpoint-js --version, <command> --help, and stats reports the threads it used', () => {
    const ver = js('node', ['--version'])
    expect(ver.status).toBe(0)
    expect(ver.stdout).toBe(`cutpoint-js ${JSON.parse(readFileSync(`${root}web/package.json`, 'utf8')).version}\n`)
    for (const cmd of ['push', 'pull', 'ls', 'chunk', 'stats']) {
      const h = js('node', [cmd, '--help'])
      expect(h.status, `${cmd} --help: ${h.stderr}`).toBe(0)
      expect(h.stdout).toMatch(new RegExp(`^usage: cutpoint-js ${cmd} `))
    }
    const bad = js('node', ['push', '--frobnicate'])
    expect(bad.status).toBe(2)
    expect(bad.stderr).toMatch(/usage: cutpoint-js push/)
    const s = js('node', ['stats', v(0), '--json'])
    expect(s.status, s.stderr).toBe(0)
    expect(JSON.parse(s.stdout).threads).toBe(availableParallelism())
    expect(JSON.parse(js('node', ['stats', v(0), '--json', '--threads', '1']).stdout).threads).toBe(1)
  })

  it('cutpoint --version, completions, help texts, a busy port exits 1, a refused connection says what to check', async () => {
    const ver = cutpoint(['--version'])
    expect(ver.status).toBe(0)
    expect(ver.stdout).toMatch(/^cutpoint \d+\.\d+\.\d+/)
    const comp = cutpoint(['completions', 'bash'])
    expect(comp.status).toBe(0)
    expect(comp.stdout).toMatch(/_cutpoint\(\)/)
    expect(comp.stdout).toMatch(/push/)
    expect(cutpoint(['gc', '--help']).stdout).toMatch(/half referenced/)
    expect(cutpoint(['gc', '--help']).stdout).toMatch(/--json\s+Print the report as one JSON object/)
    expect(cutpoint(['check', '--help']).stdout).toMatch(/--json\s+Print the report as one JSON object/)
    expect(cutpoint(['rm', '--help']).stdout).toMatch(/<NAME>\s+The name/)
    expect(cutpoint(['serve', '--help']).stdout).toMatch(/--reindex\s+Rebuild the index from the packs and recipes, then serve/)
    const s = await startStore()
    const addr = s.url.replace('http://', '')
    try {
      const busy = cutpoint(['serve', '--data', join(dir, 'busy-store'), '--listen', addr])
      expect(busy.status, busy.stderr).toBe(1)
      expect(busy.stderr).toMatch(/cannot listen on/)
    } finally {
      await s.stop()
    }
    const dead = cutpoint(['ls', '--store', s.url])
    expect(dead.status).toBe(1)
    expect(dead.stderr).toMatch(/is the store running\?/)
  })
})
