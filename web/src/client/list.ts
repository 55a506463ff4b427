// The store's listing (`GET files`, PROTOCOL.md 4.7: `{"files": [{...}, ...]}`) read without one
// long task in a page: a namespace of 10,000 files answers about 1.6 MB of JSON, and one
// `JSON.parse` of it held the page's thread 15-170 ms (quiet to loaded) as a folder's push ended.
// A large answer is scanned in slices (`pause`) for the entries of its top-level "files" array,
// which are parsed by `JSON.parse` a few hundred at a time; everything else in the answer is
// checked as JSON too (`JSON.parse` of it with the entries taken out). A small answer is one
// `JSON.parse`.
import { pause } from './slice.js'

/** Answers up to this many characters are parsed at once. */
const WHOLE = 256 << 10
/** Characters scanned between pauses. */
const SCAN = 64 << 10
/** Entries parsed by one `JSON.parse`. */
const ENTRIES = 256

/** The value of the top-level "files" key of the JSON `text` (undefined if it has none); throws a SyntaxError on bad JSON. */
export async function parseFiles(text: string): Promise<unknown> {
  if (text.length <= WHOLE) return JSON.parse(text)?.files
  const spans = await entrySpans(text)
  if (!spans) return JSON.parse(text)?.files
  // The answer without the entries (an empty array where they were) must be JSON, and the
  // text between entries nothing but one comma (and white space).
  const [open, close] = spans.array
  const rest = JSON.parse(text.slice(0, open + 1) + text.slice(close))
  if (rest === null || typeof rest !== 'object' || !Array.isArray(rest.files) || rest.files.length !== 0) throw new SyntaxError('the files array is not where it was found')
  const out: unknown[] = []
  const e = spans.entries
  for (let k = 0; k < e.length; k += 2 * ENTRIES) {
    const last = Math.min(e.length, k + 2 * ENTRIES)
    for (let j = Math.max(2, k); j < last; j += 2) if (!/^\s*,\s*$/.test(text.slice(e[j - 1], e[j]))) throw new SyntaxError('a bad separator between entries of the files array')
    out.push(...JSON.parse(`[${text.slice(e[k], e[last - 1])}]`))
    await pause()
  }
  // Around the entries: only white space (the commas between them are checked above).
  if (e.length) {
    if (!/^\s*$/.test(text.slice(open + 1, e[0])) || !/^\s*$/.test(text.slice(e[e.length - 1], close))) throw new SyntaxError('bad text around the entries of the files array')
  } else if (!/^\s*$/.test(text.slice(open + 1, close))) throw new SyntaxError('bad text in the files array')
  return out
}

/** Where the top-level "files" array is (`[` and `]`), and its entries' [start, end) pairs; undefined when there is none or an entry is not an object. */
export async function entrySpans(text: string): Promise<{ array: [number, number]; entries: number[] } | undefined> {
  const entries: number[] = []
  let depth = 0
  let key = ''
  let inArray = false
  let open = -1
  let entryStart = -1
  for (let i = 0; i < text.length; i++) {
    if (i % SCAN === 0) await pause()
    const c = text.charCodeAt(i)
    if (c === 0x22) {
      // A string: to its closing quote (escapes skipped); a key of the top-level object is kept.
      const start = i
      for (i++; i < text.length; i++) {
        const d = text.charCodeAt(i)
        if (d === 0x5c) i++
        else if (d === 0x22) break
        if (i % SCAN === 0) await pause()
      }
      if (depth === 1) key = text.slice(start, i + 1)
      continue
    }
    if (c === 0x7b || c === 0x5b) {
      // { or [
      depth++
      if (depth === 2 && c === 0x5b && key === '"files"' && open < 0) {
        inArray = true
        open = i
      } else if (inArray && depth === 3) {
        if (c !== 0x7b) return undefined
        entryStart = i
      }
    } else if (c === 0x7d || c === 0x5d) {
      // } or ]
      if (inArray && depth === 3) entries.push(entryStart, i + 1)
      else if (inArray && depth === 2) return { array: [open, i], entries }
      depth--
      if (depth < 0) return undefined
    } else if (inArray && depth === 2 && c !== 0x2c && c !== 0x20 && c !== 0x0a && c !== 0x0d && c !== 0x09) return undefined
  }
  return undefined
}
