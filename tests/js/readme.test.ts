// The README's quick start, run as written on the built tree (issue #30), so that the docs cannot
// drift from the code: every ```sh block of the "Quick start" section runs in one bash, in the
// clone's root, with one change: the `cutpoint serve ... &` line gets `--listen 127.0.0.1:0` (a
// free port; tests use no fixed one) and the store's URL is exported as CUTPOINT_STORE, which the
// later commands read as the README's default address. The ```js block runs in Node (as a module
// file) against a store this test starts. Needs `bin/` (scripts/link-bins.sh: npm run setup, scripts/test-js.sh).
import { afterAll, beforeAll, describe, expect, it, onTestFinished } from 'vitest'
import { spawn, spawnSync } from 'node:child_process'
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { root } from './helpers'
import { startStore, type Store } from './store'

const readme = readFileSync(`${root}README.md`, 'utf8')

/** The text of the `## Quick start` section. */
function quickStart(): string {
  const a = readme.indexOf('\n## Quick start\n')
  expect(a, 'README.md has a "## Quick start" section').toBeGreaterThan(0)
  const b = readme.indexOf('\n## ', a + 1)
  return readme.slice(a, b < 0 ? undefined : b)
}

/** The fenced blocks of one language in `text`. */
function blocks(text: string, lang: string): string[] {
  const out: string[] = []
  const re = new RegExp('^```' + lang + '\\n([\\s\\S]*?)^```$', 'gm')
  for (let m = re.exec(text); m; m = re.exec(text)) out.push(m[1])
  return out
}

/** The sh blocks with the store's line given a free port (see the header). */
function script(sh: string): string {
  let served = 0
  const lines = sh.split('\n').map((line) => {
    const m = /^(cutpoint serve [^#&]*?)\s*&\s*(#.*)?$/.exec(line)
    if (!m) return line
    served++
    return [
      `${m[1]} --listen 127.0.0.1:0 >"$QS_LOG" 2>&1 &`,
      'for _ in $(seq 1 300); do grep -q "listening on" "$QS_LOG" && break; sleep 0.1; done',
      'export CUTPOINT_STORE=$(sed -n "s/^cutpoint serve: listening on //p" "$QS_LOG")',
      '[ -n "$CUTPOINT_STORE" ] || { cat "$QS_LOG" >&2; echo "the store did not start" >&2; exit 1; }',
    ].join('\n')
  })
  expect(served, 'the quick start starts one store with `cutpoint serve ... &`').toBe(1)
  return ['set -euo pipefail', ...lines].join('\n')
}

describe('README quick start', () => {
  const scratch = mkdtempSync(join(tmpdir(), 'cutpoint-readme-'))
  let store: Store | undefined
  beforeAll(() => {
    for (const b of ['bin/cutpoint', 'bin/cutpoint-js']) {
      expect(existsSync(`${root}${b}`), `${b} is missing: npm run setup (or bash scripts/link-bins.sh) links it`).toBe(true)
    }
  })
  afterAll(async () => {
    await store?.stop()
    rmSync(scratch, { recursive: true, force: true })
  })

  it('the sh blocks run as written: native push/pull, cutpoint-js push/pull', async () => {
    const sh = blocks(quickStart(), 'sh')
    expect(sh.length).toBeGreaterThan(0)
    const text = script(sh.join('\n'))
    const env: Record<string, string | undefined> = { ...process.env, TMPDIR: scratch, QS_LOG: join(scratch, 'serve.log'), NO_COLOR: '1' }
    for (const k of ['CUTPOINT_STORE', 'CUTPOINT_NS', 'CUTPOINT_TOKEN']) delete env[k]
    // Its own process group: whatever it leaves running (the store, on a failure) is stopped.
    const child = spawn('bash', ['-c', text], {
      cwd: root,
      detached: true,
      env,
      stdio: ['ignore', 'pipe', 'pipe'],
    })
    let out = ''
    child.stdout!.on('data', (b) => (out += b))
    child.stderr!.on('data', (b) => (out += b))
    const timer = setTimeout(() => process.kill(-child.pid!, 'SIGKILL'), 240_000)
    const status = await new Promise<number | null>((resolve) => child.on('close', resolve))
    clearTimeout(timer)
    try {
      process.kill(-child.pid!, 'SIGKILL')
    } catch {}
    expect(status, out.slice(-4000)).toBe(0)
    // The README's claims: the second version sent less than it processed; both CLIs ran.
    expect(out).toMatch(/demo\.bin/)
  })

  it('the js block runs in Node from the clone root', async () => {
    const js = blocks(quickStart(), 'js')
    expect(js.length).toBe(1)
    store = await startStore()
    // As a user would: a module file in the clone (here tests/artifacts/, not committed), where
    // `@cutpoint/web` resolves to the workspace package. (Not `node --input-type=module -e`:
    // worker_threads inherit that flag and refuse to start.)
    const dirOut = `${root}tests/artifacts`
    mkdirSync(dirOut, { recursive: true })
    const file = join(dirOut, `readme-quickstart-${process.pid}.mjs`)
    writeFileSync(file, js[0])
    onTestFinished(() => rmSync(file, { force: true }))
    const r = spawnSync(process.execPath, [file], {
      cwd: root,
      encoding: 'utf8',
      env: { ...process.env, CUTPOINT_STORE: store.url, CUTPOINT_TOKEN: '', CUTPOINT_NS: 'default' },
      timeout: 120_000,
    })
    expect(r.status, r.stderr).toBe(0)
    expect(r.stdout).toMatch(/^version 1: 1700000 bytes, \d+ novel, \d+ sent$/m)
    expect(r.stdout).toMatch(/^pulled 1700000 bytes, verified$/m)
  })
})
