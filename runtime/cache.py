"""The compile cache on disk: object code by key, safe against crashes and races.

Each entry is one file, ``<dir>/<key[:2]>/<key>.o``, holding a magic tag, the
SHA-256 of the payload, and the payload. It is written to a temporary file in
the same directory and renamed into place, so a reader sees a whole entry or
none; a damaged entry (truncated, flipped bits) fails its checksum, is removed
and reported as a miss, and the caller rebuilds it. Within one process, threads
that build the same entry take turns (``writing``), so it is built once.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import tempfile
import threading
import warnings

MAGIC = b"KILNOBJ1"

_KEY_LOCKS: dict = {}  # key -> [lock, how many threads hold or wait for it]
_KEY_LOCKS_GUARD = threading.Lock()


def default_directory() -> str:
    return os.environ.get("KILN_CACHE_DIR") or os.path.join(os.path.expanduser("~"), ".cache", "kiln")


class DiskCache:
    def __init__(self, directory: str | None = None):
        self.directory = directory or default_directory()

    def path(self, key: str) -> str:
        return os.path.join(self.directory, key[:2], f"{key}.o")

    @contextlib.contextmanager
    def writing(self, key: str):
        """Held while looking up `key` and building its entry on a miss: another thread of this
        process building the same key waits, then finds the entry. (Other processes need no
        lock: an entry is renamed into place whole, so the worst is building it twice.)"""
        path = self.path(key)
        with _KEY_LOCKS_GUARD:
            entry = _KEY_LOCKS.setdefault(path, [threading.Lock(), 0])
            entry[1] += 1
        try:
            with entry[0]:
                yield
        finally:
            with _KEY_LOCKS_GUARD:
                entry[1] -= 1
                if not entry[1]:
                    del _KEY_LOCKS[path]

    def load(self, key: str) -> bytes | None:
        path = self.path(key)
        try:
            with open(path, "rb") as f:
                data = f.read()
        except OSError:
            return None
        header = len(MAGIC) + 32
        if data[: len(MAGIC)] != MAGIC or hashlib.sha256(data[header:]).digest() != data[len(MAGIC) : header]:
            warnings.warn(f"kiln: cache entry {path} is damaged; rebuilding it", RuntimeWarning, stacklevel=2)
            try:
                os.remove(path)
            except OSError:
                pass
            return None
        return data[header:]

    def store(self, key: str, payload: bytes) -> None:
        path = self.path(key)
        try:
            os.makedirs(os.path.dirname(path), exist_ok=True)
            fd, temporary = tempfile.mkstemp(dir=os.path.dirname(path), prefix=".tmp-")
            with os.fdopen(fd, "wb") as f:
                f.write(MAGIC + hashlib.sha256(payload).digest() + payload)
            os.replace(temporary, path)  # atomic: readers never see a half-written entry
        except OSError as exc:
            warnings.warn(
                f"kiln: cannot write the compile cache at {self.directory} ({exc}); "
                "set KILN_CACHE_DIR to a writable directory",
                RuntimeWarning,
                stacklevel=2,
            )
