// Deno (the npm package `deno` ships the binary): runs tests/deno/vectors.js.
import { expect, it } from 'vitest'
import { spawnSync } from 'node:child_process'
import { root } from './helpers'

it('deno: shared vectors through Deno workers', () => {
  const r = spawnSync(`${root}node_modules/.bin/deno`, ['run', '--allow-read', '--allow-write', 'tests/deno/vectors.js'], {
    cwd: root,
    env: { ...process.env, DENO_NO_UPDATE_CHECK: '1', NO_COLOR: '1' },
    encoding: 'utf8',
    timeout: 300_000,
  })
  const out = `${r.stdout}\n${r.stderr}`
  console.log(out.trim().split('\n').slice(-5).join('\n'))
  expect(r.status, out).toBe(0)
  expect(out).toMatch(/deno: \d+ passed, 0 failed/)
})
