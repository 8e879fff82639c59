"""Tools around the compiler: tuning (``tuner``, ``tuning_db``), ``profiler``,
``bisect``, ``debug`` mode, ``build`` (shared libraries), ``gradcheck`` and the
``cli``. They sit above the driver and use it; the driver uses only what a compiled
function offers directly: the pipeline reads the tuning database, and ``kiln.compile``
has ``debug=`` and ``.profile()``. No stage below the driver imports from here.
"""
