// The page's settings: defaults, the `?store=` (and `?ns=`) query parameters, localStorage.

export interface Settings {
  store: string
  namespace: string
  token: string
  profile: string
  /** Empty: the library's default (one worker per core). */
  workers: string
  /** 'off' or a RapidCDC criterion. */
  rapid: string
  /** 'auto', 'off' or 'max' (`createClient({ compression })`). */
  compression: string
}

const KEY = 'cutpoint.settings.v1'

/** What `cutpoint serve` listens on by default, as the native CLI's `--store` default. */
export const DEFAULT_STORE = 'http://127.0.0.1:7373'

export const DEFAULTS: Settings = {
  store: DEFAULT_STORE,
  namespace: 'default',
  token: '',
  profile: 'gear:2k:8k:64k',
  workers: '',
  rapid: 'off',
  compression: 'auto',
}

function saved(): Partial<Settings> {
  try {
    const v = JSON.parse(localStorage.getItem(KEY) ?? '{}')
    return v && typeof v === 'object' ? v : {}
  } catch {
    return {}
  }
}

/** Defaults, then what was saved, then the query parameters (`?store=`, `?ns=`). */
export function loadSettings(location: Location): Settings {
  const s: Settings = { ...DEFAULTS }
  for (const [k, v] of Object.entries(saved())) if (k in s && typeof v === 'string') (s as any)[k] = v
  const q = new URLSearchParams(location.search)
  const store = q.get('store')
  if (store) s.store = store
  const ns = q.get('ns')
  if (ns) s.namespace = ns
  return s
}

export function saveSettings(s: Settings): void {
  try {
    localStorage.setItem(KEY, JSON.stringify(s))
  } catch {
    // Private mode or storage full: the settings just are not remembered.
  }
}

/** The store URL without a trailing slash; throws a readable error for a bad one. */
export function storeBase(url: string): string {
  let u: URL
  try {
    u = new URL(url)
  } catch {
    throw new Error(`the store URL '${url}' is not a URL (e.g. ${DEFAULT_STORE})`)
  }
  if (u.protocol !== 'http:' && u.protocol !== 'https:') throw new Error(`the store URL must be http or https (got ${u.protocol})`)
  return u.href.replace(/\/+$/, '')
}
