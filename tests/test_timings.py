"""Compile-stage timings: every stage that runs is timed once, logged with KILN_LOG, and a
signature found in the disk cache lists only the stages a warm start runs."""

import logging

import numpy as np

import kiln
from kiln import timings


def stages(entries):
    return [e.stage for e in entries]


def test_a_cold_compile_times_every_stage_and_a_warm_one_skips_to_loading(tmp_path, monkeypatch):
    monkeypatch.setenv("KILN_CACHE_DIR", str(tmp_path))
    x = np.ones(8, np.float32)
    with timings.collect() as cold:
        kiln.compile(lambda x: np.exp(x) + 1)(x)
    assert stages(cold)[:3] == ["trace", "cache key", "disk cache"]
    assert {"pass canonicalize", "pass fuse", "pass lower-tensor-to-affine", "schedule", "emit llvm ir"} <= set(
        stages(cold)
    )
    assert stages(cold)[-5:] == ["llvm parse", "llvm optimize", "object code", "cache store", "load"]
    assert cold[2].note == "miss" and all(e.seconds >= 0 and e.function == "<lambda>" for e in cold)
    with timings.collect() as warm:
        kiln.compile(lambda x: np.exp(x) + 1)(x)
    assert stages(warm) == ["trace", "cache key", "disk cache", "load"]
    assert warm[2].note == "hit"
    table = timings.table(warm)
    assert "disk cache (hit)" in table and table.splitlines()[-1].split()[:2] == ["<lambda>", "total"]


def test_kiln_log_prints_each_stage_to_stderr(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("KILN_CACHE_DIR", str(tmp_path))
    monkeypatch.setenv("KILN_LOG", "1")
    try:

        def double(x):
            return x * 2

        kiln.compile(double)(np.ones(3))
        err = capsys.readouterr().err
        assert "kiln: double: trace " in err and "kiln: double: llvm optimize " in err
        assert "kiln: double: disk cache " in err and "ms (miss)" in err
    finally:
        logging.getLogger("kiln").removeHandler(timings._handler)
        timings._handler = None


def test_cli_timings_prints_a_table_to_stderr(capsys):
    from kiln.tools import cli

    assert cli.main(["dump", "examples/mlp.py:predict", "--stage", "affine", "--timings"]) == 0
    out, err = capsys.readouterr()
    assert "func.func" in out and "seconds" not in out
    lines = err.splitlines()
    assert lines[0].split() == ["function", "stage", "seconds"]
    assert any(line.split()[1:3] == ["pass", "lower-tensor-to-affine"] for line in lines)
    assert lines[-1].split()[:2] == ["predict", "total"]
