"""The front end: Python and numpy code in, a ``tensor``-stage ``func.func`` out.

Read in this order: ``specs`` (argument descriptions such as ``kiln.f32[64, 784]``),
``pytree`` (nested arguments flattened to leaves), ``tracing`` (the ``Tracer`` value and
the per-thread trace state), ``traced_ops`` (one function per tensor op, with numpy's
shape and dtype rules), ``numpy_api`` (numpy's ufuncs and functions mapped onto them, one rule table
each), the modules that fill those tables (``numpy_ufuncs``, ``numpy_shapes``, ``numpy_joining``, ``numpy_linalg``,
``numpy_reductions``, ``numpy_sorting``, ``numpy_indexing``, ``numpy_indexing_routines``,
``numpy_compare``, ``numpy_math``, ``numpy_statistics``, ``numpy_editing``),
``trace`` (a Python function traced into IR), ``grad`` (reverse mode on the traced IR)
and ``nn`` (the helpers numpy lacks).
"""

# Importing these registers how a Tracer answers numpy's protocols (numpy_api) and which numpy
# functions each module implements (the rest).
from kiln.frontend import (  # noqa: F401
    numpy_api,
    numpy_compare,
    numpy_editing,
    numpy_indexing,
    numpy_indexing_routines,
    numpy_joining,
    numpy_linalg,
    numpy_math,
    numpy_reductions,
    numpy_shapes,
    numpy_sorting,
    numpy_statistics,
    numpy_ufuncs,
)
