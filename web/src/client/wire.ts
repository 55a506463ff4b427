// The store's wire format from the Rust core, through this thread's wasm instance
// (wasm/src/lib.rs: `packHeader`, `packFrameHead`, `packEnd`, `queryEncode` / `queryDecode`,
// names, and `StoreRecipe` with the file digest and the delta encoder). Nothing is encoded here.
import type { WasmModule } from '../../../common/wasm.js'
import { need } from '../runtime.js'

export function wire(): WasmModule {
  return need().mod
}
