// Option checks at the API boundary: every option is type-checked before it reaches the
// WebAssembly module (wasm-bindgen's glue assumes its types: a number passed as a string crashed
// inside wasm with "memory access out of bounds"), and each message names the option and what it
// got, e.g. `cutpoint: workers must be an integer in 0..256 (got the string '4')`.

/** How a value appears in a message: its type, and the value itself when short. */
export function shown(v: unknown): string {
  if (v === null) return 'null'
  if (v === undefined) return 'undefined'
  if (Array.isArray(v)) return `an array (${v.length} item${v.length === 1 ? '' : 's'})`
  switch (typeof v) {
    case 'string':
      return `the string '${v.length > 60 ? `${v.slice(0, 60)}…` : v}'`
    case 'number':
      return `the number ${v}`
    case 'boolean':
      return `the boolean ${v}`
    case 'bigint':
      return `the bigint ${v}n`
    case 'function':
      return 'a function'
    case 'symbol':
      return 'a symbol'
  }
  const name = (v as object).constructor?.name
  return name && name !== 'Object' ? `a ${name}` : 'an object'
}

function fail(name: string, want: string, v: unknown): never {
  throw new TypeError(`cutpoint: ${name} must be ${want} (got ${shown(v)})`)
}

/** A string, or `undefined` when absent (`null` is not absent). */
export function optString(name: string, v: unknown, like: string): string | undefined {
  if (v === undefined) return undefined
  if (typeof v !== 'string') fail(name, `a string like ${like}`, v)
  return v
}

/** An integer in lo..hi, or `undefined` when absent; `range` says the range in the message. */
export function optInt(name: string, v: unknown, lo: number, hi: number, range = `${lo}..${hi}`): number | undefined {
  if (v === undefined) return undefined
  if (typeof v !== 'number' || !Number.isInteger(v) || v < lo || v > hi) fail(name, `an integer in ${range}`, v)
  return v
}

/** One of `known` (strings), or `undefined` when absent. */
export function optOneOf<T extends string>(name: string, v: unknown, known: readonly T[]): T | undefined {
  if (v === undefined) return undefined
  if (typeof v !== 'string') fail(name, `one of ${known.map((k) => `'${k}'`).join(', ')}`, v)
  if (!known.includes(v as T)) throw new Error(`cutpoint: unknown ${name} '${v}' (known: ${known.join(', ')})`)
  return v as T
}

/** A boolean, or `undefined` when absent. */
export function optBool(name: string, v: unknown): boolean | undefined {
  if (v === undefined) return undefined
  if (typeof v !== 'boolean') fail(name, 'true or false', v)
  return v
}

/** An options object (absent: `{}`). */
export function options<T>(name: string, v: unknown): T {
  if (v === undefined) return {} as T
  if (v === null || typeof v !== 'object' || Array.isArray(v)) fail(name, 'an object', v)
  return v as T
}

/** A function, or `undefined` when absent. */
export function optFunction(name: string, v: unknown): void {
  if (v !== undefined && typeof v !== 'function') fail(name, 'a function', v)
}
