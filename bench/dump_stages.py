"""Every printed stage of every op-table case, one text file per target, for before/after diffs.

    python bench/dump_stages.py OUT_DIR [cpu,cuda-emulate]

Run it at two commits and diff the files: a change that should not be seen by users (a
refactoring of the passes, say) leaves every stage of every case as it was, down to the
LLVM IR and the CUDA C. A case that fails to compile prints its error in place of its stages.
"""

from __future__ import annotations

import os
import sys
import tempfile
import time
import warnings

HERE = os.path.dirname(os.path.abspath(__file__))
# Each run compiles from nothing: no disk cache, no tuned schedules.
os.environ["KILN_CACHE_DIR"] = tempfile.mkdtemp(prefix="kiln-stages-")
os.environ["KILN_TUNING_DB"] = os.path.join(os.environ["KILN_CACHE_DIR"], "tuning.yaml")
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "tests"))

import op_table  # noqa: E402

import kiln  # noqa: E402


def dump(out_dir: str, target: str) -> None:
    with open(os.path.join(out_dir, f"{target}.txt"), "w") as out:
        for k, case in enumerate(op_table.CASES):
            out.write(f"==== {k} {case.name} {target}\n")
            try:
                lowered = kiln.compile(case.fn, target=target).lower(*case.args)
                for stage in lowered.stages:
                    out.write(f"---- {stage}\n{lowered.text(stage)}\n")
            except Exception as exc:  # the error is the case's output, to compare like the rest
                out.write(f"!!!! {type(exc).__name__}: {exc}\n")


def main(argv) -> None:
    out_dir = argv[0]
    targets = argv[1].split(",") if len(argv) > 1 else ["cpu", "cuda-emulate"]
    os.makedirs(out_dir, exist_ok=True)
    warnings.simplefilter("ignore")
    for target in targets:
        start = time.perf_counter()
        dump(out_dir, target)
        print(f"{target}: {len(op_table.CASES)} cases in {time.perf_counter() - start:.0f} s")


if __name__ == "__main__":
    main(sys.argv[1:])
