"""The ``kiln`` command line.

    kiln dump examples/mlp.py:predict --stage tensor
    kiln dump examples/mlp.py:predict --target cuda --stage cuda
    kiln profile examples/train_step.py:train_step
    kiln bisect examples/layernorm.py:layernorm
    kiln build model.onnx --input-shape input=1,3,224,224 -o build/
    kiln build examples/mlp.py:predict --target cuda -o build/    # nvcc, no GPU needed
    kiln tune examples/mlp.py:predict --target cuda               # on the current GPU
    kiln opt tests/ir/fuse_dense.mlir -p 'canonicalize,fuse'      # IR in, passes run, IR out

Functions are named ``path.py:function``; their input specs come from
parameter annotations such as ``x: kiln.f32[256, 784]`` (a dict or tuple of
specs for a structured argument). An ONNX model, ``model.onnx``, is compiled
at its graph inputs' shapes (``kiln.tools.targets`` loads both). ``--target``
(dump, build, tune) compiles for another target than the function's own.
"""

from __future__ import annotations

import argparse
import inspect
import sys

from kiln import timings
from kiln.dialects.printer import ELIDE_CONSTANTS_OVER
from kiln.errors import KilnError, as_user_error, filtering_off
from kiln.jit import target_stages
from kiln.runtime import config
from kiln.target import TARGETS, TUNED, resolve_target
from kiln.tools.opt import add_opt
from kiln.tools.targets import load_function, load_target, random_arguments
from kiln.version import __version__

__all__ = ["main", "load_function", "load_target", "random_arguments"]

TARGET_HELP = "path.py:function (inputs given by parameter annotations) or model.onnx"


def _target(args, onnx_weights: str = "constants"):
    return load_target(
        args.function,
        input_shapes=args.input_shape,
        weights=args.weights,
        weights_param=args.weights_param,
        onnx_weights=onnx_weights,
        compile_target=getattr(args, "target", None),
    )


def cmd_dump(args) -> int:
    target = _target(args)
    compiled, specs = target.compiled, target.specs
    if args.stage != "all" and args.stage not in compiled.stages:  # before tracing: the stage list needs none
        elsewhere = [t for t in TARGETS if args.stage in target_stages(t)]
        hint = f"; {args.stage} is a stage of --target {' and '.join(elsewhere)}" if elsewhere else ""
        raise KilnError(
            f"--target {compiled.target} has no stage {args.stage!r} (its stages: {', '.join(compiled.stages)}, "
            f"or all){hint}"
        )
    lowered = compiled.lower(*specs)
    stages = lowered.stages if args.stage == "all" else [args.stage]
    for stage in stages:
        if args.stage == "all":
            print(f"// ----- stage: {stage} -----")
        elide = None if args.print_large_constants else args.elide_constants_over
        print(lowered.text(stage, locations=not args.no_locations, generic=args.generic, elide_constants=elide), end="")
    return 0


def cmd_tune(args) -> int:
    from kiln.tools.gpu_tuner import GpuTuning
    from kiln.tools.tuner import CpuTuning, tune_function, verify_records
    from kiln.tools.tuning_db import TuningDB

    if args.threads:
        config.update("KILN_NUM_THREADS", args.threads)  # for this process, not written to the environment
    db = TuningDB(args.db)
    target = _target(args) if args.function and not (args.report or args.verify) else None
    kind = resolve_target(target.compiled.target if target else args.target or "cpu")
    if kind.tuning is None:
        raise KilnError(f"kiln tune tunes --target {', '.join(TUNED)}, not {kind}")
    tuning = GpuTuning(kind) if kind.tuning == "gpu" else CpuTuning()
    if args.report:
        records = db.for_host(tuning.host())
        if not records:
            print(f"no records for {tuning.description} in {db.path}")
        print(f"{'function':<20}{'kernel':<18}{'default ms':>12}{'tuned ms':>12}{'speed-up':>10}{'trials':>8}")
        for r in records:
            print(
                f"{r.get('function', '?'):<20}{r['kernel']:<18}{r['default_ms']:>12.3f}{r['tuned_ms']:>12.3f}"
                f"{r['default_ms'] / r['tuned_ms']:>9.2f}x{r.get('trials', 0):>8}"
            )
        return 0
    if args.verify:
        stale = verify_records(db, tuning=tuning)
        print(f"{len(stale)} stale record(s)")
        return 1 if stale else 0
    if target is None:
        raise KilnError("kiln tune needs path.py:function or model.onnx (or --report / --verify)")
    compiled, specs = target.compiled, target.specs
    results = tune_function(compiled, specs, db, args.trials, args.seed, args.time_budget, args.strategy, tuning=tuning)
    tuned = sum(result.steps is not None for _, result in results)
    if results:
        print(
            f"{len(results)} kernel{'' if len(results) == 1 else 's'} searched: {tuned} with a faster schedule, "
            f"{len(results) - tuned} kept the default; recorded in {db.path}"
        )
    else:
        print(f"no kernel had a schedule to search; {db.path} is unchanged")
    return 0


