#!/usr/bin/env bash
# Builds the libFuzzer targets (fuzz/, docs/fuzzing.md) with clang, seeds them from the zoo
# exports, tests/data and fuzz/corpus, and runs each for SECONDS. Fails (exit 1) on any crash,
# leak, input slower than 10 s, input over 2 GiB or sanitizer report, printing the reproducer.
#   scripts/fuzz.sh [SECONDS_PER_TARGET] [TARGET...]   (default 40 s each: what .ci/run runs)
#   scripts/fuzz.sh 3600                                 the long run: an hour per target
#   REMAT_FUZZ_JOBS=N     fuzzing processes per target (default 1)
#   REMAT_FUZZ_TARGETS_AT_ONCE=N  targets fuzzed side by side (default 1: one after another)
#   REMAT_FUZZ_TIMEOUT=S   seconds one input may take before it counts as a hang (default 10; more
#                         when the run shares a loaded machine at a low priority)
#   REMAT_FUZZ_BUILD=DIR  build folder (default build/fuzz); its corpus/ grows from run to run
#   REMAT_CAMPAIGN_RUNS=N hostile ONNX models through this build's (sanitized) remat after the
#                         fuzzers when onnx_importer is among the targets (default 300; 0: none;
#                         scripts/hostile-campaign.py --families onnx, needs python3-onnx)
# TARGET is chain_reader, timeline_reader, snapshot_reader, plan_file, onnx_importer or cli_arguments
# (default: all six).
set -euo pipefail
cd "$(dirname "$0")/.."
seconds="${1:-40}"
shift || true
targets=("$@")
[ ${#targets[@]} -gt 0 ] || targets=(chain_reader timeline_reader snapshot_reader plan_file onnx_importer cli_arguments)
build="${REMAT_FUZZ_BUILD:-build/fuzz}"
mkdir -p "$build"
build="$(cd "$build" && pwd)"  # absolute: the CLI target works in a folder of its own
jobs="${REMAT_FUZZ_JOBS:-1}"
cxx="$(command -v clang++ || command -v clang++-14 || true)"
if [ -z "$cxx" ]; then
  echo "fuzz: clang++ not found: apt-get install clang libclang-rt-14-dev (scripts/setup-deps.sh does)" >&2
  exit 1
fi

echo "== fuzz: building in $build with $cxx"
cmake -S "$PWD" -B "$build" -G Ninja -DCMAKE_CXX_COMPILER="$cxx" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DREMAT_BUILD_FUZZERS=ON -DREMAT_BUILD_TESTS=OFF -DREMAT_BUILD_GUI=OFF -DREMAT_WITH_CUDA=OFF -DREMAT_WITH_ONNX=ON \
  -DREMAT_BUILD_BENCHMARKS=OFF ${CMAKE_CXX_COMPILER_LAUNCHER:+-DCMAKE_CXX_COMPILER_LAUNCHER=$CMAKE_CXX_COMPILER_LAUNCHER} \
  >"$build.configure.log" 2>&1 || { cat "$build.configure.log" >&2; exit 1; }
cmake --build "$build" -j "${REMAT_JOBS:-$(nproc)}" --target remat $(printf 'fuzz_%s ' "${targets[@]}")

# Seeds, made fresh each run from what the project writes and what its tests hold.
seeds="$build/seeds"
rm -rf "$seeds"
mkdir -p "$seeds"/{chain_reader,timeline_reader,snapshot_reader,plan_file,onnx_importer,cli_arguments}
remat="$build/app/cli/remat"
export ASAN_OPTIONS="detect_leaks=0"  # the seed-making runs of remat; the fuzzers check leaks
"$remat" zoo list | tail -n +2 | while read -r model _ _ resolution _; do
  # Batch 2, at least 32x32: batch norm needs more than one value per channel.
  "$remat" zoo export "$model" --batch 2 --resolution $((resolution < 32 ? 32 : resolution)) \
    --output "$seeds/chain_reader/zoo-$model.json"
done
python3 - "$seeds/chain_reader" <<'PY'
import json, sys
for example in json.load(open("tests/data/golden.json"))["examples"]:
    chain = example["chain"]
    open(f"{sys.argv[1]}/golden-{chain['name']}.json", "w").write(json.dumps(chain))
PY
golden="$seeds/chain_reader/golden-plain6.json"
small="$seeds/chain_reader/zoo-resnet18.json"
for ext in csv json; do
  "$remat" run "$golden" --planner optimal --device cpu --steps 2 --timeline "$seeds/timeline_reader/golden.$ext" >/dev/null
  "$remat" run "$small" --planner sqrt --device cpu --timeline "$seeds/timeline_reader/resnet18.$ext" >/dev/null
done
# Snapshots: our exports (JSON and pickle) and the committed Python pickles and CPU recording.
"$remat" run "$golden" --planner optimal --device cpu --timeline "$seeds/snapshot_reader/golden.snapshot.json" >/dev/null
"$remat" run "$golden" --planner sqrt --device cpu --timeline "$seeds/snapshot_reader/golden.pickle" >/dev/null
cp tests/data/snapshots/*.pickle tests/data/snapshots/shaped.json "$seeds/snapshot_reader/"
# Plan files: what `remat plan --json` writes (with checkpoint_names) for the golden chains.
for planner in sqrt dp optimal; do
  "$remat" plan "$golden" --planner "$planner" --json >"$seeds/plan_file/golden-$planner.json"
  "$remat" plan "$small" --planner "$planner" --json >"$seeds/plan_file/resnet18-$planner.json"
done
# torch exports (the activations' too: Sigmoid, Tanh, HardSigmoid, SiLU, HardSwish, GELU; LayerNorm's MLP), past finds
cp tests/data/onnx/*.onnx tests/data/onnx/activations/*.onnx tests/data/onnx/layernorm/*.onnx tests/data/onnx/transformer/*.onnx tests/data/onnx/opset18/*.onnx tests/data/regressions/onnx/* "$seeds/onnx_importer/"
rm -f "$seeds/onnx_importer/"swin_t_*.onnx  # swin_t's configuration (1.4 MB): the small Swins seed its path
for kind in chain timeline snapshot plan cli; do
  case "$kind" in cli) target=cli_arguments ;; plan) target=plan_file ;; *) target="${kind}_reader" ;; esac
  cp tests/data/regressions/"$kind"/* "$seeds/$target/" 2>/dev/null || true
  cp fuzz/corpus/"$target"/* "$seeds/$target/" 2>/dev/null || true
done
unset ASAN_OPTIONS

# Runs one target for $seconds and reports; returns 1 on any find. Each target works in a
# folder of its own: with -jobs the workers log to fuzz-N.log in the current folder.
fuzz_target() {
  local target="$1" status=0
  local corpus="$build/corpus/$target" artifacts="$build/artifacts/$target" work="$build/running/$target"
  mkdir -p "$corpus" "$artifacts" "$work"
  rm -f "$artifacts"/* "$work"/fuzz-*.log
  local dict="$PWD/fuzz/$target.dict" max_len=65536
  [ "$target" = cli_arguments ] && max_len=1024
  [ "$target" = onnx_importer ] && max_len=655360  # the committed exports are up to 84 KB, the small Swins 521 KB
  echo "== fuzz: $target for ${seconds} s ($(ls "$seeds/$target" | wc -l) seeds, $(ls "$corpus" | wc -l) in the corpus)"
  local log="$build/$target.log" parallel=()
  [ "$jobs" -gt 1 ] && parallel=(-jobs="$jobs" -workers="$jobs")
  if ! (cd "$work" && "$build/fuzz/fuzz_$target" -max_total_time="$seconds" -timeout="${REMAT_FUZZ_TIMEOUT:-10}" -rss_limit_mb=2048 -max_len="$max_len" \
      -dict="$dict" "${parallel[@]}" -print_final_stats=1 -artifact_prefix="$artifacts/" \
      "$corpus" "$seeds/$target" >"$log" 2>&1); then
    status=1
  fi
  for worker in "$work"/fuzz-*.log; do [ -e "$worker" ] && cat "$worker" >>"$log" && rm -f "$worker"; done
  grep -E "^stat::number_of_executed_units|^stat::peak_rss_mb|^#[0-9]+.*DONE" "$log" | sed "s/^/   $target: /" || true
  for crash in "$artifacts"/*; do
    [ -e "$crash" ] || continue
    status=1
    echo "fuzz: FAILED: $target: $(grep -m1 -E "ERROR|fuzz check failed|runtime error|deadly signal|timeout|out-of-memory" "$log" || echo "see $log")" >&2
    echo "  reproducer: $crash ($(stat -c %s "$crash") bytes); rerun: $build/fuzz/fuzz_$target $crash" >&2
    echo "  its bytes (base64, first 1 KiB): $(head -c 1024 "$crash" | base64 -w0)" >&2
    echo "  make it a regression test: tests/data/regressions/README.md" >&2
  done
  if [ $status -ne 0 ] && ! ls "$artifacts"/* >/dev/null 2>&1; then tail -n 40 "$log" >&2; fi
  return $status
}

# Targets run REMAT_FUZZ_TARGETS_AT_ONCE at a time (default 1): on N cores, N targets of one
# process each give every target the whole of SECONDS on a core of its own.
at_once="${REMAT_FUZZ_TARGETS_AT_ONCE:-1}"
status=0
pids=()
for target in "${targets[@]}"; do
  if [ "$at_once" -le 1 ]; then
    fuzz_target "$target" || status=1
    continue
  fi
  fuzz_target "$target" &
  pids+=($!)
  if [ ${#pids[@]} -ge "$at_once" ]; then
    for pid in "${pids[@]}"; do wait "$pid" || status=1; done
    pids=()
  fi
done
for pid in "${pids[@]}"; do wait "$pid" || status=1; done

# The campaign's structural ONNX families (issue 26) through the sanitized remat: a short run.
campaign_runs="${REMAT_CAMPAIGN_RUNS:-300}"
if [ "$campaign_runs" -gt 0 ] && [[ " ${targets[*]} " == *" onnx_importer "* ]]; then
  echo "== fuzz: hostile ONNX campaign, $campaign_runs models"
  if ! ASAN_OPTIONS="detect_leaks=0" /usr/bin/python3 scripts/hostile-campaign.py --families onnx \
      --runs "$campaign_runs" --jobs "${REMAT_JOBS:-$(nproc)}" --memory-gib 0 --remat "$remat" --out "$build/campaign-onnx" \
      >"$build/campaign-onnx.log" 2>&1; then
    status=1
    echo "fuzz: FAILED: the hostile ONNX campaign found something: $build/campaign-onnx/summary.json" >&2
    tail -n 30 "$build/campaign-onnx.log" >&2
  else
    grep -E '"runs"|"refused"|"ok"|findings' "$build/campaign-onnx.log" | sed "s/^/   campaign: /"
  fi
fi
[ $status -eq 0 ] && echo "== fuzz: no crash, leak, timeout or sanitizer report"
exit $status
