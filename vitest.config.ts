import { defineConfig } from 'vitest/config'

// JavaScript tests: Node (the library over worker_threads), Chromium (Playwright) and Deno
// (both driven from Node). One file at a time: the machine has 2 cores.
export default defineConfig({
  test: {
    include: ['tests/js/**/*.test.ts'],
    fileParallelism: false,
    testTimeout: 120_000,
    hookTimeout: 120_000,
    reporters: ['default'],
  },
})
