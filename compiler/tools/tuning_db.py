"""The tuning database: one YAML record per kernel and host.

    - kernel: 3f2a9c...        # structural hash of the extracted kernel
      host: 5be1...            # fingerprint of the CPU: name, features, cores
      function: matmul
      steps: [[unroll_jam, k0.i, 8], [cache_read, k0.j.u, a1], ...]
                               # loops named as kernel k0, buffers as its arguments a<k>
      default_ms: 0.55
      tuned_ms: 0.48
      seed: 0
      trials: 100
      kiln: 0.1.0
      kernel_ir: |              # the kernel alone, to re-measure it (--verify)
        module { ... }

`kiln-tuning.yaml` in the working directory by default; KILN_TUNING_DB or an
explicit path otherwise. The file is read with ``yaml.safe_load``; records
that are malformed are reported with a warning and ignored, never an error.
Writes go to a temporary file renamed into place.
"""

from __future__ import annotations

import hashlib
import os
import tempfile
import warnings

import yaml

from kiln.codegen import llvm_target

REQUIRED = {"kernel": str, "host": str, "steps": list, "default_ms": (int, float), "tuned_ms": (int, float)}


def default_path() -> str:
    return os.environ.get("KILN_TUNING_DB") or "kiln-tuning.yaml"


def host_fingerprint() -> str:
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    text = f"{llvm_target.host_fingerprint()}|cores={cores}"
    return hashlib.sha256(text.encode()).hexdigest()[:16]


class TuningDB:
    def __init__(self, path: str | None = None):
        self.path = path or default_path()
        self.records = []
        if os.path.exists(self.path):
            self._load()

    def _load(self) -> None:
        try:
            with open(self.path) as f:
                data = yaml.safe_load(f)
        except (OSError, yaml.YAMLError) as exc:
            warnings.warn(
                f"kiln: cannot read the tuning database {self.path} ({exc}); ignoring it", RuntimeWarning, stacklevel=3
            )
            return
        if data is None:
            return
        if not isinstance(data, list):
            warnings.warn(
                f"kiln: the tuning database {self.path} is not a list of records; ignoring it",
                RuntimeWarning,
                stacklevel=3,
            )
            return
        for index, record in enumerate(data):
            problem = _problem(record)
            if problem:
                warnings.warn(f"kiln: ignoring record #{index} of {self.path}: {problem}", RuntimeWarning, stacklevel=3)
            else:
                self.records.append(record)

    def lookup(self, kernel: str, host: str):
        for record in self.records:
            if record["kernel"] == kernel and record["host"] == host:
                return record
        return None

    def put(self, record: dict) -> None:
        self.records = [r for r in self.records if (r["kernel"], r["host"]) != (record["kernel"], record["host"])]
        self.records.append(record)

    def remove(self, kernel: str, host: str) -> None:
        self.records = [r for r in self.records if (r["kernel"], r["host"]) != (kernel, host)]

    def save(self) -> None:
        directory = os.path.dirname(os.path.abspath(self.path))
        fd, temporary = tempfile.mkstemp(dir=directory, prefix=".kiln-tuning-")
        with os.fdopen(fd, "w") as f:
            yaml.safe_dump(self.records, f, sort_keys=False, default_flow_style=None, width=120)
        os.replace(temporary, self.path)

    def for_host(self, host: str) -> list:
        return [r for r in self.records if r["host"] == host]

    def digest(self) -> str:
        """What compiled code depends on: the records, in a stable form."""
        return hashlib.sha256(yaml.safe_dump(self.records, sort_keys=True).encode()).hexdigest()[:16]


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
    return None