def cmd_profile(args) -> int:
    # An ONNX model's weights are passed as an argument: the profiler compiles a copy of the
    # function with timers in it, which would otherwise carry every weight again.
    target = _target(args, onnx_weights="arguments")
    print(target.compiled.profile(*target.example_arguments(args.seed), seconds=args.seconds))
    return 0


def cmd_bisect(args) -> int:
    from kiln.tools.bisect import StepBar, bisect, duration, estimate, shrink_specs

    target = _target(args)
    compiled, specs = target.compiled, target.specs

    def say(line):
        print(line, file=sys.stderr, flush=True)

    if args.shrink:
        full = estimate(compiled.lower(*specs).pipeline)
        if full.seconds > args.budget:
            shrunk, cost = shrink_specs(compiled, specs, args.budget)
            if shrunk == list(specs) or shrunk == specs:
                say(
                    f"kiln bisect: at the annotated shapes it takes {full}; the shapes cannot be made smaller "
                    f"(the function refuses them), so it runs at full size"
                )
            else:
                say(
                    f"kiln bisect: at the annotated shapes it would take {duration(full.seconds)}; running on "
                    f"smaller inputs of the same ranks to fit --budget {args.budget:g} s (--no-shrink to keep them):"
                )
                for name, old, new in zip(inspect.signature(compiled.fn).parameters, specs, shrunk):
                    if old != new:
                        say(f"  {name}: {old} -> {new}")
                if cost.runs != full.runs:  # the default schedule depends on the shapes
                    say(
                        f"  the schedule differs at these shapes ({cost.runs - 1} steps instead of {full.runs - 1}); "
                        "a larger --budget keeps the shapes closer"
                    )
                specs = shrunk
    with StepBar(sys.stderr) as bar:
        report = bisect(compiled, *random_arguments(specs, args.seed), progress=bar.say)
    print(report)
    return 0 if report.first_bad is None else 1


def cmd_build(args) -> int:
    from kiln.tools.build import build_library

    target = _target(args)
    compiled, specs = target.compiled, target.specs
    if args.db:
        compiled.tuning_db = args.db
    grad = None if args.grad is None else parse_argnums(args.grad, target.compiled.fn)
    if compiled.target_info.code == "cuda":
        from kiln.tools.build_cuda import build_cuda_library as build_library
    elif compiled.target_info.code != "llvm":
        raise KilnError(f"kiln build makes native code: --target cpu, cuda or cuda-emulate, not {compiled.target}")
    paths = build_library(
        compiled,
        specs,
        args.output,
        args.name,
        grad,
        progress=sys.stderr,
        input_names=target.input_names,
        output_names=target.output_names,
    )
    for path in paths.values():
        print(path)
    return 0


