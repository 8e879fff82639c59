import os
import sys
import tempfile

sys.path.insert(0, os.path.dirname(__file__))

# Tests compile into a cache of their own: hermetic, and they exercise the compiler, not a warm cache.
os.environ["KILN_CACHE_DIR"] = tempfile.mkdtemp(prefix="kiln-test-cache-")
# ... and read no tuning records but their own (the default database is the user's).
os.environ["KILN_TUNING_DB"] = os.path.join(tempfile.mkdtemp(prefix="kiln-test-tuning-"), "tuning.yaml")
