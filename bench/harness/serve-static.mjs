// The bench harnesses' page server: files under `root`, cross-origin isolated (COOP/COEP, so the
// library gets SharedArrayBuffer), on 127.0.0.1 at a free port. With `sink`, a POST to a path it
// accepts is read to its end and answered with its length (an upload baseline that stores nothing).
import http from 'node:http'
import path from 'node:path'
import { createReadStream, existsSync, statSync } from 'node:fs'

const TYPES = { '.html': 'text/html', '.js': 'text/javascript', '.mjs': 'text/javascript', '.css': 'text/css', '.wasm': 'application/wasm', '.json': 'application/json' }

/** Serves `root`; `sink(url)` says which POSTs are the sink. Resolves to { server, url }. */
export async function serveStatic(root, { sink } = {}) {
  const top = path.resolve(root)
  const server = http.createServer((req, res) => {
    if (req.method === 'POST' && sink?.(req.url)) {
      let n = 0
      req.on('data', (d) => (n += d.length))
      req.on('end', () => res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ n })))
      return
    }
    const file = path.join(top, path.normalize(decodeURIComponent(new URL(req.url, 'http://x').pathname)))
    if ((file !== top && !file.startsWith(top + path.sep)) || !existsSync(file) || !statSync(file).isFile()) return res.writeHead(404).end()
    res.writeHead(200, { 'content-type': TYPES[path.extname(file)] ?? 'application/octet-stream', 'cross-origin-opener-policy': 'same-origin', 'cross-origin-embedder-policy': 'require-corp' })
    createReadStream(file).pipe(res)
  })
  await new Promise((r) => server.listen(0, '127.0.0.1', r))
  return { server, url: `http://127.0.0.1:${server.address().port}` }
}
