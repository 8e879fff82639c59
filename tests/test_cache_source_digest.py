"""kiln's own source is part of every cache key; its hash is remembered under a stamp of the
files' metadata, and any edit, even one that keeps the size and the modification time, makes
the hash be computed again from the contents."""

import glob
import os
import time

from kiln import pipeline


def digest_of(monkeypatch, files):
    monkeypatch.setattr(pipeline, "_source_files", lambda: [(os.path.basename(f), f) for f in files])
    pipeline.kiln_digest.cache_clear()
    try:
        return pipeline.kiln_digest()
    finally:
        pipeline.kiln_digest.cache_clear()


def test_the_hash_is_remembered_and_an_edit_is_seen(tmp_path, monkeypatch):
    monkeypatch.setenv("KILN_CACHE_DIR", str(tmp_path / "cache"))
    source = tmp_path / "ops.py"
    source.write_text("def add(a, b):\n    return a + b\n")
    first = digest_of(monkeypatch, [str(source)])
    assert len(glob.glob(str(tmp_path / "cache" / "*" / f"*{pipeline.SOURCE_DIGEST}"))) == 1
    assert digest_of(monkeypatch, [str(source)]) == first  # from the remembered entry

    stat = os.stat(source)
    time.sleep(0.05)  # file times advance by clock ticks of a few milliseconds
    source.write_text("def add(a, b):\n    return a - b\n")  # same size
    os.utime(source, ns=(stat.st_atime_ns, stat.st_mtime_ns))  # and the old modification time
    edited = digest_of(monkeypatch, [str(source)])
    assert edited != first

    monkeypatch.setenv("KILN_CACHE_DIR", str(tmp_path / "elsewhere"))  # nothing remembered there
    assert digest_of(monkeypatch, [str(source)]) == edited


def test_an_unwritable_cache_still_gives_the_hash_without_a_warning(tmp_path, monkeypatch, recwarn):
    blocked = tmp_path / "file"
    blocked.write_text("not a directory")
    monkeypatch.setenv("KILN_CACHE_DIR", str(blocked))
    source = tmp_path / "ops.py"
    source.write_text("x = 1\n")
    assert len(digest_of(monkeypatch, [str(source)])) == 64
    assert not [w for w in recwarn if "compile cache" in str(w.message)]
