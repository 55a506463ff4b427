// The page's thread given back in slices: loops over many inputs or chunks in a browser yield once
// they have held the thread SLICE_MS (issue #33: a folder of 10,000 files pushed from a page
// without frame gaps over 50 ms). Node and Deno never yield here (no frames to keep).
import { isDeno, isNode } from '../../../common/wasm.js'

/**
 * How long a loop may hold a browser's thread (ms): a loop over 10,000 inputs in one task was a
 * long task of 200-500 ms, and a yield every 256 inputs still left tasks of 100-280 ms on a
 * loaded machine.
 */
const SLICE_MS = 8
let sliceStart = 0

/** A new task (a macrotask: rendering and input run) once SLICE_MS has passed since the last; else undefined (no await needed). */
export function pause(): Promise<void> | undefined {
  if (isNode || isDeno) return undefined
  if (performance.now() - sliceStart < SLICE_MS) return undefined
  return new Promise<void>((r) => setTimeout(r, 0)).then(() => {
    sliceStart = performance.now()
  })
}
