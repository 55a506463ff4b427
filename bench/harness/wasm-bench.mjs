// The WebAssembly half of `npm run bench`, one module for every JavaScript runtime: Node, Deno
// and the Chromium page (bench/harness/page.html) all call runWasmBench() with what they have,
// and get rows in the same shape as the native ones (bench/harness/run.mjs merges them).
//
// env: {
//   runtime: 'node' | 'deno' | 'chromium',
//   data: Uint8Array                 the same seeded random bytes the native rows use
//   limits: ArrayBuffer|Uint8Array   bench/results/tmp/limits.wasm (memory.copy + v128 read loop)
//   loadBuild(flavor) -> {mod, memory} the core's wasm builds; flavors: those built (web/dist/wasm/*)
//   cp                               the @cutpoint/web library (web/dist/web/src/index.js)
//   hashwasm, subtle                 rivals for fingerprints (optional)
//   versions: [input...]             the synthetic versioned dataset for end to end (paths or Blobs)
//   versionBytes: number             their total size
//   workers: [1, 2, ...]; quick: bool; reps: number
//   sections: ['limits','stage1','chunk','hash','e2e']
//   emit(row), skip(name, reason), log(line)
// }
import { runHashBench } from '../js/hash-lib.mjs'

const now = () => performance.now()

/** [median, min, max] seconds of `reps` runs after one warm-up. */
async function time(reps, fn) {
  await fn()
  const xs = []
  for (let r = 0; r < reps; r++) {
    const t0 = now()
    await fn()
    xs.push((now() - t0) / 1000)
  }
  xs.sort((a, b) => a - b)
  return [xs[Math.floor(xs.length / 2)], xs[0], xs[xs.length - 1]]
}

const profileFor = (family, avg) => `${family}:${kib(avg / 4)}:${kib(avg)}:${kib(avg * 8)}`
const kib = (n) => (n % (1 << 20) === 0 ? `${n >> 20}m` : `${n >> 10}k`)

