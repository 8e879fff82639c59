"""The collector pauses while a stage builds IR and is left as the caller had it."""

import gc
import threading

import pytest

from kiln.dialects.collection import collection_paused


def test_paused_inside_nested_stages_and_running_again_after_an_error():
    assert gc.isenabled()
    with pytest.raises(ValueError):
        with collection_paused():
            with collection_paused():
                assert not gc.isenabled()
            assert not gc.isenabled()  # the outer stage is still running
            raise ValueError
    assert gc.isenabled()


def test_a_collector_the_caller_turned_off_stays_off():
    gc.disable()
    try:
        with collection_paused():
            pass
        assert not gc.isenabled()
    finally:
        gc.enable()


def test_threads_resume_it_when_the_last_one_leaves():
    inside, leave = threading.Event(), threading.Event()

    def stage():
        with collection_paused():
            inside.set()
            leave.wait()

    worker = threading.Thread(target=stage)
    worker.start()
    inside.wait()
    with collection_paused():
        pass
    assert not gc.isenabled()  # the worker is still inside
    leave.set()
    worker.join()
    assert gc.isenabled()
