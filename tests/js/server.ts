// A static file server for the browser tests, on 127.0.0.1 only (an ephemeral port).
import { createServer, type Server } from 'node:http'
import { createReadStream, statSync } from 'node:fs'
import { extname, normalize, join } from 'node:path'

const TYPES: Record<string, string> = {
  '.html': 'text/html; charset=utf-8',
  '.css': 'text/css; charset=utf-8',
  '.svg': 'image/svg+xml',
  '.png': 'image/png',
  '.js': 'text/javascript; charset=utf-8',
  '.mjs': 'text/javascript; charset=utf-8',
  '.json': 'application/json',
  '.wasm': 'application/wasm',
  '.map': 'application/json',
}

/** Serves `root`; with `isolated`, sends COOP/COEP so pages are cross-origin isolated. */
export function serve(root: string, isolated: boolean): Promise<{ url: string; server: Server }> {
  const server = createServer((req, res) => {
    const path = normalize(decodeURIComponent(new URL(req.url ?? '/', 'http://x').pathname))
    const file = join(root, path)
    if (!file.startsWith(root)) {
      res.writeHead(403).end()
      return
    }
    let st
    try {
      st = statSync(file)
    } catch {
      res.writeHead(404).end()
      return
    }
    if (!st.isFile()) {
      res.writeHead(404).end()
      return
    }
    const headers: Record<string, string> = {
      'content-type': TYPES[extname(file)] ?? 'application/octet-stream',
      'content-length': String(st.size),
      'cache-control': 'no-store',
    }
    if (isolated) {
      headers['cross-origin-opener-policy'] = 'same-origin'
      headers['cross-origin-embedder-policy'] = 'require-corp'
    }
    res.writeHead(200, headers)
    createReadStream(file).pipe(res)
  })
  return new Promise((resolve) => {
    server.listen(0, '127.0.0.1', () => {
      const a = server.address() as { port: number }
      resolve({ url: `http://127.0.0.1:${a.port}`, server })
    })
  })
}
