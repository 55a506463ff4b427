// Tables out of the text the existing benchmark examples print (mtfbc_bench: aligned columns;
// rapid_bench: Markdown), as { title, notes, columns, rows } for the JSON results.

const cell = (s) => {
  const t = s.trim()
  return /^-?\d+(\.\d+)?$/.test(t) ? Number(t) : t
}

/** rapid_bench: every Markdown table, titled by the `## ` heading above it. */
export function parseMarkdownTables(text) {
  const out = []
  let title = ''
  let notes = []
  let t = null
  for (const line of text.split('\n')) {
    if (line.startsWith('## ')) {
      title = line.slice(3).trim()
      notes = []
      continue
    }
    if (line.startsWith('# ')) {
      notes.push(line.slice(2).trim())
      continue
    }
    if (line.startsWith('|')) {
      const cells = line.split('|').slice(1, -1).map((c) => c.trim())
      if (!t) {
        t = { title, notes: [...notes], columns: cells, rows: [] }
        out.push(t)
      } else if (!cells.every((c) => /^-+$/.test(c))) t.rows.push(cells.map(cell))
      continue
    }
    t = null
  }
  return out
}

const HEADER = /^(configuration|chunker)\s{2,}/
const MULTI = [['median s', 'median_s'], ['cpu s', 'cpu_s'], ['avg size', 'avg_size'], ['<64 B', '<64B']]

/** mtfbc_bench: the aligned tables (header line starting 'configuration' or 'chunker'). */
export function parseMtfbc(text) {
  const out = []
  let title = ''
  let notes = []
  let t = null
  for (const line of text.split('\n')) {
    if (line.startsWith('## ')) {
      title = line.slice(3).trim()
      notes = []
      t = null
      continue
    }
    if (HEADER.test(line)) {
      let h = line
      for (const [a, b] of MULTI) h = h.replace(a, b)
      const [first, ...rest] = h.trim().split(/\s+/)
      t = { title, notes: [...notes], columns: [first, ...rest], rows: [] }
      out.push(t)
      continue
    }
    if (!t) {
      if (line.startsWith('(')) notes.push(line.trim())
      continue
    }
    const m = line.match(/^(.*?\S)\s{2,}(\S.*)$/)
    if (!m || line.startsWith('(') || line.startsWith(' ')) {
      t = null
      continue
    }
    t.rows.push([m[1], ...m[2].trim().split(/\s+/).map((c) => cell(c.replace(/x$/, '').replace(/%$/, '')))])
  }
  return out
}
