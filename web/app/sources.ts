// A folder's files, read without freezing the page (issue #33). `<input webkitdirectory>` is the
// fallback only: Chromium builds its whole File list on the page's thread before the page's code
// runs (a CDP profile of 10,000 files: one task of 4.7-5 s, all of it Chromium's own code), and
// nothing the page does can split it. Instead:
// - "Choose a folder…" uses `showDirectoryPicker()` (File System Access, Chromium): the folder
//   is walked through its handles, each File made by an asynchronous `getFile()`;
// - a dropped folder is walked through `webkitGetAsEntry()` directory readers (100 entries a
//   read), each File made by an asynchronous `file()`.
// Either way a few Files are asked for at a time and the walk gives the thread back at least
// every SLICE_MS, so frames keep coming while a large folder is read.

export interface FolderFile {
  file: File
  /** Its path inside the picked or dropped folder, the folder's own name first. */
  name: string
}

/** The most a walk holds the page's thread before it yields (ms). */
const SLICE_MS = 8
/** Files asked for at once (each a round trip to the browser's process). */
const IN_FLIGHT = 16

/** Yields to the event loop (a new task: input, rendering) once SLICE_MS has passed since the last time. */
class Slicer {
  private since = performance.now()
  async maybe(): Promise<void> {
    if (performance.now() - this.since < SLICE_MS) return
    await new Promise((r) => setTimeout(r, 0))
    this.since = performance.now()
  }
}

/** `f` over `items`, IN_FLIGHT at a time, results in the items' order. */
async function inOrder<T, R>(items: T[], f: (t: T) => Promise<R>, slicer: Slicer): Promise<R[]> {
  const out: R[] = new Array(items.length)
  let next = 0
  const lane = async () => {
    while (next < items.length) {
      const i = next++
      out[i] = await f(items[i])
      await slicer.maybe()
    }
  }
  await Promise.all(Array.from({ length: Math.min(IN_FLIGHT, items.length) }, lane))
  return out
}

/** Names sorted at once, in one task; longer lists are merged in slices. */
const SORT_RUN = 256

/**
 * `list` sorted by name (stable), in slices. Each name is read once: an entry's or handle's
 * `name` is a getter into the browser, and a sort calling it twice per comparison took 30-90 ms
 * on a folder of 5,000. Sorted in one task, 5,000 names still held the page's thread for
 * 135 ms (a CDP profile of a 10,000-file drop, loaded machine): runs of SORT_RUN are sorted,
 * then merged, the thread given back between slices.
 */
export async function sortByName<T extends { name: string }>(list: T[], slicer: { maybe(): Promise<void> }): Promise<T[]> {
  let a: { k: string; x: T }[] = new Array(list.length)
  for (let i = 0; i < list.length; i++) {
    a[i] = { k: list[i].name, x: list[i] }
    if ((i & 63) === 63) await slicer.maybe()
  }
  const cmp = (p: { k: string }, q: { k: string }) => (p.k < q.k ? -1 : p.k > q.k ? 1 : 0)
  for (let i = 0; i < a.length; i += SORT_RUN) {
    const run = a.slice(i, i + SORT_RUN).sort(cmp)
    for (let j = 0; j < run.length; j++) a[i + j] = run[j]
    await slicer.maybe()
  }
  let b: { k: string; x: T }[] = new Array(a.length)
  for (let w = SORT_RUN; w < a.length; w *= 2) {
    for (let lo = 0; lo < a.length; lo += 2 * w) {
      const mid = Math.min(lo + w, a.length)
      const hi = Math.min(lo + 2 * w, a.length)
      let i = lo
      let j = mid
      for (let o = lo; o < hi; o++) {
        b[o] = j >= hi || (i < mid && cmp(a[i], a[j]) <= 0) ? a[i++] : a[j++]
        if ((o & 255) === 255) await slicer.maybe()
      }
    }
    ;[a, b] = [b, a]
  }
  const out: T[] = new Array(a.length)
  for (let i = 0; i < a.length; i++) out[i] = a[i].x
  return out
}

