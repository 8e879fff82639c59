"""Tools around the compiler: tuning (``tuner``, ``tuning_db``), ``profiler``,
``bisect``, ``debug`` mode, ``build`` (shared libraries), ``gradcheck`` and the
``cli``. None of the compilation stages import from here, except the pipeline,
which reads the tuning database.
"""
