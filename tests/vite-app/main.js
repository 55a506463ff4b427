// A minimal app bundled by Vite (production build): the library, its workers and both wasm
// builds must resolve from the bundle. The test passes it a vector case and compares.
import { init, chunkAll } from '@cutpoint/web'
import { generate, diff } from '../js/vectors.mjs'

window.check = async (vf, i, opts) => {
  const c = vf.cases[i]
  const got = await chunkAll(new File([generate(c.input)], 'x'), { profile: vf.profile, ...opts })
  return diff(got, c)
}
window.ready = init().then((info) => (document.getElementById('status').textContent = info.buildId))
