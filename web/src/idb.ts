// IndexedDB as promises, for the two databases the library keeps in browsers: the RapidCDC hint
// cache (rapid.ts) and the push journal (client/journal.ts).

/** Settles when `tx` completes; rejects with its error when it fails or is aborted. */
export function done(tx: IDBTransaction): Promise<void> {
  return new Promise((resolve, reject) => {
    tx.oncomplete = () => resolve()
    tx.onerror = () => reject(new Error(`cutpoint: IndexedDB: ${tx.error?.message ?? 'error'}`))
    tx.onabort = () => reject(new Error(`cutpoint: IndexedDB: ${tx.error?.message ?? 'aborted'}`))
  })
}

/** The result of request `r`. */
export function req<T>(r: IDBRequest<T>): Promise<T> {
  return new Promise((resolve, reject) => {
    r.onsuccess = () => resolve(r.result)
    r.onerror = () => reject(new Error(`cutpoint: IndexedDB: ${r.error?.message ?? 'error'}`))
  })
}
