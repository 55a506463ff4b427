import { existsSync, readdirSync, readFileSync } from 'node:fs'
import { fileURLToPath } from 'node:url'

export const root = fileURLToPath(new URL('../../', import.meta.url))
export const vectorDir = `${root}tests/vectors/`

export interface Case {
  note: string
  input: { generator: string; seed: number; length: number; period?: number; byte?: number }
  cuts: number[]
  blake3: string[]
  sha256: string[]
}
export interface VectorFile {
  name: string
  profile: string
  cases: Case[]
}

/** The shared vectors (tests/vectors/*.json). */
export function loadVectors(): VectorFile[] {
  if (!existsSync(vectorDir)) return []
  return readdirSync(vectorDir)
    .filter((f) => f.endsWith('.json'))
    .sort()
    .map((f) => ({ name: f, ...JSON.parse(readFileSync(vectorDir + f, 'utf8')) }))
}
