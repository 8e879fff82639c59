"""Every printed stage of the op table's functions, on cpu and cuda-emulate, to one file.

    python bench/dump_stages.py /tmp/before.txt       # on one commit
    python bench/dump_stages.py /tmp/after.txt        # on another
    diff /tmp/before.txt /tmp/after.txt

A change to the driver's plumbing (how the stages are run, not what they compute)
must leave this text alone: the same IR at every stage, the same LLVM IR kiln writes
and the same CUDA C. The ``llvm`` stage is dumped as kiln writes it, before LLVM's
optimizations (``Pipeline.llvm_ir``), which is what kiln decides; LLVM's O2 on it is
LLVM's. Tuning records are left out (``tuning_db=False``), so the text does not depend
on the machine's database; a case that cannot be compiled dumps its error.
"""

from __future__ import annotations

import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "tests"))

from op_table import CASES  # noqa: E402

import kiln  # noqa: E402

TARGETS = ("cpu", "cuda-emulate")


def dump(case, target: str) -> str:
    compiled = kiln.compile(case.fn, target=target, tuning_db=False)
    try:
        lowered = compiled.lower(*case.args)
        parts = []
        for stage in lowered.stages:
            if stage == "llvm":
                text = lowered.pipeline.llvm_ir()
            else:
                text = lowered.text(stage, locations=False)
            parts.append(f"// ----- {stage} -----\n{text}")
        return "\n".join(parts)
    except Exception as exc:  # a case this target cannot compile: its error is part of the behaviour
        return f"// error: {type(exc).__name__}: {exc}"


def main(path: str) -> None:
    with open(path, "w") as out:
        for case in CASES:
            for target in TARGETS:
                out.write(f"=== {case.name} {target}\n{dump(case, target)}\n")


if __name__ == "__main__":
    main(sys.argv[1])
