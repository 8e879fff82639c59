"""``kiln build --target cuda``: a function compiled for the GPU as a shared library with a C header.

The library is kiln's CUDA C for the function plus an ``extern "C"`` entry per exported
function with the C name and typed parameters the header declares, built by nvcc
(``kiln.codegen.nvcc``; no GPU is needed to build). The source it was built from is
written beside it (``<name>.cu``). Every pointer an entry takes is a DEVICE pointer
(``cudaMalloc`` memory): the entry launches the kernels on the default stream and waits
for them before it returns. ``--target cuda-emulate`` builds the same source as C++ for
the CPU (``-DKILN_EMULATE``, the emulation kiln's tests run): its pointers are host
pointers, and ``kiln.load`` calls it as it calls a CPU library.
"""

from __future__ import annotations

import json
import os
import shutil

from tqdm import tqdm

from kiln.codegen import nvcc
from kiln.codegen.cuda_codegen import emit_cuda, entry_name
from kiln.codegen.cuda_prelude import CUDA_ERROR_BASE, STORED
from kiln.codegen.status import STATUS
from kiln.errors import KilnError
from kiln.runtime.cuda import CudaUnavailable
from kiln.tools.build import (
    build_entries,
    c_header,
    c_name,
    c_parameters,
    check_output_directory,
    lowered_for_library,
    signature_of,
)


def build_cuda_library(
    compiled,
    specs,
    out_dir: str,
    name: str | None = None,
    grad_argnums=None,
    progress=None,
    input_names=None,
    output_names=None,
) -> dict:
    """Write lib<name>.so, <name>.cu, <name>.h and README into `out_dir` for `compiled`, a
    function compiled with ``target="cuda"`` or ``"cuda-emulate"``; returns their paths
    (keys library, source, header, readme). The other arguments are ``build_library``'s.
    Raises ``KilnError`` for another target, or where nvcc (for cuda; g++ for the
    emulation) is missing, and ``RuntimeError`` with the compiler's messages if it fails."""
    if compiled.target_info.code != "cuda":
        raise KilnError(f"build_cuda_library builds target='cuda' or 'cuda-emulate', not {compiled.target!r}")
    emulate = compiled.target_info.emulate
    name = c_name(name or compiled.__name__)
    try:
        if not emulate:
            nvcc.check_compiler()
    except CudaUnavailable:
        raise KilnError(
            "kiln build --target cuda needs nvcc, the CUDA compiler, and it is not on PATH "
            "(no GPU is needed to build; --target cuda-emulate builds the same source for the CPU with g++)"
        ) from None
    entries = build_entries(compiled, name, grad_argnums)
    check_output_directory(out_dir)
    sources, shims, signatures = [], [], []
    bar = tqdm(
        total=len(entries) + 1,
        file=progress,
        disable=True if progress is None else None,
        leave=False,
        mininterval=0,
        unit="step",
    )
    with bar:
        for k, (entry, function) in enumerate(entries):
            bar.set_description_str(f"compiling {entry}")
            pipeline = lowered_for_library(function, specs).pipeline
            prefix = f"e{k}_" if k else ""  # kernels and constants of two functions in one file keep apart
            scheduled = pipeline.module("scheduled")
            sources.append(emit_cuda(scheduled, prefix, prelude=k == 0))
            symbol = entry_name(pipeline.module("tensor").body.ops[0].sym_name, prefix)
            if symbol == entry:
                raise KilnError(f"--name {entry} is the name of the kernels' own entry; choose another")
            outputs = output_names if entry == name else None  # the gradient's outputs are (value, gradients)
            signature = signature_of(entry, pipeline, symbol, input_names, outputs)
            signature["target"] = compiled.target  # kiln.load refuses device pointers it cannot give
            signatures.append(signature)
            stored = [STORED[a.type.element.name] for a in scheduled.body.ops[-1].arguments]
            shims.append(_shim(signature, stored))
            bar.update()
        source = "\n".join(sources + ["/* The library's entries, as its header declares them. */"] + shims)
        bar.set_description_str(f"{'g++' if emulate else 'nvcc'}: lib{name}.so")
        built = nvcc.build(source, emulate)  # cached on disk by the source's hash
        bar.update()
    os.makedirs(out_dir, exist_ok=True)  # only once nvcc has built it: a failed build leaves no folder
    paths = {
        "library": os.path.join(out_dir, f"lib{name}.so"),
        "source": os.path.join(out_dir, f"{name}.cu"),
        "header": os.path.join(out_dir, f"{name}.h"),
        "readme": os.path.join(out_dir, "README"),
    }
    shutil.copyfile(built, paths["library"])
    texts = {
        "source": source,
        "header": c_header(name, signatures, compiled, _about(emulate)),
        "readme": _readme(name, signatures, emulate),
    }
    for key, text in texts.items():
        with open(paths[key], "w") as f:
            f.write(text)
    return paths


