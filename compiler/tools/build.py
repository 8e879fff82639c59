"""``kiln build``: a compiled function as a shared library with a C header.

The library holds kiln's object code for the function (and, when asked, its
value-and-gradient) plus a few lines of C that give each one a typed, stable
name; model weights the function captured are constants inside it. The caller
passes one pointer per input and per output (row-major, shapes and dtypes
fixed at build time); scratch memory is allocated by the library on every
call, so two threads may call it at once. Nothing of Python is needed to call
it; the library links only the C library, libm and (for parallel loops)
libgomp.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import tempfile

import numpy as np
from tqdm import tqdm

from kiln.codegen.llvm_emitter import symbol_name
from kiln.codegen.status import STATUS, check_table
from kiln.dialects import memref as MR
from kiln.errors import KilnError
from kiln.frontend.grad import GradFunction
from kiln.jit import CompiledFunction
from kiln.runtime import threads
from kiln.transforms import value_and_grad
from kiln.version import __version__

C_TYPES = {
    "float16": "uint16_t",  # IEEE 754 binary16 bits: C has no portable half type
    "float32": "float",
    "float64": "double",
    "int8": "int8_t",
    "int16": "int16_t",
    "int32": "int32_t",
    "int64": "int64_t",
    "uint8": "uint8_t",
    "uint16": "uint16_t",
    "uint32": "uint32_t",
    "uint64": "uint64_t",
    "bool": "uint8_t",
}


def check_output_directory(out_dir: str) -> None:
    """KilnError if `out_dir` (``kiln build -o``) exists and is not a directory."""
    if os.path.exists(out_dir) and not os.path.isdir(out_dir):
        raise KilnError(f"-o {out_dir} is a file, not a directory to write the library into")


def build_library(
    compiled,
    specs,
    out_dir: str,
    name: str | None = None,
    grad_argnums=None,
    progress=None,
    input_names=None,
    output_names=None,
) -> dict:
    """Write lib<name>.so, <name>.h and README into `out_dir`; returns their paths. `progress`,
    a stream (``kiln build`` gives sys.stderr), shows a bar of the steps if it is a terminal.
    `input_names` and `output_names` name the arrays in the header (an ONNX graph's names;
    by default the parameters' names and out0, out1, ...); they are made C identifiers, and
    the header quotes a name that had to change."""
    name = c_name(name or compiled.__name__)
    if compiled.target_info.code == "cuda":
        raise KilnError(
            f"{compiled.__name__} is compiled for target={compiled.target!r}: build it with "
            "kiln.tools.build_cuda.build_cuda_library (kiln build --target cuda)"
        )
    entries = build_entries(compiled, name, grad_argnums)
    compiler = shutil.which(os.environ.get("CC", "cc")) or shutil.which("gcc")
    if compiler is None:
        raise KilnError("kiln build needs a C compiler to link the library (set CC, or install gcc)")
    check_output_directory(out_dir)
    os.makedirs(out_dir, exist_ok=True)
    bar = tqdm(
        total=len(entries) + 1,
        file=progress,
        disable=True if progress is None else None,
        leave=False,
        mininterval=0,  # a step compiles a whole function: draw every one
        unit="step",
    )
    with bar, tempfile.TemporaryDirectory() as work:
        objects, signatures, shims = [], [], []
        for entry, function in entries:
            bar.set_description_str(f"compiling {entry}")
            pipeline = lowered_for_library(function, specs).pipeline
            code = pipeline.object_code()
            path = os.path.join(work, f"{entry}.o")
            with open(path, "wb") as f:
                f.write(code.object)
            objects.append(path)
            objects += [
                _data_object(work, entry, k, symbol, data) for k, (symbol, data) in enumerate(code.symbols.items())
            ]
            symbol = symbol_name(pipeline.module("tensor").body.ops[0].sym_name)
            outputs = output_names if entry == name else None  # the gradient's outputs are (value, gradients)
            signature = signature_of(entry, pipeline, symbol, input_names, outputs)
            signatures.append(signature)
            shims.append(_shim(signature))
            bar.update()
        shim_path = os.path.join(work, "entry.c")
        with open(shim_path, "w") as f:
            f.write("#include <stdint.h>\n\n" + "\n".join(shims))
        library = os.path.join(out_dir, f"lib{name}.so")
        bar.set_description_str(f"linking lib{name}.so")
        command = [compiler, "-shared", "-fPIC", "-O2", "-o", library, shim_path, *objects, "-lm"]
        if threads.available():
            command.append("-lgomp")
        result = subprocess.run(command, capture_output=True, text=True)
        if result.returncode:
            raise KilnError(f"linking {library} failed:\n{result.stderr}")
        bar.update()
    header = os.path.join(out_dir, f"{name}.h")
    with open(header, "w") as f:
        f.write(c_header(name, signatures, compiled))
    readme = os.path.join(out_dir, "README")
    with open(readme, "w") as f:
        f.write(_readme(name, signatures))
    return {"library": library, "header": header, "readme": readme}


def _data_object(work: str, entry: str, k: int, symbol: str, data) -> str:
    """An assembly file defining `symbol` as `data`'s bytes (a constant pool: the weights the
    object code reads through the symbol), read-only and hidden in the library; the C compiler
    assembles it beside the objects. ``.incbin`` takes the bytes from a file, so the weights
    are never written out as text."""
    binary = os.path.join(work, f"{entry}.{k}.bin")
    with open(binary, "wb") as f:
        f.write(data)
    source = os.path.join(work, f"{entry}.{k}.s")
    with open(source, "w") as f:
        f.write(
            f'\t.section .rodata\n\t.balign {MR.ALIGNMENT}\n\t.hidden "{symbol}"\n\t.globl "{symbol}"\n'
            f'"{symbol}":\n\t.incbin "{binary}"\n\t.section .note.GNU-stack,"",@progbits\n'
        )
    return source


def c_name(name: str) -> str:
    """`name`, checked to be a C identifier (the library's function and file names)."""
    if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", name):
        raise KilnError(f"--name must be a C identifier, got {name!r}")
    return name


def build_entries(compiled, name: str, grad_argnums=None) -> list:
    """(C name, compiled function) of each function the library exports: `compiled`, and its
    value and gradient for `grad_argnums` (``<name>_grad``), compiled for the same target."""
    entries = [(name, compiled)]
    if grad_argnums is not None:
        target = compiled.fn.fn if isinstance(compiled.fn, GradFunction) else compiled.fn
        gradient = value_and_grad(target, grad_argnums)
        gradient.__name__ = f"{name}_grad"
        entries.append(
            (f"{name}_grad", CompiledFunction(gradient, target=compiled.target, tuning_db=compiled.tuning_db))
        )
    return entries


def lowered_for_library(function, specs):
    """`function` lowered for `specs`, refusing what a library cannot run: numpy's checks on
    the value of a Python int argument (``uint8_array + s`` must raise OverflowError for
    s = 300, NEP 50) run in Python before the native code, and a C caller has no Python to
    run them, so a library built without them would wrap 300 to 44 silently."""
    lowered = function.lower(*specs)
    checks = lowered.call_checks
    if checks:
        first = checks[0]
        where = f" at {first.loc.file}:{first.loc.line}" if first.loc is not None else ""
        raise KilnError(
            f"{function.__name__} takes a Python int whose value numpy checks when it is called "
            f"(it must fit {first.dtype}{where}); a library's C callers cannot run that check: "
            "build with an array spec for that argument instead (kiln.i64[], or the narrow dtype itself)"
        )
    return lowered


def signature_of(entry, pipeline, symbol, input_names=None, output_names=None) -> dict:
    """What the header and ``kiln.load`` know of an entry: its C name, the symbol it calls,
    each input's and output's C name, dtype and shape, and the index checks whose failure
    statuses ``kiln.load`` turns into their errors."""
    function = pipeline.module("tensor").body.ops[0]
    arguments, results = function.arguments, function.function_type.results
    for kind, given, count in (("input", input_names, len(arguments)), ("output", output_names, len(results))):
        if given is not None and len(given) != count:
            raise KilnError(f"{entry} has {count} {kind}s, but {len(given)} {kind} names were given")
    sources = list(input_names or [a.name_hint or f"in{k}" for k, a in enumerate(arguments)])
    sources += list(output_names or [f"out{k}" for k in range(len(results))])
    names = c_identifiers(sources)
    arrays = [
        {"name": n, "dtype": str(t.dtype), "shape": list(t.shape), **({"source": s} if s != n else {})}
        for n, s, t in zip(names, sources, [a.type for a in arguments] + list(results))
    ]
    return {
        "entry": entry,
        "symbol": symbol,
        "inputs": arrays[: len(arguments)],
        "outputs": arrays[len(arguments) :],
        "checks": check_table(pipeline.module("scheduled").body.ops[-1]),
    }


# C's keywords (C23's included), which a parameter may not be named.
C_KEYWORDS = frozenset(
    "alignas alignof auto bool break case char const constexpr continue default do double else enum extern false "
    "float for goto if inline int long nullptr register restrict return short signed sizeof static static_assert "
    "struct switch thread_local true typedef typeof typeof_unqual union unsigned void volatile while".split()
)


def c_identifiers(names) -> list:
    """`names` (an ONNX graph's "input.1", "495", ...) as distinct C identifiers: other
    characters become '_', a leading digit gets a ``v`` before it, a C keyword gets a '_'
    after it. Names that differ only in case count as equal, because
    the header's macros are upper case (``MLP_X_SIZE``).

    >>> c_identifiers(["input.1", "495", "int", "X", "x"])
    ['input_1', 'v495', 'int_', 'X', 'x_2']
    """
    taken, result = set(), []
    for name in names:
        base = re.sub(r"[^A-Za-z0-9_]", "_", name) or "v"
        if base[0].isdigit():
            base = "v" + base
        if base in C_KEYWORDS:
            base += "_"
        candidate, k = base, 1
        while candidate.upper() in taken:
            k += 1
            candidate = f"{base}{k}" if base.endswith("_") else f"{base}_{k}"
        taken.add(candidate.upper())
        result.append(candidate)
    return result


def c_parameters(signature) -> str:
    parts = [f"const {C_TYPES[a['dtype']]} *{a['name']}" for a in signature["inputs"]]
    parts += [f"{C_TYPES[a['dtype']]} *{a['name']}" for a in signature["outputs"]]
    return ", ".join(parts) or "void"


def _shim(signature) -> str:
    names = [a["name"] for a in signature["inputs"] + signature["outputs"]]
    kernel_params = ", ".join("void *" for _ in names) or "void"
    casts = ", ".join(f"(void *){n}" for n in names)
    meta = json.dumps(signature).replace("\\", "\\\\").replace('"', '\\"')
    return (
        f"int32_t {signature['symbol']}({kernel_params});\n"
        f"int32_t {signature['entry']}({c_parameters(signature)}) {{\n"
        f"    return {signature['symbol']}({casts});\n}}\n"
        f'const char {signature["entry"]}_kiln_signature[] = "{meta}";\n'
    )


def c_header(name, signatures, compiled, about=None) -> str:
    """The C header: `about`, lines of the opening comment after its first (by default the
    CPU library's: arrays, statuses, threads), then the arrays' macros and the prototypes."""
    guard = f"KILN_{name.upper()}_H"
    about = about or [
        "Arrays are row-major and contiguous; bool is one byte (0 or 1) per element.",
        f"Every function returns 0 on success, {STATUS['out of memory']} if its scratch memory could not be allocated,",
        f"{STATUS['negative integer power']} for an integer raised to a negative integer power,",
        "and a negative status for an index array holding a value outside its axis.",
        "Scratch memory is allocated by the library on each call: calls may run",
        "at the same time from several threads. Outputs must not overlap inputs.",
    ]
    lines = [f"/* {name}: built by kiln {__version__} from {compiled.fn.__qualname__}.", " *"]
    lines += [f" * {line}".rstrip() for line in about]
    lines[-1] += " */"
    lines += [
        f"#ifndef {guard}",
        f"#define {guard}",
        "",
        "#include <stdint.h>",
        "",
        "#ifdef __cplusplus",
        'extern "C" {',
        "#endif",
        "",
    ]
    for signature in signatures:
        prefix = signature["entry"].upper()
        for kind, arrays in (("input", signature["inputs"]), ("output", signature["outputs"])):
            for a in arrays:
                dims = "".join(f"[{d}]" for d in a["shape"]) or " (a scalar)"
                source = f" ({json.dumps(a['source'])})".replace("*/", "*\\/") if "source" in a else ""
                lines.append(f"/* {kind} {a['name']}{source}: {a['dtype']}{dims} */")
                macro = f"{prefix}_{a['name'].upper()}"
                lines.append(f"#define {macro}_RANK {len(a['shape'])}")
                for k, d in enumerate(a["shape"]):
                    lines.append(f"#define {macro}_DIM{k} {d}")
                lines.append(f"#define {macro}_SIZE {int(np.prod(a['shape'], dtype=np.int64))}")
        lines += [f"int32_t {signature['entry']}({c_parameters(signature)});", ""]
    lines += ["#ifdef __cplusplus", "}", "#endif", "", f"#endif /* {guard} */", ""]
    return "\n".join(lines)


def _readme(name, signatures) -> str:
    text = [
        f"lib{name}.so and {name}.h, built by kiln.",
        "",
        f"Compile a program against it:  cc main.c -I. -L. -l{name} -Wl,-rpath,'$ORIGIN' -o main",
        "",
        "The library needs only the C library, libm and libgomp (the OpenMP runtime, for",
        "parallel loops); no Python. Each function takes one pointer per input, then one per",
        "output, to row-major contiguous arrays of the shapes and types in the header, and",
        "returns 0 on success. It allocates its scratch memory itself on every call, so",
        "several threads may call it at once.",
        "",
        "Functions:",
    ]
    for signature in signatures:
        text.append(f"  int32_t {signature['entry']}({c_parameters(signature)});")
    return "\n".join(text) + "\n"
