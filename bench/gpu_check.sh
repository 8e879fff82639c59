#!/usr/bin/env bash
# One bounded check of the CUDA backend on a machine with an NVIDIA GPU, at most about
# eight minutes, run from anywhere in a checkout:
#
#     bash bench/gpu_check.sh
#
# In order, each part under its own `timeout` so that one that hangs cannot take the
# others' time:
#   1. the GPU (nvidia-smi: name, compute capability, driver) and nvcc's version;
#   2. Python and the packages kiln needs; kiln made importable from this checkout
#      (pip install --no-deps --no-build-isolation -e ., else a link tree on PYTHONPATH);
#   3. nvcc builds the probe kernels (bench/gpu_sanitize.py) for the GPU found
#      (KILN_CUDA_ARCH=sm_XY from its compute capability);
#   4. every test marked gpu (pytest -m gpu, spread over processes by bench/gpu_tests.py),
#      the op table against numpy among them;
#   5. the probe kernels on the GPU, then under compute-sanitizer memcheck, racecheck and
#      synccheck (where the tool is installed);
#   6. bench/cuda.py: kiln against numpy and PyTorch, with the device's measured limits.
#
# It always ends with a summary table (Markdown, for docs/cuda.md), written with the
# benchmark's table and every part's log to $OUT/gpu-check/ where OUT is set, else to
# bench/out/gpu-check/. Without a GPU it says so after the parts that need none (1-3)
# and exits 3; it exits 1 when a part failed or ran out of time, 0 when all passed.

set -u
cd "$(dirname "$0")/.." || exit 2
ROOT=$(pwd)
STARTED=$(date +%s)
DEST="${OUT:-$ROOT/bench/out}/gpu-check"
LOGS="$DEST/logs"
mkdir -p "$LOGS"
# kiln's compiled libraries: shared by the parts, kept out of $DEST (only reports go back).
CACHE=$(mktemp -d "${TMPDIR:-/tmp}/kiln-gpu-check-cache.XXXXXX")
export KILN_CACHE_DIR="$CACHE"
export PYTHONUNBUFFERED=1
# Seconds the whole check may take, and what each later part keeps back for itself.
TOTAL=470
ROWS=()
STATUS=0

elapsed() { echo $(($(date +%s) - STARTED)); }

# record PART RESULT SECONDS DETAIL: one row of the summary table ("|" escaped for Markdown).
record() {
    local detail=${4//|/\\|}
    ROWS+=("| $1 | $2 | $3 | ${detail//$'\n'/ } |")
    case "$2" in
        pass | found | skipped*) ;;
        *) STATUS=1 ;;
    esac
}

# execute PART SECONDS LOG COMMAND...: COMMAND under `timeout`, its output shown and kept in
# LOG; sets RESULT, SECONDS_TAKEN and DETAIL (the last SUMMARY: line of the output, else its
# last line but compute-sanitizer's) for the caller to record.
execute() {
    local part=$1 limit=$2 log="$LOGS/$3.log"
    shift 3
    local began rc
    began=$(date +%s)
    echo
    echo "== $part (at most ${limit} s)"
    timeout -k 10 "$limit" "$@" 2>&1 | tee "$log"
    rc=${PIPESTATUS[0]}
    SECONDS_TAKEN=$(($(date +%s) - began))
    DETAIL=$(grep -a '^SUMMARY: ' "$log" | tail -n 1 | sed 's/^SUMMARY: //')
    # (compute-sanitizer's own lines start with "========")
    [ -n "$DETAIL" ] || DETAIL=$(grep -av '^[[:space:]]*$\|^========' "$log" | tail -n 1 | cut -c1-300)
    if [ "$rc" -eq 124 ] || [ "$rc" -eq 137 ]; then
        RESULT="TIMEOUT"
        DETAIL="stopped after ${limit} s; $DETAIL"
    elif [ "$rc" -ne 0 ]; then
        RESULT="FAIL (exit $rc)"
    else
        RESULT="pass"
    fi
}

# run PART SECONDS LOG COMMAND...: execute, and record the part.
run() {
    execute "$@"
    record "$1" "$RESULT" "$SECONDS_TAKEN" "$DETAIL"
}

# what_is_left RESERVE WANTED: WANTED seconds, or fewer if only that many remain before
# TOTAL once RESERVE seconds are kept for the parts after this one (at least 20).
what_is_left() {
    local left=$((TOTAL - $(elapsed) - $1))
    [ "$left" -lt "$2" ] || left=$2
    [ "$left" -ge 20 ] || left=20
    echo "$left"
}

summary() {
    local table="$DEST/gpu-check.md"
    {
        echo "### GPU check, $(date -u '+%Y-%m-%d %H:%M UTC'), commit $(git rev-parse --short HEAD 2>/dev/null || echo unknown)"
        echo
        echo "| part | result | seconds | detail |"
        echo "| --- | --- | ---: | --- |"
        printf '%s\n' "${ROWS[@]}"
        echo
        echo "Total: $(elapsed) s. Logs: $LOGS/."
        if grep -q '^| workload' "$DEST/bench.md" 2>/dev/null; then
            echo
            echo "#### bench/cuda.py"
            echo
            cat "$DEST/bench.md"
        fi
    } >"$table"
    echo
    echo "================================================================"
    cat "$table"
    echo "(written to $table)"
    rm -rf "$CACHE"
}

