// Numbers for people.

const UNITS = ['B', 'KiB', 'MiB', 'GiB', 'TiB']

export function bytes(n: number): string {
  if (!Number.isFinite(n)) return '—'
  let i = 0
  let v = n
  while (v >= 1024 && i < UNITS.length - 1) {
    v /= 1024
    i++
  }
  return i === 0 ? `${n} B` : `${v.toFixed(v >= 100 ? 0 : v >= 10 ? 1 : 2)} ${UNITS[i]}`
}

export function rate(bytesPerSecond: number): string {
  if (!Number.isFinite(bytesPerSecond) || bytesPerSecond <= 0) return '—'
  return `${(bytesPerSecond / 1e6).toFixed(bytesPerSecond >= 1e8 ? 0 : 1)} MB/s`
}

export function ratio(r: number): string {
  if (r === Infinity) return '∞ (nothing new)'
  if (!Number.isFinite(r) || r <= 0) return '—'
  return `${r.toFixed(2)}×`
}

/** One formatter (`toLocaleString` makes one per call: a folder's rows and listing call this thousands of times). */
const COUNT = new Intl.NumberFormat('en-US')

export function count(n: number): string {
  return Number.isFinite(n) ? COUNT.format(n) : '—'
}

export function when(unixSeconds: number | undefined): string {
  if (!unixSeconds) return ''
  const d = new Date(unixSeconds * 1000)
  return d.toISOString().replace('T', ' ').slice(0, 16)
}
