#!/usr/bin/env bash
# One-call GPU check of pyskick on a GPU machine that has its own torch and no network, or a CPU
# rehearsal of the same script.
#
# On the GPU machine, from the repository root, the wheels its image lacks in .whl/
# (gymnasium, farama-notifications):
#   OUT=<results folder> bash <this folder>/run.sh
# CPU rehearsal (the CUDA build still compiles; CUDA execution steps are skipped):
#   GPU_DRY=1 PY=.venv/bin/python OUT=<folder> bash <this folder>/run.sh
#
# Steps in order of importance; each has its own time limit, is logged with its rc and seconds
# to $OUT/summary.txt as soon as it ends, and is skipped once the overall budget (BUDGET_S) is
# spent, so a call stopped at its limit still brings back everything finished before.
# STEPS=build,tests,... runs a subset (a rerun on a warm machine: its build is incremental).
# $OUT (8 files at most): summary.txt env.txt tests.log sanitizer.log bench.json perf.json
#                         profile.txt curves.png (build.log only when the build failed)
set -u -o pipefail
OUT=${OUT:?OUT must be set}
mkdir -p "$OUT"
DRY=${GPU_DRY:-0}
PY=${PY:-python3}
BUDGET_S=${BUDGET_S:-540}
STEPS=${STEPS:-env,wheels,build,throwprobe,cudatests,memcheck,trainbench,packval,convs,levers,bench,opcost,replay,layout,decode,cudnn,table1,compiled,evalscore,profile,nccl,racecheck,initcheck,step,compile,epoch,concurrent,autocuda,fullsuite}
HERE=$(cd "$(dirname "$0")" && pwd)
WORK=${WORK:-/tmp/pyskick-gpu-work}
mkdir -p "$WORK"
export PYTHONUNBUFFERED=1 PYTHONDONTWRITEBYTECODE=1 PYSKICK_CACHE_DIR="$WORK/cache"
export OUT DRY PY HERE WORK BUDGET_S PATH=/usr/local/cuda/bin:$PATH
[ "$DRY" = 1 ] && export CUDA_VISIBLE_DEVICES=
T0=$(date +%s); export T0
S=$OUT/summary.txt; export S
say() { echo "[$(( $(date +%s) - T0 ))s] $*" | tee -a "$S"; }
want() { [[ ",$STEPS," == *",$1,"* ]]; }
left() { echo $(( BUDGET_S - ($(date +%s) - T0) )); }
# step NAME LIMIT CMD...: runs CMD under min(LIMIT, budget left); logs rc and seconds.
step() {
  local name=$1 limit=$2 t rc
  shift 2
  want "$name" || return 0
  (( $(left) < 15 )) && { say "SKIP $name (budget spent)"; return 0; }
  (( limit > $(left) )) && limit=$(left)
  t=$(date +%s)
  # A child bash, so that CMD may be one of the exported functions below.
  timeout -k 10 "$limit" bash -c '"$@"' _ "$@"
  rc=$?
  say "$name rc=$rc $(( $(date +%s) - t ))s (limit ${limit}s)"
  return $rc
}

say "start dry=$DRY py=$PY steps=$STEPS"

