"""Tools around the compiler: tuning (``tuner``, ``tuning_db``), ``profiler``,
``bisect``, ``build`` (shared libraries), ``gradcheck`` and the ``cli``. They sit above
the driver and use it through its public objects. The driver uses two of them: the
pipeline reads the tuning database, and a compiled function's ``.profile()`` calls the
profiler. No stage below the driver imports from here.
"""
