// PROTOCOL.md is enough to write a client (issue #27): tests/interop/client.py was written by an
// outside implementer from PROTOCOL.md alone (Python standard library, SHA-256 namespaces). It
// starts a real `cutpoint serve` on 127.0.0.1, pushes (framed and heads-first packs, full and
// delta commits), reads back (recipes, restores, ranges, ETags), deletes, runs gc and check,
// provokes the documented errors, and cross-checks with the native CLI both ways.
import { describe, expect, it } from 'vitest'
import { spawnSync } from 'node:child_process'
import { root } from './helpers'
import { cutpointBin, haveCutpoint } from './store'

describe('an independent client written from PROTOCOL.md alone', () => {
  it('interoperates with the store and the native CLI (every check passes)', () => {
    if (!haveCutpoint()) throw new Error('build native/target/release/cutpoint first')
    const r = spawnSync('python3', [`${root}tests/interop/client.py`, '--selftest', '--bin', cutpointBin], { encoding: 'utf8', timeout: 300_000 })
    const out = `${r.stdout}\n${r.stderr}`
    const failed = out.split('\n').filter((l) => /^FAIL\b/.test(l.trim()))
    expect(failed, out.slice(-4000)).toEqual([])
    expect(r.status, out.slice(-4000)).toBe(0)
    // It ran its checks (not an empty run).
    expect((out.match(/^PASS\b/gm) ?? []).length, out.slice(-2000)).toBeGreaterThan(100)
    expect(out).toMatch(/(\d+) checks, \1 passed, 0 failed/)
  }, 320_000)
})