# 1. What the machine has (nothing installed yet): the first thing to read if anything fails.
env_report() {
  {
    nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.sm,clocks.max.sm \
      --format=csv 2>&1
    uname -m; nproc; free -g | head -2; df -h /tmp | tail -1
    $PY -V; command -v "$PY" nvcc cmake ninja g++ compute-sanitizer
    nvcc --version 2>&1 | tail -2; cmake --version | head -1; g++ --version | head -1
    $PY - <<'EOF'
import importlib.metadata as md, os, sysconfig, torch
inc = sysconfig.get_paths()["include"]
print("Python.h", os.path.exists(os.path.join(inc, "Python.h")), inc)
print("torch", torch.__version__, "cuda", torch.version.cuda, "available",
      torch.cuda.is_available(), "cudnn", torch.backends.cudnn.version())
if torch.cuda.is_available():
    p = torch.cuda.get_device_properties(0)
    print("gpu", p.name, p.multi_processor_count, "SMs", round(p.total_memory / 2**30, 1), "GiB")
for name in ("scikit-build-core", "pybind11", "cmake", "ninja", "numpy", "h5py", "pluggy",
             "click", "pillow", "tqdm", "safetensors", "gymnasium", "hypothesis", "pytest",
             "pytest-benchmark", "pytest-timeout", "pytest-xdist", "tensorboard", "setuptools",
             "matplotlib", "stable-baselines3", "triton"):
    try:
        print(f"  {name} {md.version(name)}")
    except md.PackageNotFoundError:
        print(f"  {name} MISSING")
EOF
    nvcc_dir=$(dirname "$(dirname "$(command -v nvcc)")")
    ls -l "$nvcc_dir"/lib64/libcudart_static.a "$nvcc_dir"/targets/*/lib/libcudart_static.a 2>&1
  } >"$OUT/env.txt" 2>&1
}
export -f env_report
step env 60 env_report

# 2. The Python packages the image lacks (gymnasium is imported by pyskick.envs: training
#    needs it), brought as wheels in .whl/ (README.md).
if want wheels && [ "$DRY" != 1 ]; then
  if ls .whl/*.whl >/dev/null 2>&1; then
    step wheels 60 $PY -m pip install -q --no-index --no-deps --no-compile --no-cache-dir \
      --upgrade --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site${PYTHONPATH:+:$PYTHONPATH}
  fi
  $PY -c "import gymnasium" 2>/dev/null || say "WARNING: no gymnasium (carry .whl/): training fails"
fi

# 3. Build with CUDA for sm_90 against the image's torch (no network: no build isolation, no
#    dependency resolution). Incremental on a warm machine (build/<wheel tag> is kept).
# Fallback when the editable install fails (an old scikit-build-core, a read-only site-packages):
# CMake directly, the module loaded through PYSKICK_NATIVE_LIBRARY (as `make sanitize` does).
build() {
  : >"$WORK/build.env"
  if ! PYSKICK_WITH_CUDA=ON PYSKICK_CUDA_ARCHITECTURES=${ARCH:-90} \
      CMAKE_BUILD_PARALLEL_LEVEL=$(nproc) \
      $PY -m pip install -v --no-index --no-build-isolation --no-deps -e . >"$OUT/build.log" 2>&1
  then
    echo "=== pip -e failed: direct CMake build" >>"$OUT/build.log"
    cmake -S . -B build/gpu -G Ninja -DCMAKE_BUILD_TYPE=Release -DPYSKICK_WITH_CUDA=ON \
      -DPYSKICK_CUDA_ARCHITECTURES="${ARCH:-90}" -DPython_EXECUTABLE="$(command -v "$PY")" \
      -Dpybind11_DIR="$($PY -m pybind11 --cmakedir)" -DSKBUILD_PROJECT_NAME=pyskick \
      -DSKBUILD_PROJECT_VERSION=0.1.0 >>"$OUT/build.log" 2>&1 &&
    cmake --build build/gpu --parallel >>"$OUT/build.log" 2>&1 || return 1
    suffix=$($PY -c 'import sysconfig; print(sysconfig.get_config_var("EXT_SUFFIX"))')
    echo "export PYSKICK_NATIVE_LIBRARY=$PWD/build/gpu/_C$suffix" >"$WORK/build.env"
    echo "export PYTHONPATH=$PWD:$PWD/cli\${PYTHONPATH:+:\$PYTHONPATH}" >>"$WORK/build.env"
  fi
  . "$WORK/build.env"
  # Every plugin folder (the distributions test wants each one); mlflow's plugin imports MLflow
  # only when a run asks for its logger, so it installs without its dependencies.
  for p in plugins/pyskick-expert-clone plugins/pyskick-rnd-rewards plugins/pyskick-mlflow; do
    $PY -m pip install -q --no-index --no-build-isolation --no-deps -e "$p" >>"$OUT/build.log" 2>&1
  done
  $PY -m pyskick info --json >>"$OUT/env.txt" 2>&1
  $PY -c "from pyskick.ops import build_info as b; i = b(); print(i); assert i['cuda'], i" \
    >>"$OUT/build.log" 2>&1
}
export -f build
step build 240 build || { say "BUILD FAILED: see build.log"; tail -30 "$OUT/build.log"; exit 1; }
[ -s "$WORK/build.env" ] && . "$WORK/build.env"
grep -E "Building CUDA|Linking|\[[0-9]+/[0-9]+\]" "$OUT/build.log" | tail -12 >>"$S"
# A good build's log goes into tests.log, leaving its $OUT slot to curves.png.
{ echo "=== build.log"; cat "$OUT/build.log"; } >>"$OUT/tests.log" && rm -f "$OUT/build.log"

# Table 1's 6,000 scenes (~50 s on 16 cores) generated in the background while the probes and the
# CUDA tests run (neither is timed); table1 waits for them. The file is written atomically.
if want table1 && [ "$DRY" != 1 ] && [ ! -f "$WORK/scenes6000.h5" ]; then
  touch "$WORK/data.pending"
  ( $PY -m pyskick data make synthetic-scenes --num 6000 --out "$WORK/scenes6000.h5" \
      >"$WORK/data.log" 2>&1; rm -f "$WORK/data.pending" ) &
fi

# 3b. Native bindings raising ValueError: on the H100 image (2026-11-27) three xdist workers
#     died of a segmentation fault in such tests. throw_probe.py tries the bad call in fresh
#     processes (with gdb's backtrace of a crash), then the refusal tests run under xdist.
# The refusal tests in one process (faulthandler names the test of a crash), then under xdist;
# their whole output goes to tests.log.
throwprobe() {
  $PY "$HERE/throw_probe.py"
  local rc=$? prc n files=(tests/ops/test_op_api.py tests/ops/test_greedy_coverage.py
                             tests/ops/test_coverage_matrix.py)
  for n in "" "-n 4"; do  # one process, then xdist
    echo "=== throwprobe: the refusal tests ${n:-in one process}" >>"$OUT/tests.log"
    $PY -m pytest -p no:cacheprovider -v --tb=short -rfE $n -k "reject or refuse" \
      "${files[@]}" >>"$OUT/tests.log" 2>&1
    prc=$?
    echo "refusal tests ${n:-in one process}: rc=$prc $(grep -cE 'FAILED|crashed' "$OUT/tests.log") failed/crashed so far"
    rc=$(( rc | prc ))
  done
  return $rc
}
export -f throwprobe
[ "$DRY" != 1 ] && step throwprobe 90 bash -c 'throwprobe >>"$S" 2>&1'

# 4. The CUDA tests: every test marked cuda (the ops on both backends on the GPU, the
#    environment on CUDA, bench smoke tests). pytest exits 5 when it selects nothing (CPU).
cudatests() {
  echo "=== cudatests" >>"$OUT/tests.log"
  $PY -m pytest -p no:cacheprovider -q -rfE -m cuda tests >>"$OUT/tests.log" 2>&1
  local rc=$?
  tail -5 "$OUT/tests.log" >>"$S"
  [ "$DRY" = 1 ] && [ $rc = 5 ] && return 0
  return $rc
}
export -f cudatests
step cudatests 100 cudatests

# 5. compute-sanitizer memcheck over every kernel once (sanitize_ops.py: small odd shapes,
#    checked against the CPU twins). Real cudaMallocs, so out-of-bounds accesses are caught.
# sanitize TOOL: compute-sanitizer TOOL over sanitize_ops.py, appended to sanitizer.log (dry: the
# same cases on the CPU kernels, no sanitizer).
sanitize() {
  echo "=== $1" >>"$OUT/sanitizer.log"
  if [ "$DRY" = 1 ]; then
    $PY "$HERE/sanitize_ops.py" --device cpu >>"$OUT/sanitizer.log" 2>&1
  else
    PYTORCH_NO_CUDA_MEMORY_CACHING=1 compute-sanitizer --tool "$1" --error-exitcode 9 \
      --print-limit 20 $PY "$HERE/sanitize_ops.py" >>"$OUT/sanitizer.log" 2>&1
  fi
  local rc=$?
  tail -2 "$OUT/sanitizer.log" >>"$S"
  return $rc
}
export -f sanitize
step memcheck 90 sanitize memcheck

# 5b. The headline, with the project's own tool: training steps of a paper-sun360 run alone
#     (eager and replayed as a CUDA graph) against packs of 5 and 15 runs, fp32 and bf16; rows
#     and environment merged into perf.json as "bench_training".
# The eager rows first and alone, so that a failing capture still leaves them.
trainbench() {
  local args=(--preset paper-sun360 --device cuda --runs 1,5,15 --precision "${PRECISION:-fp32,bf16}"
              --data device --steps 10) modes=(eager graph) mode rc=0
  [ "$DRY" = 1 ] && args=(--preset cpu-demo --device cpu --runs 1,2 --steps 1) modes=(eager)
  rm -f "$WORK"/train-*.json
  for mode in "${modes[@]}"; do
    $PY -m pyskick bench --training "${args[@]}" --mode "$mode" --json \
      >"$WORK/train-$mode.json" 2>>"$OUT/tests.log" || { rc=1; rm -f "$WORK/train-$mode.json"; }
  done
  $PY - "$WORK" <<'EOF' || return 1
import json, pathlib, sys
parts = [json.loads(p.read_text()) for p in sorted(pathlib.Path(sys.argv[1]).glob("train-*.json"))]
if not parts:
    sys.exit(1)
rows = [row for part in parts for row in part["rows"]]
merged = {"environment": parts[0]["environment"], "rows": rows}
(pathlib.Path(sys.argv[1]) / "train.json").write_text(json.dumps(merged, indent=1))
EOF
  $PY "$HERE/merge.py" bench_training "$WORK/train.json" "$OUT/perf.json"
  return $rc
}
export -f trainbench
step trainbench 150 bash -c 'trainbench >>"$S"'



# perf.py (written against 3a4d071): its parts below.
export QUICK=; [ "$DRY" = 1 ] && QUICK="--quick --device cpu"
perf() { $PY "$HERE/perf.py" $QUICK --work "$WORK" --out "$OUT/perf.json" \
           --profile-out "$OUT/profile.txt" --parts "$@" >>"$OUT/tests.log" 2>&1; }
export -f perf

# A pack of 15's validation at once (the default on a GPU, never measured there) against its
# runs one by one (the default on the CPU, where packed only tied). Short: before levers.
step packval 60 perf packval

# A pack's convolutions grouped (a GPU's way) and run by run, with the levers that paid.
step convs 120 perf convs

# Every lever at once (perf.py's levers part: decoding once, cuDNN's autotuner, then compiled
# networks too, fp32 and bf16) against plain graph rows of the same call: how close a run
# alone and a pack of 15 come to the engine's targets. Before table1, which takes the fastest
# fp32 combination when it paid.
step levers 300 perf levers

# 7. Kernel benchmarks against their twins and the copy bound, CPU (16 cores) and CUDA.
BENCH=(--device all); [ "$DRY" = 1 ] && BENCH=(--device cpu --quick)
step bench 90 sh -c "$PY -m pyskick bench ${BENCH[*]} --json >'$OUT/bench.json' 2>>'$OUT/tests.log'"

# What one call of each op costs, host and device apart (perf.py's opcost part): the copy-bound
# targets were missed by the same ~0.1 ms at every size, a call's fixed cost on that host.
step opcost 60 perf opcost

# Where a replayed step's device time goes (perf.py's replay part: a run alone and a pack of 15
# in fp32, the pack in bf16, under torch.profiler; appended to profile.txt).
step replay 75 perf replay

# racecheck and initcheck on the shared-memory / output-writing kernels (slower tools); the NCCL
# probe (one rank).
if [ "$DRY" != 1 ]; then
  step racecheck 45 sanitize racecheck
  step initcheck 45 sanitize initcheck
  step nccl 30 perf nccl
fi

# The replayed steps with the convolutions channels-last against contiguous, and the replay
# profile of a channels-last pack of 15 (perf.py's layout part): cuDNN's layout transforms were
# 19 % of a pack's device time. Before table1, which takes channels-last when it paid.
step layout 180 perf layout
# A run alone's and a pack of 15's steps with the networks compiled (inductor, --compile)
# inside the graph (perf.py's compiled part): fewer, fused kernels, the lever the replay
# profile points to for a run alone. Before table1, which compiles them when it paid.
step compiled 240 perf compiled
# The replayed steps decoding an episode's glimpses once against once per glimpse (perf.py's
# decode part): a T-th of the decoder's kernels, on T times the samples. Before table1, which
# decodes once when it paid.
step decode 180 perf decode
# The replayed steps with cuDNN's algorithms picked by its heuristics and by its autotuner
# (perf.py's cudnn part). Before table1, which turns the autotuner on when it paid.
step cudnn 150 perf cudnn

# 5c. Table 1 at paper scale (issue "On the GPU", item 4): 6,000 synthetic scenes generated on
#     the machine, then `reproduce` with packs (PRETRAIN one-view, EPOCHS policy epochs, SEEDS
#     seeds) in table1-a: a first table, and the time of a pass. Then, when the budget allows
#     another pass, table1-b: a copy of table1-a's one-view run and evaluation, and either
#     (TABLE1_B=fresh, the default) the same policies on fresh seeds, pooled with the first pass
#     by `pyskick pool`, or (TABLE1_B=epochs) the policies trained afresh for as many epochs as
#     fit. The first pass's table.json/md and timings.jsonl go to perf.json's "table1" and its
#     curves to $OUT/curves.png; the fresh seeds' to "table1_fresh", the pool's to
#     "table1_pooled". If the packed first pass fails, it is redone with runs alone (--pack off).
table1() {
  local data=$WORK/scenes6000.h5 a=$WORK/table1-a b=$WORK/table1-b pack=on
  local epochs=${EPOCHS:-5} t took train more args m
  local methods='rnd-actions,ltla,ours(rew),ours(demo)'
  # 8 seeds: 3 resolved the sidekicks' gaps only about half the time (docs/reproduce.md).
  local seeds=${SEEDS:-8}; [ "$DRY" = 1 ] && seeds=${SEEDS:-3}
  if [ "$DRY" = 1 ]; then
    data=$WORK/scenes60.h5
    [ -f "$data" ] || $PY -m pyskick data make synthetic-scenes --num 60 --out "$data" \
      >>"$OUT/tests.log" 2>&1 || return 1
    args=(--preset cpu-demo --device cpu)
  else
    while [ -e "$WORK/data.pending" ]; do sleep 1; done  # the background generation
    cat "$WORK/data.log" >>"$OUT/tests.log" 2>/dev/null
    [ -f "$data" ] || $PY -m pyskick data make synthetic-scenes --num 6000 --out "$data" \
      >>"$OUT/tests.log" 2>&1 || return 1
    args=(--preset paper-sun360 --device cuda)
  fi
  rm -rf "$a" "$b"  # a rerun on a warm machine starts afresh
  echo "table1: data ready at $(( $(date +%s) - T0 ))s"
  # The levers part's fastest fp32 combination for a pack when it paid (>= 1.1x its plain
  # pack); else each lever that paid on its own (>= 1.1x): the step as a CUDA graph
  # (trainbench), channels-last convolutions (layout), compiled networks (compiled), decoding
  # once (decode), cuDNN's autotuner (cudnn).
  local graph=0 settings=() chosen
  if chosen=$($PY "$HERE/merge.py" levers_settings "$OUT/perf.json" 2>/dev/null); then
    mapfile -t settings <<<"$chosen"; graph=1
    echo "table1: the levers part's fastest pack (it paid): ${settings[*]}"
  else
    local check file setting what
    while IFS='|' read -r check file setting what; do
      if $PY "$HERE/merge.py" "$check" "$file" </dev/null 2>/dev/null; then
        settings+=("$setting"); graph=1; echo "table1: $what"
      fi
    done <<EOF
graph_pays|$WORK/train.json|cuda_graph = true|the step replayed as a CUDA graph (it paid in trainbench)
layout_pays|$OUT/perf.json|channels_last = true|channels-last convolutions (they paid in the layout part)
compile_pays|$OUT/perf.json|compile = true|compiled networks (they paid in the compiled part)
decode_pays|$OUT/perf.json|decode_once = true|glimpses decoded once (it paid in the decode part)
cudnn_pays|$OUT/perf.json|cudnn_benchmark = true|cuDNN's autotuner (it paid in the cudnn part)
EOF
  fi
  if (( ${#settings[@]} )); then
    printf '%s\n' "${settings[@]}" >"$WORK/graph.toml"; args+=(--config "$WORK/graph.toml")
  fi
  # pass FOLDER EPOCHS PACK [OFFSET KEY]: one reproduce call (seeds OFFSET..OFFSET+seeds-1);
  # merges its table into perf.json's KEY (default table1, with the curves) when it succeeded.
  pass() {
    $PY -m pyskick reproduce --dataset "$data" "${args[@]}" --pack "$3" --seeds "$seeds" \
      --seed-offset "${4:-0}" --methods "$methods" --epochs "$2" \
      --pretrain-epochs "${PRETRAIN:-10}" --no-report --out "$1" >>"$OUT/tests.log" 2>&1 || return 1
    if [ -z "${5:-}" ]; then
      $PY "$HERE/merge.py" table1 "$1" "$OUT/perf.json" "$OUT/curves.png"
    else
      $PY "$HERE/merge.py" "$5" "$1" "$OUT/perf.json"
    fi
  }
  t=$(date +%s)
  if ! pass "$a" "$epochs" on; then
    rm -rf "$a"; t=$(date +%s)
    if (( graph )); then  # the plain pack next: a failing capture must not cost the table
      echo "table1: the pack with its levers (graph.toml) failed (tests.log); again plain"
      args=("${args[@]:0:${#args[@]}-2}"); graph=0
      pass "$a" "$epochs" on
    else
      false
    fi || {
      echo "table1: packed pass failed (tests.log); again with runs alone"
      rm -rf "$a"; pack=off; t=$(date +%s)
      pass "$a" "$epochs" off || return 1
    }
  fi
  took=$(( $(date +%s) - t ))
  # Seconds of policy training in the first pass (its set-up included: an upper bound).
  train=$($PY -c 'import json, sys; print(max(1, round(sum(r["seconds"] for r in map(json.loads, open(sys.argv[1])) if r["stage"] == "train"))))' "$a/timings.jsonl")
  echo "table1: $epochs epochs (pack=$pack) in ${took}s, ${train}s of it policy training"
  # a copy of the first pass's one-view run and evaluation, without its policies and table.
  copy_one_view() {
    rm -rf "$1"; cp -a "$a" "$1"
    for m in ${methods//,/ }; do rm -rf "$1/$m" "$1/eval/$m-"*; done
    rm -f "$1/table.json" "$1/table.md"  # timings.jsonl goes on: the first pass, then this one
  }
  local left=$(( BUDGET_S - ($(date +%s) - T0) - ${RESERVE:-30} ))
  if [ "${TABLE1_B:-fresh}" = fresh ]; then
    # Fresh seeds N..2N-1 for the same epochs, then `pyskick pool` of both passes: a claim holds
    # only if it holds again on fresh seeds (docs/reproduce.md, "Comparing methods").
    (( left >= took )) || { echo "table1: no time for fresh seeds (${left}s left)"; return 0; }
    copy_one_view "$b"; t=$(date +%s)
    pass "$b" "$epochs" "$pack" "$seeds" table1_fresh \
      || { echo "table1: the fresh-seed pass failed"; return 1; }
    echo "table1: fresh seeds $seeds..$(( 2 * seeds - 1 )) in $(( $(date +%s) - t ))s"
    rm -rf "$WORK/table1-pool"
    $PY -m pyskick pool "$a" "$b" --out "$WORK/table1-pool" >>"$OUT/tests.log" 2>&1 \
      && $PY "$HERE/merge.py" table1_pooled "$WORK/table1-pool" "$OUT/perf.json" \
      || { echo "table1: pool failed (tests.log)"; return 1; }
    return
  fi
  # Else (TABLE1_B=epochs) the policies trained afresh for as many epochs as fit (their
  # schedules sized for that many, unlike an extension).
  more=$(( (left - (took - train)) * epochs / train ))
  (( more >= 2 * epochs )) || { echo "table1: no time for a longer pass ($more epochs)"; return 0; }
  copy_one_view "$b"; t=$(date +%s)
  pass "$b" "$more" "$pack" || { echo "table1: the $more-epoch pass failed"; return 1; }
  echo "table1: $more epochs (pack=$pack) in $(( $(date +%s) - t ))s"
}
export -f table1
step table1 ${TABLE1_S:-450} bash -c 'table1 >>"$S"'


# 8. Evaluation and sidekick-scoring throughput; 9. the bare model step (precisions, graph);
# 10. where the eager trainer's time goes.
step evalscore 120 perf eval,score
step step 120 perf step
step profile 60 perf profile
# How much of the GPU one eager run leaves free: 1, then 4 ltla runs at once (one epoch each).
concurrent() {
  local k i
  for k in 1 4; do
    for i in $(seq "$k"); do
      OMP_NUM_THREADS=2 $PY "$HERE/perf.py" $QUICK --work "$WORK" --out "$WORK/conc-$k-$i.json" --parts ltla1 \
        >>"$OUT/tests.log" 2>&1 &
    done
    wait
  done
  $PY - "$WORK" "$OUT/perf.json" <<'EOF'
import glob, json, sys
work, out = sys.argv[1:]
r = json.load(open(out))
r["concurrent"] = {f: json.load(open(f)).get("ltla1") for f in sorted(glob.glob(work + "/conc-*.json"))}
json.dump(r, open(out, "w"), indent=1, default=str)
EOF
}
export -f concurrent
step concurrent 90 concurrent
# The earlier headline: paper-sun360 epochs through the real Trainer (6,000 train, 1,000 val).
step epoch 150 perf epoch

if [ "$DRY" != 1 ]; then
  # 12. torch.compile of the policy (compile time and steady step): last, it can be slow.
  step compile 120 perf compile
fi

# 12b. The test modules whose device "auto" the kit keeps on the CPU (autocuda_tests.txt), with
#      "auto" meaning the GPU: the command-line flows (train, export, evaluate, visualize,
#      reproduce, the Gymnasium env) on CUDA, each failure written as it happens.
if [ "$DRY" != 1 ]; then
  step autocuda 360 env PYSKICK_AUTO_DEVICE=cuda INSTAFAIL="$WORK/instafail-auto.txt" \
    PYTHONPATH="$HERE${PYTHONPATH:+:$PYTHONPATH}" $PY -m pytest \
    -p no:cacheprovider -p instafail -p order -q -rfE -n 14 --dist loadscope \
    $(grep -v '^#' "$HERE/autocuda_tests.txt") \
    >>"$OUT/tests.log" 2>&1
  if [ -s "$WORK/instafail-auto.txt" ]; then
    grep '^=== FAILED' "$WORK/instafail-auto.txt" | sed 's/^/autocuda: /' | tee -a "$S"
    { echo "=== autocuda failures"; cat "$WORK/instafail-auto.txt"; } >>"$OUT/tests.log"
  fi
fi

# 13. Whatever budget is left: the whole suite with the GPU visible, in parallel, with device
#     "auto" meaning the GPU (PYSKICK_AUTO_DEVICE=cuda): the -m cuda tests (cudatests' and
#     more), autocuda's command-line flows on CUDA, and every other test, in one step. The mlflow
#     plugin's own tests are left out (MLflow is not in the image). Each test module runs in one
#     worker (its module fixtures made once), as `make test` does, the slowest first (order.py,
#     slowest_modules.txt): the docs' blocks took 236 s of the 2-core machine's 561-s suite,
#     their README.md alone 152 s (its blocks one after another), so started last they would
#     set the step's time.
if [ "$DRY" != 1 ]; then
  # Each failure is written as it happens (instafail.py): a run its limit stops still names them.
  export INSTAFAIL=$WORK/instafail.txt; rm -f "$INSTAFAIL"
  step fullsuite 600 env PYSKICK_AUTO_DEVICE=cuda \
    PYTHONPATH="$HERE${PYTHONPATH:+:$PYTHONPATH}" $PY -m pytest \
    -p no:cacheprovider -p instafail -p order -q -rfE -n 14 --dist loadscope --maxfail=30 \
    --durations=25 --ignore=plugins/pyskick-mlflow tests plugins >>"$OUT/tests.log" 2>&1
  tail -3 "$OUT/tests.log" >>"$S"
  if [ -s "$INSTAFAIL" ]; then
    grep '^=== FAILED' "$INSTAFAIL" | tee -a "$S"
    { echo "=== fullsuite failures"; cat "$INSTAFAIL"; } >>"$OUT/tests.log"
  fi
else
  # The rehearsal collects the suite as the GPU runs it: the plugins load, every module of
  # slowest_modules.txt is collected, and they come first, in the list's order.
  fullsuite_order() {
    PYSKICK_AUTO_DEVICE=cuda PYTHONPATH="$HERE${PYTHONPATH:+:$PYTHONPATH}" $PY -m pytest \
      -p no:cacheprovider -p instafail -p order -q --collect-only \
      --ignore=plugins/pyskick-mlflow tests plugins >"$WORK/collected.txt" 2>>"$OUT/tests.log" \
      || return 1
    $PY - "$WORK/collected.txt" <<'EOF2'
import sys
sys.path.insert(0, __import__("os").environ["HERE"])
from order import slowest_modules
ids = [line for line in open(sys.argv[1]).read().splitlines() if "::" in line]
seen = list(dict.fromkeys(i.split("::", 1)[0] for i in ids))
listed = slowest_modules()
assert seen[: len(listed)] == listed, (seen[: len(listed)], listed)
print(f"fullsuite: {len(ids)} tests collected, the {len(listed)} slowest modules first")
EOF2
  }
  export -f fullsuite_order
  step fullsuite 120 bash -c 'fullsuite_order >>"$S"'
fi

say "done"
$PY - "$OUT/perf.json" <<'EOF' 2>/dev/null | tee -a "$S"
import json, sys
r = json.load(open(sys.argv[1]))
for key in ("pretrain", "ltla_host_data", "ltla_device_data", "ltla_device_data_no_env_syncs",
            "rew", "demo", "asymm_ac"):
    part = r.get("epoch", {}).get(key)
    if part:
        e = part["epochs"][-1]
        print(f"{key:32s} setup {part['setup_s']:7.2f}s train {e['train_s']:7.3f}s "
              f"val {e['validate_s']:6.3f}s save {e['save_s']:6.3f}s")
for row in r.get("step", {}).get("rows", []):
    print(f"step B={row['B']:5d} {row['mode']:14s} {row.get('ms_per_step', row.get('error'))}"
          f" ms  {row.get('tflops', '')} TFLOP/s")
EOF
