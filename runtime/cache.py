"""The compile cache on disk: object code by key, safe against crashes and races.

Each entry is one file, ``<dir>/<key[:2]>/<key>.o``, holding a magic tag, the
SHA-256 of the payload, and the payload. It is written to a temporary file in
the same directory and renamed into place, so a reader sees a whole entry or
none; a damaged entry (truncated, flipped bits) fails its checksum, is removed
and reported as a miss, and the caller rebuilds it. Threads and processes that
build the same entry take turns (``writing``, a ``filelock.FileLock`` on
``<key>.o.lock`` beside it), so it is built once.

The directory is ``$KILN_CACHE_DIR`` if set, else the user's cache directory
for kiln (``platformdirs.user_cache_dir``: ``~/.cache/kiln`` on Linux, or
``$XDG_CACHE_HOME/kiln``).
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import tempfile
import warnings

import filelock
import platformdirs

from kiln.runtime import config

MAGIC = b"KILNOBJ1"

# Seconds to wait for another builder of the same entry. One that takes longer is stuck
# or very slow: build it again here rather than hang (the entry is replaced whole).
LOCK_TIMEOUT = 600.0


def default_directory() -> str:
    """``$KILN_CACHE_DIR``, else the user's cache directory for kiln (``~/.cache/kiln`` on Linux)."""
    return config.get("KILN_CACHE_DIR") or platformdirs.user_cache_dir("kiln", appauthor=False)