def parse_argnums(text: str, fn):
    """``--grad``'s value: argument numbers or parameter names of `fn`, separated by commas
    (``1``, ``w``, ``0,w``), as ``kiln.grad``'s `argnums` (an int for one, a tuple for several).
    Anything else, a repeat included, raises KilnError naming it."""
    parameters = list(inspect.signature(fn).parameters)
    argnums = []
    for item in (part.strip() for part in text.split(",")):
        if item in parameters:
            argnum = parameters.index(item)
        elif item.lstrip("-").isdigit() and -len(parameters) <= int(item) < len(parameters):
            argnum = int(item) % len(parameters)
        else:
            raise KilnError(
                f"--grad {text}: {item or 'an empty item'} is neither a parameter of {fn.__name__} "
                f"({', '.join(parameters) or 'it has none'}) nor an argument number 0..{len(parameters) - 1}; "
                "give numbers or names separated by commas, e.g. --grad 1 or --grad "
                f"{parameters[-1] if parameters else 'w'}"
            )
        if argnum in argnums:
            raise KilnError(f"--grad {text}: {parameters[argnum]} (argument {argnum}) is named twice")
        argnums.append(argnum)
    return argnums[0] if len(argnums) == 1 else tuple(argnums)


def _element_count(text: str) -> int:
    if not text.isdigit():
        raise argparse.ArgumentTypeError(f"a number of elements (0 or more), not {text!r}")
    return int(text)


def add_target(parser, optional: bool = False) -> None:
    """The positional target and the options that set its input specs."""
    parser.add_argument("function", nargs="?" if optional else None, metavar="TARGET", help=TARGET_HELP)
    parser.add_argument(
        "--input-shape",
        action="append",
        default=None,
        metavar="NAME=D0,D1,...",
        help="the shape of an ONNX model's input whose dimensions are symbolic (repeat for several inputs)",
    )
    parser.add_argument(
        "--weights",
        default=None,
        metavar="FILE",
        help="a SafeTensors file whose tensors are compiled in as the function's dict parameter "
        "(which then is no longer an input)",
    )
    parser.add_argument(
        "--weights-param",
        default=None,
        metavar="NAME",
        help="the parameter --weights binds (default: the one annotated with a dict of specs)",
    )


def add_compile_target(parser, targets, what: str) -> None:
    parser.add_argument(
        "--target",
        choices=targets,
        default=None,
        help=f"{what} (default: the function's own target, cpu unless the file compiled it for another)",
    )


def add_timings(parser) -> None:
    parser.add_argument(
        "--timings",
        action="store_true",
        help="after the command, print the seconds each compile stage took to stderr (KILN_LOG=1 logs them as they end)",
    )


