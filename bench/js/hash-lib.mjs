// Fingerprint throughput on the chunk sizes the profiles produce: the core's wasm BLAKE3 and
// SHA-256 (both builds) vs hash-wasm vs WebCrypto. Runs in Node and in Chromium (same module).
// `env`: { data: Uint8Array, builds: {simd128, plain} ({mod, memory}), hashwasm, subtle, log }

export async function runHashBench(env) {
  const { data, builds, hashwasm, subtle, log, extra = {} } = env
  const sizes = [2048, 8192, 16384, 65536]
  const total = data.length
  const results = []
  const measure = async (name, fn, runs = 3) => {
    await fn() // warm
    const xs = []
    for (let r = 0; r < runs; r++) {
      const t0 = performance.now()
      await fn()
      xs.push(total / ((performance.now() - t0) / 1000) / 1e6)
    }
    xs.sort((a, b) => a - b)
    const s = { name, min: xs[0], median: xs[Math.floor(xs.length / 2)], max: xs[xs.length - 1] }
    results.push(s)
    log(`${name.padEnd(40)} ${s.min.toFixed(0).padStart(6)} ${s.median.toFixed(0).padStart(6)} ${s.max.toFixed(0).padStart(6)}`)
  }
  for (const size of sizes) {
    const count = Math.floor(total / size)
    for (const alg of ['blake3', 'sha256']) {
      for (const [flavor, b] of Object.entries(builds)) {
        const batch = Math.max(1, Math.floor((4 << 20) / size))
        const h = new b.mod.Hasher(alg, batch * size)
        const lengths = new Uint32Array(batch).fill(size)
        await measure(`hash/core-wasm-${flavor}/${alg}/${size}`, () => {
          for (let i = 0; i < count; i += batch) {
            const k = Math.min(batch, count - i)
            new Uint8Array(b.memory.buffer, h.inputPtr(), k * size).set(data.subarray(i * size, (i + k) * size))
            h.digests(k === batch ? lengths : lengths.subarray(0, k))
          }
        })
        h.free()
      }
      if (hashwasm) {
        const hw = alg === 'blake3' ? await hashwasm.createBLAKE3() : await hashwasm.createSHA256()
        await measure(`hash/hash-wasm/${alg}/${size}`, () => {
          for (let i = 0; i < count; i++) {
            hw.init()
            hw.update(data.subarray(i * size, (i + 1) * size))
            hw.digest('binary')
          }
        })
      }
      if (alg === 'sha256' && subtle) {
        await measure(`hash/webcrypto/${alg}/${size}`, async () => {
          const inflight = []
          for (let i = 0; i < count; i++) {
            inflight.push(subtle.digest('SHA-256', data.subarray(i * size, (i + 1) * size)))
            if (inflight.length >= 64) await Promise.all(inflight.splice(0))
          }
          await Promise.all(inflight)
        })
      }
      for (const [name, fn] of Object.entries(extra)) {
        if (!name.includes(alg)) continue
        await measure(`hash/${name}/${size}`, () => {
          for (let i = 0; i < count; i++) fn(data.subarray(i * size, (i + 1) * size))
        })
      }
    }
  }
  return results
}
