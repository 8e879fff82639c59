"""The tuning database: one YAML record per kernel and host.

    - kernel: 3f2a9c...        # structural hash of the extracted kernel
      host: 5be1...            # fingerprint of the CPU: name, features, cores; for target
                               # cuda, of the GPU: name, compute capability, SMs
      function: matmul
      schedule: tuned          # or default: searched, and nothing beat the default schedule,
                               # which compile then applies (steps: [], tuned_ms = default_ms)
      steps: [[unroll_jam, k0.i, 8], [cache_read, k0.j.u, a1], ...]
                               # loops named as kernel k0, buffers as its arguments a<k>
      default_ms: 0.55
      tuned_ms: 0.48
      seed: 0
      trials: 100              # every run's together
      tried: [0c1f2e3d4a5b, ...]  # the candidates measured, which a later run skips
      kiln: 0.1.0
      kernel_ir: |              # the kernel alone, to re-measure it (--verify)
        module { ... }

Where the database is, first match wins (``find_path``):

1. the path given: ``kiln.compile(..., tuning_db="file.yaml")``, ``kiln tune --db file.yaml``;
2. ``$KILN_TUNING_DB``;
3. ``tuning.yaml`` in the user's data directory for kiln
   (``platformdirs.user_data_dir``: ``~/.local/share/kiln/tuning.yaml`` on Linux).

The working directory is not consulted: a project that keeps its records
beside its code names the file (``--db kiln-tuning.yaml``).

The file is read with ``yaml.safe_load``; records that are malformed are
reported with a warning and ignored, never an error. ``save`` holds a
``filelock.FileLock`` on ``<file>.lock`` while it reads the file again, applies
this session's changes (``put``, ``remove``) to what is there and writes the
result to a temporary file renamed into place: two processes tuning at once
keep each other's records, and a reader never sees half a file.
"""

from __future__ import annotations

import hashlib
import os
import tempfile
import warnings

import filelock
import platformdirs
import yaml

from kiln.runtime import config
from kiln.target import TARGETS, gpu_description, host_fingerprint, resolve_target  # noqa: F401  (the keys)

# A record's ``schedule``: the kernel was searched and the default schedule kept (its ``steps``
# are empty, and compile applies the default), or a schedule that beat it was found.
DEFAULT_KEPT = "default"
REQUIRED = {"kernel": str, "host": str, "steps": list, "default_ms": (int, float), "tuned_ms": (int, float)}


def find_path(path: str | None = None) -> str:
    """The database file: `path` if given, else ``$KILN_TUNING_DB``, else ``tuning.yaml`` in
    the user's data directory for kiln (``~/.local/share/kiln/tuning.yaml`` on Linux). The
    file need not exist.

    >>> find_path("records.yaml")
    'records.yaml'
    """
    return (
        path
        or config.get("KILN_TUNING_DB")
        or os.path.join(platformdirs.user_data_dir("kiln", appauthor=False), "tuning.yaml")
    )


def gpu_fingerprint() -> str:
    """The key of the current GPU's records (``kiln.target.Target.fingerprint`` of target cuda).
    Raises ``kiln.runtime.cuda.CudaUnavailable`` where there is no GPU."""
    return TARGETS["cuda"].fingerprint()


def target_fingerprint(target) -> str:
    """The key of the records for code compiled for `target` (a name or a ``kiln.target.Target``):
    see ``Target.fingerprint``."""
    return resolve_target(target).fingerprint()