def _shim(signature: dict, stored: list) -> str:
    """The entry the header declares (const inputs, C99 integer types), calling the kernels'
    own entry, whose parameters are the stored element types; then its description for
    ``kiln.load``."""
    arrays = signature["inputs"] + signature["outputs"]
    casts = ", ".join(f"({t} *){a['name']}" for a, t in zip(arrays, stored))
    meta = json.dumps(signature).replace("\\", "\\\\").replace('"', '\\"')
    return (
        f'extern "C" int32_t {signature["entry"]}({c_parameters(signature)}) {{\n'
        f"    return {signature['symbol']}({casts});\n}}\n"
        f'extern "C" const char {signature["entry"]}_kiln_signature[] = "{meta}";\n'
    )


def _about(emulate: bool) -> list:
    """The opening of the header's comment: whose memory the pointers are, and the statuses."""
    if emulate:
        memory = [
            "Built for the CPU from the CUDA C (the emulation of --target cuda-emulate):",
            "every pointer is a HOST pointer. Calls must not run at the same time",
            "(the kernels share static variables). A kernel whose threads did not all reach",
            f"one barrier returns {STATUS['barrier divergence']} (a fault in kiln's code generator).",
        ]
    else:
        memory = [
            "Every pointer is a DEVICE pointer: memory from cudaMalloc (or cudaMallocManaged)",
            "on the current device. A call launches the kernels on the default stream and waits",
            "for them (cudaDeviceSynchronize) before it returns. Calls must not run at the same",
            "time (the kernels share __device__ variables).",
        ]
    return memory + [
        "Arrays are row-major and contiguous; bool is one byte (0 or 1) per element.",
        f"Every function returns 0 on success, {STATUS['out of memory']} if its scratch memory could not be allocated,",
        f"{STATUS['negative integer power']} for an integer raised to a negative integer power,",
        f"or {CUDA_ERROR_BASE} + a cudaError_t for an error of the CUDA runtime.",
        "Outputs must not overlap inputs.",
    ]


def _readme(name: str, signatures: list, emulate: bool) -> str:
    if emulate:
        text = [
            f"lib{name}.so, {name}.h and {name}.cu, built by kiln for the CPU emulation of its CUDA backend.",
            "",
            f"{name}.cu was built with: g++ -DKILN_EMULATE -x c++ -O2 -ffp-contract=off -fPIC -pthread -shared",
            "Each function takes HOST pointers, to row-major contiguous arrays of the shapes and",
            "types in the header, and returns 0 on success.",
        ]
    else:
        text = [
            f"lib{name}.so, {name}.h and {name}.cu, built by kiln with nvcc.",
            "",
            f"Compile a program against it:  cc main.c -I. -L. -l{name} -lcudart -Wl,-rpath,'$ORIGIN' -o main",
            "",
            f"{name}.cu was built with: nvcc -O3 -shared -Xcompiler -fPIC -cudart shared",
            "The library needs the CUDA runtime (libcudart) and an NVIDIA GPU to run. Each",
            "function takes DEVICE pointers (cudaMalloc), one per input, then one per output,",
            "to row-major contiguous arrays of the shapes and types in the header; it runs the",
            "kernels, waits for them, and returns 0 on success or 1000 + a cudaError_t.",
        ]
    text += ["", "Functions:"]
    for signature in signatures:
        text.append(f"  int32_t {signature['entry']}({c_parameters(signature)});")
    return "\n".join(text) + "\n"