# -- 1. the GPU and nvcc ----------------------------------------------------------------------
echo "== GPU and CUDA toolkit"
GPU="" ARCH=""
if command -v nvidia-smi >/dev/null 2>&1; then
    # One query (a driver that hangs costs its timeout once): name, compute capability, driver, memory.
    IFS=',' read -r NAME CAP DRIVER MEMORY < <(timeout 15 nvidia-smi \
        --query-gpu=name,compute_cap,driver_version,memory.total --format=csv,noheader 2>/dev/null | head -n 1)
    CAP=${CAP// /}
    if [[ "$CAP" =~ ^[0-9]+\.[0-9]+$ ]]; then
        ARCH="sm_${CAP/./}"
        GPU="$NAME, compute capability $CAP, driver ${DRIVER# }, ${MEMORY# }"
        echo "GPU: $GPU"
        timeout 10 nvidia-smi >"$LOGS/nvidia-smi.log" 2>&1
    else
        GPU="" # nvidia-smi ran but found no GPU (or no driver)
        timeout 10 nvidia-smi 2>&1 | head -n 5 | tee "$LOGS/nvidia-smi.log"
    fi
fi
NVCC=$(command -v nvcc || true)
[ -n "$NVCC" ] || { [ -x /usr/local/cuda/bin/nvcc ] && NVCC=/usr/local/cuda/bin/nvcc && export PATH="/usr/local/cuda/bin:$PATH"; }
NVCC_VERSION=$([ -n "$NVCC" ] && timeout 15 "$NVCC" --version 2>&1 | grep -a 'release' | sed 's/.*release /release /')
echo "nvcc: ${NVCC:-not found} ${NVCC_VERSION:-}"
if [ -n "$GPU" ]; then
    export KILN_CUDA_ARCH="$ARCH"
    record "GPU" "found" 0 "$GPU; nvcc ${NVCC_VERSION:-not found}; building for $ARCH"
else
    record "GPU" "NONE" 0 "no NVIDIA GPU here ($(command -v nvidia-smi >/dev/null && echo 'nvidia-smi finds none' || echo 'no nvidia-smi')); nvcc ${NVCC_VERSION:-not found}"
fi
[ -n "$NVCC" ] || record "nvcc" "MISSING" 0 "target='cuda' needs nvcc on PATH"

# -- 2. Python and kiln -----------------------------------------------------------------------
PY=$(command -v "${PYTHON:-python3}" || command -v python || true)
KILN_OK=0
if [ -z "$PY" ]; then
    record "Python" "MISSING" 0 "no python3 on PATH: the tests and benchmarks cannot run"
else
    echo
    echo "== Python packages"
    timeout 30 "$PY" - <<'EOF' 2>&1 | tee "$LOGS/python.log"
import importlib, sys
print(f"python {sys.version.split()[0]} at {sys.executable}")
for name in ("numpy", "llvmlite", "cffi", "networkx", "yaml", "tqdm", "filelock", "platformdirs", "safetensors",
             "pytest", "hypothesis", "torch"):
    try:
        module = importlib.import_module(name)
        extra = ""
        if name == "torch":
            extra = f", CUDA {module.version.cuda}, GPU available: {module.cuda.is_available()}"
        print(f"  {name:13s} {getattr(module, '__version__', '?')}{extra}")
    except Exception as exc:
        print(f"  {name:13s} missing ({type(exc).__name__}: {exc})")
EOF
    # kiln from THIS checkout, not one installed from elsewhere.
    kiln_here() {
        "$PY" -c "import os, sys, kiln; sys.exit(0 if os.path.realpath(kiln.__file__).startswith(os.path.realpath('compiler') + os.sep) else 3)" 2>/dev/null
    }
    began=$(date +%s)
    HOW=""
    if kiln_here; then
        HOW="already installed from this checkout"
    elif "$PY" -m pip --version >/dev/null 2>&1 &&
        timeout 60 "$PY" -m pip install -q --no-deps --no-build-isolation -e . >"$LOGS/pip.log" 2>&1 && kiln_here; then
        HOW="pip install --no-deps --no-build-isolation -e ."
    else
        # No pip, or a setuptools too old for pyproject.toml: the package layout as links.
        LINKS="$CACHE/links"
        mkdir -p "$LINKS/kiln"
        for entry in "$ROOT"/compiler/*; do ln -sfn "$entry" "$LINKS/kiln/$(basename "$entry")"; done
        for sub in dialects passes runtime; do ln -sfn "$ROOT/$sub" "$LINKS/kiln/$sub"; done
        export PYTHONPATH="$LINKS${PYTHONPATH:+:$PYTHONPATH}"
        kiln_here && HOW="a link tree on PYTHONPATH (pip install -e . failed: $LOGS/pip.log)"
    fi
    if [ -n "$HOW" ]; then
        KILN_OK=1
        record "kiln importable" "pass" "$(($(date +%s) - began))" "$HOW"
    else
        WHY=$("$PY" -c "import kiln" 2>&1 | tail -n 1)
        record "kiln importable" "FAIL" "$(($(date +%s) - began))" "import kiln: ${WHY:-fails}"
    fi
fi

# -- 3. nvcc builds the probe kernels for the GPU found ---------------------------------------
if [ "$KILN_OK" = 1 ] && [ -n "$NVCC" ]; then
    run "nvcc builds the probe kernels (${KILN_CUDA_ARCH:-nvcc default arch})" 60 probe-build \
        "$PY" bench/gpu_sanitize.py --build-only
else
    record "nvcc builds the probe kernels" "skipped" 0 "needs kiln importable and nvcc"
fi

if [ -z "$GPU" ] || [ "$KILN_OK" != 1 ] || [ -z "$NVCC" ]; then
    why="no NVIDIA GPU"
    [ -n "$GPU" ] && why="kiln or nvcc missing (above)"
    for part in "GPU tests (pytest -m gpu)" "probe kernels on the GPU" "compute-sanitizer" "bench/cuda.py"; do
        record "$part" "NOT RUN" 0 "$why"
    done
    echo
    echo "NO GPU CHECK RAN: $why. Printed what could be checked without one."
    summary
    exit 3
fi

# -- 4. the GPU tests -------------------------------------------------------------------------
# Kept back for the parts after the tests: the probe kernels (30 s and 3 x 35 s) and the bench (110 s).
if "$PY" -c "import pytest" 2>/dev/null; then
    limit=$(what_is_left 245 200)
    run "GPU tests (pytest -m gpu)" "$limit" gpu-tests \
        "$PY" bench/gpu_tests.py --timeout $((limit - 15)) --out "$LOGS"
else
    record "GPU tests (pytest -m gpu)" "NOT RUN" 0 "pytest is not installed"
fi

# -- 5. the probe kernels, plain and under compute-sanitizer ----------------------------------
run "probe kernels on the GPU" 30 probe-run "$PY" bench/gpu_sanitize.py
SANITIZER=$(command -v compute-sanitizer || true)
for candidate in /usr/local/cuda/bin/compute-sanitizer /usr/local/cuda/compute-sanitizer/compute-sanitizer; do
    [ -n "$SANITIZER" ] || { [ -x "$candidate" ] && SANITIZER=$candidate; }
done
if [ -z "$SANITIZER" ]; then
    record "compute-sanitizer" "skipped (not installed)" 0 "no compute-sanitizer on PATH or in /usr/local/cuda"
    echo "compute-sanitizer not found: memory, race and barrier checks skipped"
else
    for tool in memcheck racecheck synccheck; do
        if ! "$SANITIZER" --help 2>/dev/null | grep -q "$tool"; then
            record "compute-sanitizer $tool" "skipped (not in this version)" 0 "$("$SANITIZER" --version 2>&1 | tail -n 1)"
            continue
        fi
        execute "compute-sanitizer $tool" 35 "sanitizer-$tool" \
            "$SANITIZER" --tool "$tool" --error-exitcode 97 --target-processes all "$PY" bench/gpu_sanitize.py
        # The tool's own count first, then the program's (its results against numpy).
        errors=$(grep -a 'ERROR SUMMARY' "$LOGS/sanitizer-$tool.log" | tail -n 1 | sed 's/^=* *//')
        record "compute-sanitizer $tool" "$RESULT" "$SECONDS_TAKEN" "${errors:-no ERROR SUMMARY printed}; $DETAIL"
    done
fi

# -- 6. the benchmark -------------------------------------------------------------------------
echo
echo "== bench/cuda.py (the table goes to $DEST/bench.md)"
limit=$(what_is_left 0 110)
began=$(date +%s)
# The table (stdout) to bench.md, the progress (stderr) shown and kept in bench.log.
{
    timeout -k 10 "$limit" "$PY" bench/cuda.py --markdown --budget 2 2>&1 1>&3 | tee "$LOGS/bench.log" >&2
    rc=${PIPESTATUS[0]}
} 3>"$DEST/bench.md"
if [ "$rc" -eq 124 ] || [ "$rc" -eq 137 ]; then
    record "bench/cuda.py" "TIMEOUT" "$(($(date +%s) - began))" "stopped after $limit s; see $LOGS/bench.log"
elif [ "$rc" -ne 0 ]; then
    record "bench/cuda.py" "FAIL (exit $rc)" "$(($(date +%s) - began))" "$(tail -n 1 "$LOGS/bench.log" | cut -c1-300)"
else
    record "bench/cuda.py" "pass" "$(($(date +%s) - began))" "every result checked against numpy; table below"
fi

summary
exit "$STATUS"
