// Where the trainer's checkpoints live between page loads: this origin's private file system (OPFS), or
// IndexedDB where OPFS is missing (an older browser, some private windows). The worker sets
// self.webgradCheckpoints = openCheckpointStore(); Python calls it (webgrad/apps/mnist/storage.py):
//   save(bytes)  -> "OPFS" | "IndexedDB"          store the bytes as the newest generation
//   load()       -> {kind, items: [Uint8Array]}   the stored checkpoints, newest first
//   discard()                                     remove them all
// A save never overwrites: it writes a new generation whole (OPFS: under a .partial name, then renamed;
// IndexedDB: in one transaction) and keeps the one before it, so a crash mid-write leaves the previous
// checkpoint intact. Python checks each checkpoint's checksum when it reads it.

const KEEP = 2; // generations kept
const DIR = "webgrad-checkpoints";
const NAME = /^checkpoint-(\d+)\.safetensors$/;
const fileName = (generation, suffix = ".safetensors") => `checkpoint-${String(generation).padStart(8, "0")}${suffix}`;

class OpfsStore {
  kind = "OPFS";

  constructor(dir) {
    this.dir = dir;
  }

  async generations() {
    const found = [];
    for await (const name of this.dir.keys()) {
      const m = NAME.exec(name);
      if (m) found.push(Number(m[1]));
    }
    return found.sort((a, b) => a - b);
  }

  async write(name, bytes) {
    const handle = await this.dir.getFileHandle(name, { create: true });
    if (handle.createSyncAccessHandle) { // dedicated workers: synchronous, flushed to disk
      const access = await handle.createSyncAccessHandle();
      try {
        access.truncate(0);
        let at = 0;
        while (at < bytes.length) at += access.write(bytes.subarray(at), { at });
        access.flush();
      } finally {
        access.close();
      }
    } else { // the page's thread: a writable stream, committed as a whole on close
      const stream = await handle.createWritable();
      await stream.write(bytes);
      await stream.close();
    }
    return handle;
  }

  async save(bytes) {
    for (const name of await arrayOf(this.dir.keys())) { // left by a save that a crash interrupted
      if (name.endsWith(".partial")) await this.dir.removeEntry(name);
    }
    const old = await this.generations();
    const generation = (old.at(-1) ?? 0) + 1;
    if (typeof FileSystemFileHandle.prototype.move === "function") {
      const handle = await this.write(fileName(generation, ".partial"), bytes);
      await handle.move(fileName(generation));
    } else { // no rename here: the new generation's own name; an unfinished one fails its checksum
      await this.write(fileName(generation), bytes);
    }
    for (const g of old.slice(0, Math.max(0, old.length - (KEEP - 1)))) await this.dir.removeEntry(fileName(g));
    return this.kind;
  }

  async load() {
    const items = [];
    for (const g of (await this.generations()).reverse()) {
      const file = await (await this.dir.getFileHandle(fileName(g))).getFile();
      items.push(new Uint8Array(await file.arrayBuffer()));
    }
    return { kind: this.kind, items };
  }

  async discard() {
    for (const name of await arrayOf(this.dir.keys())) await this.dir.removeEntry(name);
  }
}

async function arrayOf(iterator) {
  const out = [];
  for await (const x of iterator) out.push(x);
  return out;
}

class IdbStore {
  kind = "IndexedDB";

  constructor(db) {
    this.db = db;
  }

  // Runs body(store) in one transaction; resolves with what body's last request gave, once committed.
  transact(mode, body) {
    return new Promise((resolve, reject) => {
      const tx = this.db.transaction("checkpoints", mode);
      let result;
      body(tx.objectStore("checkpoints"), (value) => { result = value; });
      tx.oncomplete = () => resolve(result);
      tx.onerror = tx.onabort = () => reject(tx.error || new Error("IndexedDB transaction aborted"));
    });
  }

  save(bytes) {
    return this.transact("readwrite", (store) => {
      store.getAllKeys().onsuccess = ({ target }) => {
        const old = target.result.sort((a, b) => a - b);
        const generation = (old.at(-1) ?? 0) + 1;
        store.put({ generation, bytes });
        for (const g of old.slice(0, Math.max(0, old.length - (KEEP - 1)))) store.delete(g);
      };
    }).then(() => this.kind);
  }

  load() {
    return this.transact("readonly", (store, done) => {
      store.getAll().onsuccess = ({ target }) => done(target.result);
    }).then((rows) => ({
      kind: this.kind,
      items: rows.sort((a, b) => b.generation - a.generation).map((r) => new Uint8Array(r.bytes)),
    }));
  }

  discard() {
    return this.transact("readwrite", (store) => store.clear());
  }
}

export function openIndexedDb(name = DIR) {
  return new Promise((resolve, reject) => {
    const request = indexedDB.open(name, 1);
    request.onupgradeneeded = () => request.result.createObjectStore("checkpoints", { keyPath: "generation" });
    request.onsuccess = () => resolve(new IdbStore(request.result));
    request.onerror = () => reject(request.error);
  });
}

export async function openOpfs(name = DIR) {
  const root = await navigator.storage.getDirectory();
  return new OpfsStore(await root.getDirectoryHandle(name, { create: true }));
}

// The store, opened on first use: OPFS if the browser has it, else IndexedDB; `prefer` = "indexeddb" skips
// OPFS (tests of the fallback). Every call copies its bytes first: a view into Python's memory can move.
export function openCheckpointStore(prefer = "opfs") {
  let opened = null;
  const store = () => opened ??= (async () => {
    if (prefer !== "indexeddb" && self.navigator?.storage?.getDirectory) {
      try {
        return await openOpfs();
      } catch (err) {
        console.warn(`OPFS is not available (${err.message || err}); checkpoints go to IndexedDB`);
      }
    }
    if (!self.indexedDB) throw new Error("this browser offers neither OPFS nor IndexedDB to keep checkpoints in");
    return openIndexedDb();
  })();
  return {
    save: async (bytes) => {
      const copy = new Uint8Array(bytes); // before any await
      return (await store()).save(copy);
    },
    load: async () => (await store()).load(),
    discard: async () => (await store()).discard(),
  };
}
