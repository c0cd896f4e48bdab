"""Where the dashboard keeps its checkpoints: in the page, the browser's origin-private file system (OPFS)
or IndexedDB, through the worker's store (web/js/checkpoint-store.js, self.webgradCheckpoints); in CPython,
a folder.

Every store has the same three coroutines and keeps the same promise: a save is a new generation, written
whole under a temporary name and then renamed (or committed in one transaction), and the generation
before it is kept until the next save, so a crash in the middle of a write leaves the previous checkpoint.
    save(data)   store the bytes as the newest generation
    load()       the stored checkpoints' bytes, newest first
    discard()    remove them all
"""

import os
import re
import sys

KEEP = 2  # generations kept: the newest and the one before it


class FolderStore:
    """Checkpoints as files checkpoint-<generation>.safetensors in `folder`."""

    kind = "a folder"
    _NAME = re.compile(r"^checkpoint-(\d+)\.safetensors$")

    def __init__(self, folder):
        self.folder = os.fspath(folder)

    def _generations(self):
        if not os.path.isdir(self.folder):
            return []
        found = (self._NAME.match(name) for name in os.listdir(self.folder))
        return sorted(int(m.group(1)) for m in found if m)

    def _path(self, generation, suffix=".safetensors"):
        return os.path.join(self.folder, f"checkpoint-{generation:08d}{suffix}")

    async def save(self, data):
        os.makedirs(self.folder, exist_ok=True)
        generations = self._generations()
        generation = (generations[-1] if generations else 0) + 1
        partial = self._path(generation, ".partial")
        with open(partial, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(partial, self._path(generation))  # atomic: the file is whole or absent
        for old in generations[:-(KEEP - 1) or None]:
            os.remove(self._path(old))

    async def load(self):
        out = []
        for generation in reversed(self._generations()):
            with open(self._path(generation), "rb") as f:
                out.append(f.read())
        return out

    async def discard(self):
        for generation in self._generations():
            os.remove(self._path(generation))


class BrowserStore:
    """The worker's store (a JS object, see web/js/checkpoint-store.js) seen from Python."""

    def __init__(self, js_store):
        self.js = js_store
        self.kind = "this browser's storage"

    async def save(self, data):
        from pyodide.ffi import to_js

        self.kind = str(await self.js.save(to_js(bytes(data))))  # the store says where it wrote: OPFS | IndexedDB

    async def load(self):
        found = await self.js.load()
        self.kind = str(found.kind)
        return [item.to_bytes() for item in found.items]

    async def discard(self):
        await self.js.discard()


def default_store():
    """The worker's store in the page (Pyodide); None elsewhere (an App in CPython keeps no checkpoints unless
    it is given a store)."""
    if sys.platform != "emscripten":
        return None
    import js

    store = getattr(js, "webgradCheckpoints", None)
    return BrowserStore(store) if store is not None else None