export async function runWasmBench(env) {
  const { runtime, data, emit, skip, log = () => {} } = env
  const n = data.length
  const reps = env.reps ?? 3
  const sections = env.sections ?? ['limits', 'stage1', 'chunk', 'hash', 'e2e']
  const speed = (section, name, bytes, t, extra = {}) =>
    emit({ section, runtime, name, value: bytes / t[0] / 1e9, unit: 'GB/s', min: bytes / t[2] / 1e9, max: bytes / t[1] / 1e9, seconds: t[0], bytes, ...extra })

  if (sections.includes('limits')) {
    log(`${runtime}: limits`)
    // Two copies of the data fit in the module's memory: [0, n) source, [n, 2n) destination.
    const { instance } = await WebAssembly.instantiate(env.limits)
    const ex = instance.exports
    const pages = Math.ceil((2 * n + 64) / 65536) - ex.mem.buffer.byteLength / 65536
    if (pages > 0) ex.mem.grow(pages)
    new Uint8Array(ex.mem.buffer, 0, n).set(data)
    speed('limits', `limits/${runtime}/wasm-memcpy`, n, await time(reps, () => ex.copy(n, 0, n)), { what: 'memcpy', impl: 'wasm memory.copy' })
    speed('limits', `limits/${runtime}/wasm-read`, n, await time(reps, () => ex.read(0, n & ~31)), { what: 'read', impl: 'wasm v128.load loop' })
    const dst = new Uint8Array(n)
    speed('limits', `limits/${runtime}/js-set`, n, await time(reps, () => dst.set(data)), { what: 'memcpy', impl: 'TypedArray.set' })
  }

  const families = ['crc32', 'rabin', 'gear']
  const avgs = [8192, 16384, 65536]
  if (sections.includes('stage1')) {
    // Stage 1 alone, one thread, per build and kernel (Chromium and Deno: each build's best
    // kernel only, to keep the run short).
    for (const flavor of env.flavors ?? ['simd128', 'plain']) {
      let b
      try {
        b = await env.loadBuild(flavor)
      } catch (e) {
        skip(`stage1/${runtime}-wasm-${flavor}`, `the ${flavor} build did not load: ${e.message}`)
        continue
      }
      const { mod, memory } = b
      let backends = mod.backends()
      if (runtime !== 'node') backends = [mod.defaultBackend()]
      log(`${runtime}: stage 1, ${flavor} build, kernels ${backends.join(',')}`)
      for (const family of families) {
        for (const avg of avgs) {
          const profile = profileFor(family, avg)
          for (const backend of backends) {
            const st = new mod.Stage1(profile, backend, n)
            new Uint8Array(memory.buffer, st.inputPtr(), n).set(data)
            const t = await time(reps, () => st.scan(n, 0, n, 0))
            st.free()
            speed('chunking', `stage1/${runtime}-wasm-${flavor}/${backend}/${profile}`, n, t, { engine: 'stage1', build: flavor, backend, family, avg, profile, threads: 1 })
          }
        }
      }
    }
  }

  if (sections.includes('chunk')) {
    // The library's chunk() over the same bytes, hash none: stage 1 in 1..N workers (0: no
    // workers, all on this thread), stage 2 on this thread. Per build; every family at 8k
    // (quick: gear only). As the library recommends for repeated in-memory inputs: the bytes in
    // a SharedArrayBuffer where the runtime has one (workers copy their slices out; otherwise
    // the coordinator sends each slice), the workers kept across runs (createPool; the untimed
    // first run of `time` warms them), the chunks taken in batches.
    await env.cp.init()
    const profiles = env.quick ? [profileFor('gear', 8192)] : families.map((f) => profileFor(f, 8192))
    let input = data
    if (typeof SharedArrayBuffer !== 'undefined') {
      try {
        input = new Uint8Array(new SharedArrayBuffer(n))
        input.set(data)
      } catch {
        input = data
      }
    }
    const shared = input !== data
    for (const flavor of ['simd128', 'plain']) {
      for (const workers of [0, ...env.workers]) {
        let pool
        try {
          pool = await env.cp.createPool({ workers, wasm: flavor })
          for (const profile of profiles) {
            log(`${runtime}: chunk() ${flavor} ${profile} ${workers} worker(s)`)
            let chunks = 0
            try {
              const t = await time(reps, async () => {
                chunks = 0
                for await (const b of env.cp.chunk(input, { profile, pool, hash: 'none' }).batches()) chunks += b.length
              })
              speed('chunking', `chunk/${runtime}-wasm-${flavor}/${profile}/w${workers}`, n, t, {
                engine: 'web-chunk', build: flavor, family: profile.split(':')[0], avg: 8192, profile, threads: Math.max(1, workers), workers, chunks,
                input: shared ? 'SharedArrayBuffer' : 'Uint8Array', pool: 'kept',
              })
            } catch (e) {
              skip(`chunk/${runtime}-wasm-${flavor}/${profile}/w${workers}`, `failed: ${e.message}`)
            }
          }
        } catch (e) {
          skip(`chunk/${runtime}-wasm-${flavor}/w${workers}`, `failed: ${e.message}`)
        } finally {
          pool?.close()
        }
      }
    }
  }

  if (sections.includes('hash')) {
    log(`${runtime}: fingerprints`)
    const hn = Math.min(n, env.quick ? 4 << 20 : 32 << 20)
    const builds = {}
    for (const flavor of env.flavors ?? ['simd128', 'plain']) {
      try {
        builds[flavor] = await env.loadBuild(flavor)
      } catch (e) {
        skip(`hash/${runtime}/core-wasm-${flavor}`, `the ${flavor} build did not load: ${e.message}`)
      }
    }
    const res = await runHashBench({ data: data.subarray(0, hn), builds, hashwasm: env.hashwasm, subtle: env.subtle, log: () => {}, extra: env.hashExtra ?? {} })
    for (const r of res) {
      // hash/<impl>/<alg>/<size> in MB/s (hash-lib.mjs) -> GB/s rows
      const [, impl, alg, piece] = r.name.split('/')
      emit({ section: 'hash', runtime, name: `hash/${runtime}/${impl}/${alg}/${piece}`, value: r.median / 1000, unit: 'GB/s', min: r.min / 1000, max: r.max / 1000, bytes: hn, alg, piece: Number(piece), impl })
    }
  }

  if (sections.includes('e2e') && env.versions?.length) {
    // End to end: chunk + BLAKE3 + dedup against the earlier files, files in order.
    await env.cp.init()
    const workers = env.workers[env.workers.length - 1]
    log(`${runtime}: end to end, ${env.versions.length} files, ${workers} workers`)
    let ratio = 0
    let chunks = 0
    const t = await time(Math.min(reps, 2), async () => {
      const seen = new Set()
      let total = 0
      let unique = 0
      chunks = 0
      for (const f of env.versions) {
        for await (const c of env.cp.chunk(f, { workers, hash: 'blake3' })) {
          total += c.length
          chunks++
          if (!seen.has(c.hash)) {
            seen.add(c.hash)
            unique += c.length
          }
        }
      }
      ratio = total / unique
    })
    speed('e2e', `e2e/${runtime}/gear:2k:8k:64k/blake3/w${workers}`, env.versionBytes, t, { threads: workers, workers, dedup_ratio: ratio, chunks, files: env.versions.length, profile: 'gear:2k:8k:64k' })
  }
}
