// The store's listing parsed in slices (web/src/client/list.ts `parseFiles`): the same entries
// as one `JSON.parse` for any large answer, and bad JSON refused as `JSON.parse` refuses it.
import { describe, expect, it } from 'vitest'
import { entrySpans, parseFiles } from '../../web/src/client/list.ts'

/** A listing of `n` entries whose names hold what a scanner could trip on. */
function listing(n: number): { files: object[] } {
  const odd = ['a},{"b', 'q"uote', 'back\\slash', 'br[ack]et', 'uni\u00e9\u4e2d\ud83d\ude00', 'tab\tnl\n', '{"files":[]}', ',', '']
  const files = []
  for (let i = 0; i < n; i++) files.push({ name: `d/${odd[i % odd.length]}${i}`, version: 1 + (i % 3), bytes: i * 7919, chunks: i % 5, digest: 'ab'.repeat(32), created: 1764252000 + i })
  return { files }
}

describe('parseFiles (the store listing, in slices)', () => {
  it('large answers: the entries JSON.parse gives, compact or spaced, with other keys around', async () => {
    const v = listing(5000)
    for (const text of [
      JSON.stringify(v),
      JSON.stringify(v, null, 2),
      JSON.stringify({ before: { files: [1, 2] }, files: v.files, after: 'files' }),
      `  ${JSON.stringify({ x: [[{ y: '[' }]], files: v.files })}\n`,
    ]) {
      expect(text.length).toBeGreaterThan(256 << 10)
      expect(await parseFiles(text)).toEqual(JSON.parse(text).files)
      // Taken in slices: the scanner found every entry (not the one-parse fallback).
      expect((await entrySpans(text))!.entries.length).toBe(2 * v.files.length)
    }
    // Small answers and one without files, too.
    expect(await parseFiles(JSON.stringify(listing(3)))).toEqual(listing(3).files)
    expect(await parseFiles(JSON.stringify({ nothing: 'x'.repeat(300 << 10) }))).toBeUndefined()
    expect(await parseFiles(JSON.stringify({ files: [], pad: 'x'.repeat(300 << 10) }))).toEqual([])
    // Entries that are not objects: parsed whole, as JSON.parse does.
    expect(await parseFiles(JSON.stringify({ files: [...listing(3000).files, 5] }))).toEqual([...listing(3000).files, 5])
  })

  it('bad JSON anywhere in a large answer is refused', async () => {
    const good = JSON.stringify(listing(5000))
    const entry = good.indexOf('},{', 200_000)
    const bad = [
      good + 'x', // trailing garbage
      good.slice(0, -1), // cut short
      good.slice(0, entry + 1) + good.slice(entry + 2), // a comma missing between entries
      good.slice(0, entry + 1) + ',,' + good.slice(entry + 2), // two commas
      good.slice(0, entry) + ',}' + good.slice(entry + 1), // a trailing comma inside an entry
      good.slice(0, 100_000) + '\u0001' + good.slice(100_000), // a control character
      good.replace('"files":[', '"files":[,'), // a comma before the first entry
      good.slice(0, -2) + ',]}', // a comma after the last
      good.replace('{"files"', '{"x":1 "files"'), // bad text outside the array
      JSON.stringify({ files: listing(3000).files, again: 1 }).replace('"again"', '"files"'), // files twice: the last one wins in JSON.parse
    ]
    for (const text of bad) {
      let parsed: unknown
      try {
        parsed = JSON.parse(text).files
      } catch {
        await expect(parseFiles(text)).rejects.toThrow(SyntaxError)
        continue
      }
      // Valid JSON (the duplicate key): the same value, or refused, never another one.
      await parseFiles(text).then(
        (v) => expect(v).toEqual(parsed),
        (e) => expect(e).toBeInstanceOf(SyntaxError),
      )
    }
  })
})