class TuningDB:
    """The records of the file at `find_path(path)` (none if it does not exist yet).

    >>> db = TuningDB("tuning.yaml")
    >>> db.put({"kernel": "3f2a...", "host": host_fingerprint(), "steps": [["split", "k0.i", 8]],
    ...         "default_ms": 0.5, "tuned_ms": 0.4})
    >>> db.save()       # merged into what the file holds now, under its lock
    """

    def __init__(self, path: str | None = None):
        self.path = find_path(path)
        self.records = self._read()
        self._changes = {}  # (kernel, host) -> the record put, or None if removed; applied by save

    def _read(self) -> list:
        """The well-formed records of the file, with a warning for each of the rest."""
        if not os.path.exists(self.path):
            return []
        try:
            with open(self.path) as f:
                data = yaml.safe_load(f)
        except (OSError, yaml.YAMLError) as exc:
            warnings.warn(
                f"kiln: cannot read the tuning database {self.path} ({exc}); ignoring it", RuntimeWarning, stacklevel=3
            )
            return []
        if data is None:
            return []
        if not isinstance(data, list):
            warnings.warn(
                f"kiln: the tuning database {self.path} is not a list of records; ignoring it",
                RuntimeWarning,
                stacklevel=3,
            )
            return []
        records = []
        for index, record in enumerate(data):
            problem = _problem(record)
            if problem:
                warnings.warn(f"kiln: ignoring record #{index} of {self.path}: {problem}", RuntimeWarning, stacklevel=3)
            else:
                records.append(record)
        return records

    def lookup(self, kernel: str, host: str):
        for record in self.records:
            if record["kernel"] == kernel and record["host"] == host:
                return record
        return None

    def put(self, record: dict) -> None:
        """Add `record`, replacing the one for its kernel and host; written by `save`."""
        key = (record["kernel"], record["host"])
        self.records = _apply(self.records, {key: record})
        self._changes[key] = record

    def remove(self, kernel: str, host: str) -> None:
        """Drop the record for `kernel` on `host`; written by `save`."""
        self.records = _apply(self.records, {(kernel, host): None})
        self._changes[(kernel, host)] = None

    def save(self) -> None:
        """Apply this session's changes to the file as it is now, under its lock, and write it
        whole; `records` becomes the result. Raises OSError if the file cannot be written."""
        directory = os.path.dirname(os.path.abspath(self.path))
        os.makedirs(directory, exist_ok=True)
        with filelock.FileLock(self.path + ".lock"):
            self.records = _apply(self._read(), self._changes)
            fd, temporary = tempfile.mkstemp(dir=directory, prefix=".kiln-tuning-")
            with os.fdopen(fd, "w") as f:
                yaml.safe_dump(self.records, f, sort_keys=False, default_flow_style=None, width=120)
            os.replace(temporary, self.path)
        self._changes = {}

    def for_host(self, host: str) -> list:
        return [r for r in self.records if r["host"] == host]

    def digest(self) -> str:
        """What compiled code depends on: the records, in a stable form."""
        return hashlib.sha256(yaml.safe_dump(self.records, sort_keys=True).encode()).hexdigest()[:16]


def _apply(records: list, changes: dict) -> list:
    """`records` with `changes` ((kernel, host) -> record, or None to drop it) applied; a
    changed record goes last, as the newest."""
    kept = [r for r in records if (r["kernel"], r["host"]) not in changes]
    return kept + [r for r in changes.values() if r is not None]


def _problem(record) -> str | None:
    if not isinstance(record, dict):
        return "not a mapping"
    for key, kind in REQUIRED.items():
        if key not in record:
            return f"no '{key}'"
        if not isinstance(record[key], kind):
            return f"'{key}' has the wrong type"
    for step in record["steps"]:
        if not isinstance(step, list) or not step or not isinstance(step[0], str):
            return "a step is not a list like [split, k0.i, 32]"
    if record.get("schedule", "tuned") not in ("tuned", DEFAULT_KEPT):
        return "'schedule' is neither tuned nor default"
    if record.get("schedule") == DEFAULT_KEPT and record["steps"]:
        return "a record that kept the default schedule has steps"
    tried = record.get("tried", [])
    if not isinstance(tried, list) or not all(isinstance(t, str) for t in tried):
        return "'tried' is not a list of candidate names"
    return None