def main(argv=None) -> int:

    parser = argparse.ArgumentParser(
        prog="kiln",
        description="kiln: an ahead-of-time tensor compiler for numpy",
        epilog="environment variables:\n" + config.help_text(),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"kiln {__version__}")
    commands = parser.add_subparsers(dest="command", required=True)
    dump = commands.add_parser("dump", help="print the IR of a function at one stage or all stages")
    add_target(dump)
    add_compile_target(
        dump, TARGETS, "compile for this target; --target cuda --stage cuda prints CUDA C, with or without a GPU"
    )
    dump.add_argument(
        "--stage",
        default="tensor",
        help="a stage name, or 'all' (default: tensor); cpu: tensor, optimized, affine, scheduled, llvm; "
        "cuda and cuda-emulate: tensor, optimized, affine, scheduled, cuda; interpret: tensor",
    )
    dump.add_argument("--no-locations", action="store_true", help="leave out loc(...) source locations")
    dump.add_argument("--generic", action="store_true", help="print every op in MLIR's generic form")
    dump.add_argument(
        "--elide-constants-over",
        type=_element_count,
        default=ELIDE_CONSTANTS_OVER,
        metavar="N",
        help="print a constant of more than N elements as dense_resource<__elided__>, as mlir-opt's "
        f"--mlir-elide-elementsattrs-if-larger (default {ELIDE_CONSTANTS_OVER}); the text still parses",
    )
    dump.add_argument(
        "--print-large-constants", action="store_true", help="print every constant in full, however large"
    )
    add_timings(dump)
    dump.set_defaults(run=cmd_dump)
    tune = commands.add_parser("tune", help="search faster schedules for a function's kernels")
    add_target(tune, optional=True)
    add_compile_target(
        tune,
        ("cpu", "cuda", "cuda-emulate"),
        "tune for this target: cuda searches GPU schedules (split, reorder, tile, unroll, bind) on the current GPU, "
        "timed with CUDA events, its records keyed by the GPU; cuda-emulate runs that search on the CPU",
    )
    tune.add_argument("--trials", type=int, default=100, help="candidates per kernel (default 100)")
    tune.add_argument("--time-budget", type=float, default=None, help="seconds for the whole run")
    tune.add_argument(
        "--db",
        default=None,
        help="tuning database (default: $KILN_TUNING_DB, else tuning.yaml in the user's data directory, "
        "~/.local/share/kiln on Linux)",
    )
    tune.add_argument("--seed", type=int, default=0)
    tune.add_argument("--threads", type=int, default=None, help="threads for parallel loops (KILN_NUM_THREADS)")
    tune.add_argument("--strategy", choices=("evolution", "random"), default="evolution")
    tune.add_argument(
        "--report", action="store_true", help="print default vs tuned times of every record for this host (or GPU)"
    )
    tune.add_argument(
        "--verify", action="store_true", help="re-measure and re-check every record for this host (or GPU)"
    )
    tune.set_defaults(run=cmd_tune)
    prof = commands.add_parser("profile", help="time each kernel of a function on random inputs")
    add_target(prof)
    prof.add_argument("--seconds", type=float, default=2.0, help="time spent measuring (default 2)")
    prof.add_argument("--seed", type=int, default=0, help="seed of the random inputs")
    add_timings(prof)
    prof.set_defaults(run=cmd_profile)
    bis = commands.add_parser("bisect", help="find the first pass or schedule step that changes the numbers")
    add_target(bis)
    bis.add_argument("--seed", type=int, default=0, help="seed of the random inputs")
    bis.add_argument(
        "--shrink",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="when the annotated shapes would take longer than --budget, run on smaller ones of the "
        "same ranks (default: on)",
    )
    bis.add_argument(
        "--budget",
        type=float,
        default=60.0,
        help="seconds the bisection should take at most, for --shrink (default 60)",
    )
    bis.set_defaults(run=cmd_bisect)
    build = commands.add_parser("build", help="build a shared library and C header for a function")
    add_target(build)
    add_compile_target(
        build,
        ("cpu", "cuda", "cuda-emulate"),
        "cuda: build with nvcc (no GPU needed), its entries taking DEVICE pointers, the .cu source beside it; "
        "cuda-emulate: the same source built for the CPU",
    )
    build.add_argument(
        "-o", "--output", required=True, help="directory for lib<name>.so, <name>.h, README (and <name>.cu for cuda)"
    )
    build.add_argument(
        "--name", default=None, help="C name of the function (default: the Python name, or the ONNX file's)"
    )
    build.add_argument("--db", default=None, help="tuning database to take schedules from")
    build.add_argument(
        "--grad",
        default=None,
        metavar="ARGNUMS",
        help="also export <name>_grad: value and gradient for these arguments, by number or parameter name "
        "(e.g. 1, w or 1,2)",
    )
    add_timings(build)
    build.set_defaults(run=cmd_build)
    add_opt(commands)
    args = parser.parse_args(argv)
    try:
        with timings.collect() as stages:
            status = args.run(args)
    except Exception as exc:
        # A user's mistake (kiln's errors, and whatever the user's own code raised while kiln
        # traced it) is one error line, with the user's line quoted; kiln's own faults keep
        # their traceback, as does everything with KILN_TRACEBACK_FILTERING=off.
        error = as_user_error(exc)
        if error is None or (filtering_off() and not isinstance(exc, KilnError)):
            raise
        print(f"kiln: error: {error}", file=sys.stderr)
        return 1
    if getattr(args, "timings", False):
        print(timings.table(stages), file=sys.stderr)
    return status


if __name__ == "__main__":
    sys.exit(main())
