import os
import sys
import tempfile

import pytest

sys.path.insert(0, os.path.dirname(__file__))

# Tests compile into a cache of their own: hermetic, and they exercise the compiler, not a warm cache.
os.environ["KILN_CACHE_DIR"] = tempfile.mkdtemp(prefix="kiln-test-cache-")
# ... and read no tuning records but their own (the default database is the user's).
os.environ["KILN_TUNING_DB"] = os.path.join(tempfile.mkdtemp(prefix="kiln-test-tuning-"), "tuning.yaml")


def pytest_collection_modifyitems(config, items):
    """Tests marked gpu (targets.NEEDS_GPU, or pytest.mark.gpu) skip, saying what is missing,
    where target='cuda' cannot run."""
    on_the_gpu = [item for item in items if item.get_closest_marker("gpu") is not None]
    if not on_the_gpu:
        return
    from targets import gpu_missing

    reason = gpu_missing()
    if reason is not None:
        for item in on_the_gpu:
            item.add_marker(pytest.mark.skip(reason=f"no GPU run here: {reason}"))
