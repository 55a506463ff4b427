// The cutpoint page: `npm run dev` (dev server) and `npm run build:app` (static site in web/app/dist).
// Both need the library built first (`npm run build:js`): the page imports `@cutpoint/web` from
// web/dist, whose workers and wasm files Vite finds through `new URL(..., import.meta.url)`.
import { defineConfig } from 'vite'
import { fileURLToPath } from 'node:url'

// Cross-origin isolation: SharedArrayBuffer for the library where it helps. The store answers
// with CORS, which is all `require-corp` asks of a cross-origin fetch; the page works without these too.
const isolation = {
  'Cross-Origin-Opener-Policy': 'same-origin',
  'Cross-Origin-Embedder-Policy': 'require-corp',
}

// `npm run dev` and `preview:app` print their URL (log level info); `build:app` prints warnings only.
export default defineConfig(({ command }) => ({
  root: fileURLToPath(new URL('.', import.meta.url)),
  base: './',
  logLevel: command === 'build' ? 'warn' : 'info',
  build: { outDir: 'dist', emptyOutDir: true, target: 'es2022' },
  worker: { format: 'es' },
  // Linked workspace package: serve it as it is (its workers and wasm are found by URL).
  optimizeDeps: { exclude: ['@cutpoint/web'] },
  // Fixed ports: a local store allows these pages by origin (`cutpoint serve --cors-origin
  // http://127.0.0.1:5173 --cors-origin http://127.0.0.1:4173`, web/README.md).
  server: { headers: isolation, host: '127.0.0.1', port: 5173, strictPort: true },
  preview: { headers: isolation, host: '127.0.0.1', port: 4173, strictPort: true },
}))
