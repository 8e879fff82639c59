"""Code generators: the ``scheduled`` stage out as LLVM IR (host CPU) or CUDA C.

``llvm_emitter`` holds the per-function state and the table of op handlers;
``llvm_ops``, ``llvm_math`` and ``llvm_parallel`` fill that table; ``llvm_codegen`` is
the entry point; ``llvm_target`` optimizes for the host CPU and emits object code.
``cuda_codegen`` writes CUDA C, and ``nvcc`` turns it into a loadable library.
"""
