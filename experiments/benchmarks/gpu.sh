#!/usr/bin/env bash
# The benchmarks' GPU figures: the DenseNet-121 training step against torchvision (float32
# and bfloat16 mixed precision), the K=8 ensemble step against 8 single-model steps, and the largest
# K that fits the card. Each benchmark runs under its own time limit and writes its JSON to
# $OUT (default runs/benchmarks/gpu) as soon as it is done, so a slow one loses only itself.
#
#     bash experiments/benchmarks/gpu.sh fp32    # each part within 10 minutes
#     bash experiments/benchmarks/gpu.sh bf16
#     bash experiments/benchmarks/gpu.sh rest    # 64 px fp32, bf16 via cuBLAS, bf16 largest K
#     bash experiments/benchmarks/gpu.sh paper   # the 48-member fault probed, then 48 by matmuls
#     bash experiments/benchmarks/gpu.sh sweep   # the logistic sweep (UCI Adult in ADULT_DIR)
set -uo pipefail
out=${OUT:-runs/benchmarks/gpu}
mkdir -p "$out"
export PYTHONUNBUFFERED=1
py=${PYTHON:-python3}
run() {  # run LIMIT_SECONDS NAME ARGS...
  local limit=$1 name=$2
  shift 2
  echo "== $name: $*"
  timeout "$limit" "$py" -m "$@" --out "$out/$name.json" 2>&1
  echo "== $name: exit $?"
}
if [ -n "${DRY_RUN:-}" ]; then  # print each benchmark's module and arguments, run nothing
  run() {
    local name=$2
    shift 2
    echo "$* --out $out/$name.json"
  }
else
  {
    nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv
    $py -c "import jax, flax, optax, torch, torchvision; print('jax', jax.__version__, 'flax', \
flax.__version__, 'optax', optax.__version__, 'torch', torch.__version__, 'torchvision', \
torchvision.__version__, jax.devices())"
    $py -m pip list 2>/dev/null | grep -i -E "^nvidia-(cudnn|cublas|cuda-runtime|cuda-nvcc)"
  } 2>&1 | tee "$out/versions.txt"
fi

part=${1:-all}
# Each part's time limits add up to at most 10 minutes, so that a part runs as one 10-minute job.
# On an H200 (docs/results/gpu_h200) the fp32 ensemble (two candidates) takes about 40 s; the fp32
# train step finishes 224 px within 140 s but not also 64 px; the bf16 DenseNet-121 step does not
# finish within 125 s.
if [ "$part" = fp32 ] || [ "$part" = all ]; then
  XLA_PYTHON_CLIENT_MEM_FRACTION=0.9 run 150 ensemble_f32 experiments.benchmarks.ensemble \
    --strategies vmap/xla,loop/xla --runs 20
  run 300 train_step_f32 experiments.benchmarks.train_step --device gpu --dtype float32 \
    --runs 20
fi
if [ "$part" = bf16 ] || [ "$part" = all ]; then
  run 300 train_step_bf16 experiments.benchmarks.train_step --device gpu --dtype bfloat16 \
    --size 224 --runs 20
  XLA_PYTHON_CLIENT_MEM_FRACTION=0.9 run 240 ensemble_bf16 experiments.benchmarks.ensemble \
    --dtype bfloat16 --strategies vmap/xla --runs 10 --max-members
fi
# What the fp32 and bf16 parts do not finish on an H200 within their limits (docs/results/gpu_h200),
# as one part: the 64 px fp32 step, the bf16 steps with cuBLAS for the matrix products (Triton GEMM
# autotuning of DenseNet-121's ~120 distinct matrix shapes is the suspected cause of the slow bf16
# compile), and the bf16 ensemble with the largest-K search.
if [ "$part" = rest ]; then
  run 120 train_step_f32_64px experiments.benchmarks.train_step --device gpu --dtype float32 \
    --size 64 --runs 20
  XLA_FLAGS="${XLA_FLAGS:-} --xla_gpu_enable_triton_gemm=false" run 240 train_step_bf16 \
    experiments.benchmarks.train_step --device gpu --dtype bfloat16 --runs 20
  XLA_PYTHON_CLIENT_MEM_FRACTION=0.9 run 200 ensemble_bf16 experiments.benchmarks.ensemble \
    --dtype bfloat16 --strategies vmap/xla --runs 10 --max-members
fi
# The paper's scale: K DenseNet-121 members at 224 px against PyTorch steps, as one part. Left to
# search, the benchmark starts at the K that XLA's memory analysis predicts: 35 on an H100, whose
# compile does not finish in 140 s, and 62 on an H200. On an H200 (docs/results/gpu_h200), 32
# members run; 48 and 62 fail with a CUDA illegal address, in XLA's autotuner and, with the
# autotuner off, in the compiled program; 41 does not finish compiling in about 240 s. The size of
# one array does not explain it: the largest-K runs of small DenseNets on the same card read
# larger arrays. So this part first runs the 48-member step's convolutions layer by layer, the
# two layers that the failed compiles name first leading, to find the layer that faults, and
# runs that layer again at 32 and 40 members, each in a new process (a CUDA fault leaves a
# process's device unusable). Then it tries 48 members (MEMBERS=...) with every convolution as a
# matrix product (no grouped convolutions), its GEMMs on cuBLAS (Triton's GEMM autotuning is the
# suspected cause of the slow bf16 compiles, above).
if [ "$part" = paper ]; then
  run 170 probe_member_convs tools.probe_member_convs --members 48 \
    --first denseblock2/denselayer6/conv1,denseblock4/denselayer6/conv1
  if [ -n "${DRY_RUN:-}" ]; then
    failed=conv0
  else
    failed=$("$py" -c "import json, sys; f = json.load(open(sys.argv[1]))['failed']; \
print(f['layer'] if f else '')" "$out/probe_member_convs.json" 2>/dev/null)
  fi
  if [ -n "$failed" ]; then
    for k in 32 40; do
      run 40 "probe_member_convs_k$k" tools.probe_member_convs --members "$k" \
        --only "$failed"
    done
  fi
  XLA_FLAGS="${XLA_FLAGS:-} --xla_gpu_enable_triton_gemm=false" \
    XLA_PYTHON_CLIENT_MEM_FRACTION=0.9 run 300 paper_scale_matmul \
    experiments.benchmarks.paper_scale --members "${MEMBERS:-48}" --conv-impl matmul \
    --skip-one-member --runs 5
fi
# The logistic beta sweep against scikit-learn fits on the machine's cores, both benchmarks: the
# fixed ridge, then the default path (every penalty of the grid, chosen on the validation folds),
# without the whole command (--no-command). The Adult files (adult.data, adult.test) are in
# ADULT_DIR; the compilation cache starts empty on a fresh machine.
if [ "$part" = sweep ]; then
  run 200 sweep_train experiments.benchmarks.sweep_train --data-dir "${ADULT_DIR:-runs/adult}" \
    --seeds 1
  run 330 sweep_train_default experiments.benchmarks.sweep_train \
    --data-dir "${ADULT_DIR:-runs/adult}" --seeds 1 --default --no-command
fi
