"""The CPU tuner's search space: schedules for one extracted kernel as parameter sets
(rows and vectors of a register block, packing, loop order, vector width, unrolling,
threads), and the keys a parameter set is recorded and compared under.

``SearchSpace(module, vector_bits, use_threads).steps(config)`` spells a parameter set out
as schedule steps for ``kiln.passes.schedule.apply_schedule``; ``kiln.tools.tuner`` searches
it, ``kiln.tools.gpu_tuner`` builds its GPU space on the same keys.
"""

from __future__ import annotations

import hashlib

from kiln.dialects import affine as A
from kiln.dialects import memref as MR
from kiln.dialects.affine_expr import dims_of
from kiln.passes.default_schedule import root_chain, vector_candidates
from kiln.passes.loop_transforms import ScheduleError
from kiln.passes.schedule import Schedule, apply_schedule


class SearchSpace:
    """Schedules for one extracted kernel, as parameter sets; `steps(config)` spells one out."""

    def __init__(self, module, vector_bits: int, use_threads: bool):
        self.module = module
        self.function = module.body.ops[-1]
        self.lanes = max(2, vector_bits // 32)
        nest = next(op for op in self.function.body.ops if isinstance(op, A.ForOp))
        chain = root_chain(nest)
        inner = [op for op in chain[-1].body.ops if isinstance(op, A.ForOp)] if chain else []
        self.matmul_like = len(chain) >= 2 and len(inner) == 1 and bool(inner[0].inits)
        self.rows = A.loop_name(chain[-2]) if self.matmul_like else None
        self.cols = A.loop_name(chain[-1]) if chain else None
        self.outer = A.loop_name(nest)
        self.panel = _panel_name(chain[-1]) if self.matmul_like else None
        self.candidates = [A.loop_name(l) for l in vector_candidates(nest)]
        self.parallel_choices = [True, False] if use_threads else [False]
        if self.matmul_like:
            self.domains = {
                "rows": [1, 2, 4, 6, 8, 12],
                "vectors": [1, 2, 3, 4],
                "lanes": [self.lanes, self.lanes // 2],
                "pack": [True, False],
                "columns_outside": [True, False],
                "parallel": self.parallel_choices,
            }
        else:
            self.domains = {
                "vectorize": self.candidates + [None],
                "lanes": [self.lanes, self.lanes // 2, self.lanes * 2],
                "unroll": [1, 2, 4],
                "parallel": self.parallel_choices,
            }
        self._legal = {}

    def steps(self, config: dict) -> list:
        if self.matmul_like:
            i, j = self.rows, self.cols
            steps, rows_loop, outer = [], i, i
            if config["rows"] > 1:
                steps.append(["unroll_jam", i, config["rows"]])
                rows_loop = outer = f"{i}.u"
            if config["columns_outside"]:
                if config["rows"] > 1:
                    steps.append(["reorder", [j, rows_loop]])
                outer = j
            steps.append(["vectorize", j, config["lanes"]])
            if config["vectors"] > 1:
                steps.append(["unroll_jam", j, config["vectors"]])
                if config["columns_outside"]:
                    outer = f"{j}.u"
            if config["pack"] and self.panel and config["columns_outside"]:
                steps.append(["cache_read", outer, self.panel])
            if config["parallel"]:
                steps.append(["parallel", outer if config["rows"] > 1 or config["columns_outside"] else self.outer])
            return steps
        steps = []
        target = config["vectorize"]
        if target is not None:
            steps.append(["vectorize", target, config["lanes"]])
            if config["unroll"] > 1:
                steps.append(["unroll", target, config["unroll"]])
        if config["parallel"]:
            steps.append(["parallel", self.outer])
        return steps

    def legal(self, config: dict) -> bool:
        key = config_key(config)
        if key not in self._legal:
            trial = self.module.clone({})
            try:
                apply_schedule(trial, Schedule(self.steps(config)))
                self._legal[key] = True
            except ScheduleError:
                self._legal[key] = False
        return self._legal[key]

    def canonical(self, config: dict) -> dict:
        """`config` with the parameters that make no difference to its steps fixed, so that
        the search does not measure one schedule twice under two names (none, here)."""
        return config

    def random(self, rng: random.Random) -> dict:
        for _ in range(200):
            config = self.canonical({name: rng.choice(values) for name, values in self.domains.items()})
            if self.legal(config):
                return config
        return None

    def mutate(self, config: dict, rng: random.Random) -> dict:
        for _ in range(50):
            child = dict(config)
            name = rng.choice(list(self.domains))
            child[name] = rng.choice(self.domains[name])
            child = self.canonical(child)
            if child != config and self.legal(child):
                return child
        return self.random(rng)


def _panel_name(cols):
    """The 2-d buffer read along the column loop's contiguous dimension (B of a @ b)."""
    iv = cols.induction_variable
    for op in cols.walk():
        if (
            isinstance(op, A.LoadOp)
            and op.memref.type.rank == 2
            and iv in op.indices
            and op.indices.index(iv) in dims_of(op.map.results[-1])
        ):
            return MR.buffer_name(op.memref)
    return None


def config_key(config: dict):
    """A hashable form of a parameter set."""
    return tuple(sorted(config.items(), key=lambda kv: kv[0]))


def config_digest(config: dict) -> str:
    """A short, stable name of a parameter set: what a record's ``tried`` lists, so that a later
    run of the search skips the candidates an earlier one measured."""
    return hashlib.sha256(repr(config_key(config)).encode()).hexdigest()[:12]