/** The File System Access handles this walk uses (not in every TypeScript DOM library yet). */
interface DirHandle {
  kind: 'directory'
  name: string
  values(): AsyncIterable<DirHandle | FileHandle>
}
interface FileHandle {
  kind: 'file'
  name: string
  getFile(): Promise<File>
}

/** Whether this browser has `showDirectoryPicker` (Chromium); else the `webkitdirectory` input is used. */
export function canPickDirectory(): boolean {
  return typeof (window as any).showDirectoryPicker === 'function'
}

/** Asks for a folder (`showDirectoryPicker`); undefined when the user cancels. */
export async function pickDirectory(): Promise<DirHandle | undefined> {
  try {
    return await (window as any).showDirectoryPicker({ id: 'cutpoint-folder', mode: 'read' })
  } catch (e: any) {
    if (e?.name === 'AbortError') return undefined
    throw e
  }
}

/**
 * The files under a directory handle, each named `dir/sub/file` (as `webkitRelativePath`),
 * sorted by path within each folder; `onCount` is told how many so far.
 */
export async function filesOfHandle(dir: DirHandle, onCount?: (n: number) => void): Promise<FolderFile[]> {
  const out: FolderFile[] = []
  const slicer = new Slicer()
  const walk = async (d: DirHandle, prefix: string): Promise<void> => {
    const kids: (DirHandle | FileHandle)[] = []
    for await (const h of d.values()) {
      kids.push(h)
      await slicer.maybe()
    }
    const sorted = await sortByName(kids, slicer)
    await slicer.maybe()
    const files = sorted.filter((h): h is FileHandle => h.kind === 'file')
    const got = await inOrder(files, (h) => h.getFile(), slicer)
    for (let i = 0; i < files.length; i++) {
      out.push({ file: got[i], name: `${prefix}/${files[i].name}` })
      await slicer.maybe()
    }
    onCount?.(out.length)
    for (const h of sorted) if (h.kind === 'directory') await walk(h, `${prefix}/${h.name}`)
  }
  await walk(dir, dir.name)
  return out
}

/**
 * The files of a drop, folders walked (each file named by its path inside the drop), and
 * whether it held a folder. The entries are taken from the DataTransfer at once (it is emptied
 * after the drop event's task).
 */
export async function filesOfDrop(dt: DataTransfer, onCount?: (n: number) => void): Promise<{ files: FolderFile[]; folder: boolean }> {
  const entries: FileSystemEntry[] = []
  const plain: File[] = []
  for (const item of Array.from(dt.items)) {
    if (item.kind !== 'file') continue
    const entry = item.webkitGetAsEntry?.()
    if (entry) entries.push(entry)
    else {
      const f = item.getAsFile()
      if (f) plain.push(f)
    }
  }
  const out: FolderFile[] = plain.map((file) => ({ file, name: file.name }))
  const slicer = new Slicer()
  const fileOf = (e: FileSystemFileEntry) => new Promise<File>((res, rej) => e.file(res, rej))
  const walk = async (list: FileSystemEntry[]): Promise<void> => {
    const files = list.filter((e): e is FileSystemFileEntry => e.isFile)
    const got = await inOrder(files, fileOf, slicer)
    for (let i = 0; i < files.length; i++) {
      out.push({ file: got[i], name: files[i].fullPath.replace(/^\/+/, '') || got[i].name })
      await slicer.maybe()
    }
    onCount?.(out.length)
    for (const e of list) {
      if (!e.isDirectory) continue
      const reader = (e as FileSystemDirectoryEntry).createReader()
      const children: FileSystemEntry[] = []
      for (;;) {
        const batch = await new Promise<FileSystemEntry[]>((res, rej) => reader.readEntries(res, rej))
        if (batch.length === 0) break
        children.push(...batch)
        await slicer.maybe()
      }
      const sorted = await sortByName(children, slicer)
      await slicer.maybe()
      await walk(sorted)
    }
  }
  await walk(entries)
  return { files: out, folder: entries.some((e) => e.isDirectory) }
}