class DiskCache:
    """Object code (bytes) by key (a hex string), under `directory` (default: `default_directory()`).

    >>> cache = DiskCache("/tmp/kiln-cache")
    >>> with cache.writing(key):
    ...     code = cache.load(key)
    ...     if code is None:
    ...         code = build()
    ...         cache.store(key, code)
    """

    def __init__(self, directory: str | None = None):
        self.directory = directory or default_directory()

    def path(self, key: str, suffix: str = ".o") -> str:
        return os.path.join(self.directory, key[:2], f"{key}{suffix}")

    @contextlib.contextmanager
    def writing(self, key: str):
        """Held while looking up `key` and building its entry on a miss: another thread or
        process building the same key waits, then finds the entry. Where no lock can be
        taken it goes on unlocked (the worst is building the entry twice): in a directory
        that cannot be written (``store`` warns about that), or with a RuntimeWarning after
        waiting LOCK_TIMEOUT seconds for a builder that does not finish."""
        path = self.path(key)
        lock = filelock.FileLock(path + ".lock", timeout=LOCK_TIMEOUT)
        locked = False
        try:
            os.makedirs(os.path.dirname(path), exist_ok=True)
            lock.acquire()
            locked = True
        except filelock.Timeout:  # an OSError too: caught first
            warnings.warn(
                f"kiln: waited {LOCK_TIMEOUT:g} s for another build of the compile cache entry {path}; "
                "building it here too",
                RuntimeWarning,
                stacklevel=3,
            )
        except OSError:
            pass
        try:
            yield
        finally:
            if locked:
                lock.release()

    def load(self, key: str, suffix: str = ".o") -> bytes | None:
        """The payload stored under `key` (in the file ending in `suffix`: ``.o`` for object
        code), or None if there is none or it is damaged (then removed, with a RuntimeWarning)."""
        path = self.path(key, suffix)
        try:
            with open(path, "rb") as f:
                data = f.read()
        except OSError:
            return None
        header = len(MAGIC) + 32
        if data[: len(MAGIC)] != MAGIC or hashlib.sha256(data[header:]).digest() != data[len(MAGIC) : header]:
            _discard_damaged(path)
            return None
        return data[header:]

    def store(self, key: str, payload: bytes, suffix: str = ".o", quiet: bool = False) -> None:
        """Write `payload` under `key`, whole or not at all; an unwritable directory is a
        RuntimeWarning, not an error (the caller has the code and runs it), or nothing at
        all when `quiet` (for a payload that only saves a little time)."""
        with self._writing_whole(key, suffix, quiet) as f:
            if f is not None:
                f.write(MAGIC + hashlib.sha256(payload).digest() + payload)

    @contextlib.contextmanager
    def _writing_whole(self, key: str, suffix: str, quiet: bool = False):
        """A file to write the entry under `key` into, renamed into place when the block ends
        (atomic: readers never see a half-written entry); None, with a RuntimeWarning unless
        `quiet`, where the directory cannot be written."""
        path = self.path(key, suffix)
        try:
            os.makedirs(os.path.dirname(path), exist_ok=True)
            fd, temporary = tempfile.mkstemp(dir=os.path.dirname(path), prefix=".tmp-")
        except OSError as exc:
            if not quiet:
                _warn_unwritable(self.directory, exc)
            yield None
            return
        try:
            with os.fdopen(fd, "wb") as f:
                yield f
            os.replace(temporary, path)
        except OSError as exc:
            if not quiet:
                _warn_unwritable(self.directory, exc)
        finally:  # a failed write or rename (a full disk) leaves no temporary file behind
            with contextlib.suppress(FileNotFoundError):
                os.unlink(temporary)

    # -- large data (a model's weights), mapped instead of read --------------------------

    def store_mapped(self, key: str, chunks, suffix: str) -> None:
        """Write the bytes of `chunks` (buffers, in order) under `key` as an entry ``map``
        reads; whole or not at all, and an unwritable directory is a RuntimeWarning, as in
        ``store``. The payload starts at a page boundary so that a map of it is aligned."""
        with self._writing_whole(key, suffix) as f:
            if f is None:
                return
            f.write(bytes(_MAPPED_HEADER))
            digest, size = hashlib.sha256(), 0
            for chunk in chunks:
                f.write(chunk)
                digest.update(chunk)
                size += memoryview(chunk).nbytes
            f.seek(0)
            f.write(MAPPED_MAGIC + digest.digest() + size.to_bytes(8, "little"))

    def map(self, key: str, suffix: str):
        """The payload ``store_mapped`` wrote under `key`, as a read-only uint8 array mapped
        from the file (page-aligned; its pages are the file's, shared with every process that
        maps it), or None if there is none or it is damaged (then removed, with a
        RuntimeWarning). Reading it through once checks it against its SHA-256."""
        import numpy as np  # only for entries that hold data: object code needs none

        path = self.path(key, suffix)
        try:
            with open(path, "rb") as f:
                header = f.read(len(MAPPED_MAGIC) + 40)
                size = int.from_bytes(header[-8:], "little")
                whole = len(header) == len(MAPPED_MAGIC) + 40 and os.fstat(f.fileno()).st_size == _MAPPED_HEADER + size
                data = None
                if header[: len(MAPPED_MAGIC)] == MAPPED_MAGIC and whole:
                    data = (
                        np.memmap(f, np.uint8, "r", offset=_MAPPED_HEADER, shape=(size,))
                        if size
                        else np.empty(0, np.uint8)
                    )
        except OSError:
            return None  # none there (or no directory to look in)
        if data is not None and hashlib.sha256(data).digest() == header[len(MAPPED_MAGIC) : len(MAPPED_MAGIC) + 32]:
            return data
        _discard_damaged(path)
        return None


def _discard_damaged(path: str) -> None:
    warnings.warn(f"kiln: cache entry {path} is damaged; rebuilding it", RuntimeWarning, stacklevel=3)
    try:
        os.remove(path)
    except OSError:
        pass


def _warn_unwritable(directory: str, exc: OSError) -> None:
    warnings.warn(
        f"kiln: cannot write the compile cache at {directory} ({exc}); set KILN_CACHE_DIR to a writable directory",
        RuntimeWarning,
        stacklevel=4,
    )


MAPPED_MAGIC = b"KILNMAP1"
_MAPPED_HEADER = 4096  # bytes before a mapped entry's payload: a page, so the payload is page-aligned
