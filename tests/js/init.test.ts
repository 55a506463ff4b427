// Calls before init() throw a clear error (a fresh module instance: Vitest isolates files).
import { expect, it } from 'vitest'
import * as cp from '@cutpoint/web'

it('anything before init() throws', () => {
  expect(() => cp.chunk(new Uint8Array(1))).toThrow(/init\(\)/)
  expect(() => cp.parseProfile('gear:2k:8k:64k')).toThrow(/init\(\)/)
})

it('init() picks simd128 where the engine has it, and can be forced', async () => {
  const a = await cp.init({ wasm: 'plain' })
  expect(a.flavor).toBe('plain')
  expect(a.backends).not.toContain('simd128')
  const b = await cp.init()
  expect(b.flavor).toBe(cp.simdSupported() ? 'simd128' : 'plain')
  expect(b.buildId).toMatch(/^cutpoint-wasm\/[\d.]+\/simd128$/)
})
