// Copies the wasm-bindgen outputs into dist/wasm/{simd128,simd128-relaxed,plain}/ (the loader
// imports them from there, so bundlers see literal paths).
import { cpSync, existsSync, rmSync } from 'node:fs'
const root = new URL('../../', import.meta.url)
for (const flavor of ['simd128', 'simd128-relaxed', 'plain']) {
  const from = new URL(`wasm/pkg-${flavor}/`, root)
  const to = new URL(`web/dist/wasm/${flavor}/`, root)
  if (!existsSync(from)) {
    console.error(`missing ${from.pathname}: run npm run build:wasm first`)
    process.exit(1)
  }
  rmSync(to, { recursive: true, force: true })
  cpSync(from, to, { recursive: true, filter: (p) => !p.endsWith('.gitignore') })
}
