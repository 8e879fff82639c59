"""Reference executors, the oracles for the code generators: ``tensor_interpreter``
runs a ``tensor``-stage function with numpy, ``affine_interpreter`` runs the ``affine``
and ``scheduled`` stages one loop iteration at a time.
"""
