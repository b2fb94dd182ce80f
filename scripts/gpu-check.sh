#!/usr/bin/env bash
# The GPU check (docs/gpu.md), for a machine with an NVIDIA GPU, CUDA 13 and cuDNN 9:
#   1. configure Release without GUI and benchmarks, build the GPU targets with every core;
#   2. run the GPU tests;
#   3. for VGG-16 and ResNet-50 (batch 64, 224x224, float32): profile, plan with none, the best
#      uniform:K, dp, linear and optimal, run each plan for 5 steps, print predicted against
#      measured peaks and step times (remat_gpu_check);
#   4. where PyTorch and torchvision import, run the same models with PyTorch (store-all and
#      checkpoint_sequential for every K) and print the comparison (scripts/torch_baseline.py);
#   5. where that PyTorch has CUDA, the fidelity table's GPU rows (docs/executor.md): each plan applied
#      with remat_torch.apply_plan, PyTorch's measured activation peak against our E
#      (scripts/torch-fidelity.py --device cuda; FIDELITY_MODELS, default resnet18,mobilenet_v2,
#      batch 8, 128x128), written to $OUT/fidelity-gpu.md.
# Output goes to stdout and to $OUT/gpu-check.txt when OUT is set (else build/gpu-check/).
# Environment: MODELS (vgg16,resnet50), BATCH (64), RESOLUTION (224), STEPS (5), BUILD_DIR, and
# DNNL_ROOT: where the machine has no libdnnl-dev (the CPU backend's oneDNN), a folder with
# Debian's libdnnl-dev, libdnnl2 and ocl-icd-libopencl1 unpacked into it (docs/gpu.md).
set -uo pipefail
cd "$(dirname "$0")/.."
started=$(date +%s)
build="${BUILD_DIR:-build/gpu-check}"
results="${OUT:-$build}"
mkdir -p "$build" "$results"
log="$results/gpu-check.txt"
exec > >(tee "$log") 2>&1

models="${MODELS:-vgg16,resnet50}"
batch="${BATCH:-64}"
resolution="${RESOLUTION:-224}"
steps="${STEPS:-5}"
status=0
elapsed() { echo "[$(($(date +%s) - started)) s]"; }

echo "== remat GPU check: $(date -u +%Y-%m-%dT%H:%M:%SZ) on $(hostname)"
command -v nvidia-smi >/dev/null && nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader
generator=()
command -v ninja >/dev/null && generator=(-G Ninja)

echo "== configure $(elapsed)"
dnnl=()
if [ -n "${DNNL_ROOT:-}" ]; then
  DNNL_ROOT="$(cd "$DNNL_ROOT" && pwd)"
  dnnl=(-DREMAT_DNNL_ROOT="$DNNL_ROOT")
  export LD_LIBRARY_PATH="$DNNL_ROOT/usr/lib/x86_64-linux-gnu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
fi
configure() {
  cmake -S . -B "$build" "${generator[@]}" -DCMAKE_BUILD_TYPE=Release -DREMAT_BUILD_GUI=OFF \
    -DREMAT_BUILD_BENCHMARKS=OFF -DREMAT_WITH_CUDA=ON "${dnnl[@]}" "$@" >"$build/configure.log" 2>&1
}
if ! configure -DREMAT_BUILD_TESTS=ON; then
  if grep -q "GTest" "$build/configure.log" && configure -DREMAT_BUILD_TESTS=OFF; then
    echo "gpu-check: GoogleTest not found: building without the tests"
    status=1
  else
    cat "$build/configure.log"
    echo "gpu-check: configure failed"
    exit 1
  fi
fi
grep -E "Remat Explorer|CUDA" "$build/configure.log" | head -5

echo "== build $(elapsed)"
targets=(remat_gpu_check remat)  # the test loop below skips what is not under tests/
for t in gpu_gpu_host_test gpu_gpu_half_host_test gpu_gpu_transformer_host_test gpu_gpu_transformer_half_host_test gpu_gpu_blocks_host_test \
  gpu_gpu_swin_half_host_test gpu_gpu_fp16_host_test gpu_cuda_device_test gpu_cuda_half_kernels_test gpu_cuda_attention_half_test \
  gpu_cuda_linear_half_test gpu_cuda_half_run_test gpu_cuda_fp16_run_test gpu_cuda_transformer_test gpu_cuda_transformer_half_test \
  gpu_cuda_swin_half_test gpu_cuda_elementwise_blocks_test cli_profile_cli_test; do
  cmake --build "$build" --target help 2>/dev/null | grep -q "\b$t\b" && targets+=("$t")
done
if ! cmake --build "$build" -j "$(nproc)" --target "${targets[@]}" >"$build/build.log" 2>&1; then
  tail -50 "$build/build.log"
  echo "gpu-check: build failed"
  exit 1
fi

echo "== GPU tests $(elapsed)"
for t in "${targets[@]:1}"; do
  exe=$(find "$build/tests" -maxdepth 1 -name "$t" -type f | head -1)
  [ -n "$exe" ] || continue
  if ! timeout 240 "$exe" --gtest_brief=1; then
    echo "gpu-check: $t FAILED"
    status=1
  fi
done

echo "== remat: profile, plan, run ($models, batch $batch, ${resolution}x$resolution) $(elapsed)"
if ! timeout 240 "$build/app/gpu_check/remat_gpu_check" --models "$models" --batch "$batch" --resolution "$resolution" \
    --steps "$steps" --json "$results/ours.json" --chain-dir "$results"; then
  echo "gpu-check: remat_gpu_check failed"
  status=1
fi

python=python3
[ -x /opt/torch/.venv/bin/python ] && python=/opt/torch/.venv/bin/python
if "$python" -c "import torch, torchvision" 2>/dev/null; then
  echo "== PyTorch baseline ($python) $(elapsed)"
  ours=()
  [ -s "$results/ours.json" ] && ours=(--ours "$results/ours.json")
  if ! timeout 180 "$python" scripts/torch_baseline.py --models "$models" --batch "$batch" \
      --resolution "$resolution" "${ours[@]}" --json "$results/torch.json"; then
    echo "gpu-check: PyTorch comparison failed or missed a target"
    status=1
  fi
else
  echo "== PyTorch baseline skipped: '$python -c \"import torch, torchvision\"' fails"
fi
if "$python" -c "import torch, torchvision, sys; sys.exit(0 if torch.cuda.is_available() else 1)" 2>/dev/null; then
  echo "== PyTorch against the prediction, GPU rows $(elapsed)"
  if ! timeout 300 "$python" scripts/torch-fidelity.py --device cuda --chain zoo --markdown \
      --models "${FIDELITY_MODELS:-resnet18,mobilenet_v2}" --batch 8 --resolution 128 \
      --remat "$build/app/cli/remat" | tee "$results/fidelity-gpu.md"; then
    echo "gpu-check: a GPU fidelity row is further than 5% from E, or the script failed"
    status=1
  fi
else
  echo "== GPU fidelity rows skipped: '$python' has no PyTorch with CUDA"
fi
echo "== done $(elapsed), status $status; results in $results"
exit $status
