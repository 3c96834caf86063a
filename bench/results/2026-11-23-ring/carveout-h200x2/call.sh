# Run on nvidia-h200-x2 from the repository root at commit fb6ec2c (the device call's command).
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
rm -rf gpu-results; DEADLINE=200 WORLDS=2 scripts/gpu_check.sh build > $OUT/build_console.log 2>&1
for rep in a b; do for c in 2 0; do
  timeout 60 build-gpu/tpgemm-bench --gpus 2 --op gemm_rs,gemm_ar --impl pipelined --comm-sms $c --shapes bench/ring_sweep.txt --check --json $OUT/ring_c${c}_$rep.json > $OUT/ring_c${c}_$rep.log 2>&1
  timeout 60 build-gpu/tpgemm-bench --gpus 2 --op gemm_rs --impl pipelined --comm-sms $c --check --json $OUT/shared_c${c}_$rep.json > $OUT/shared_c${c}_$rep.log 2>&1
done; done
for f in $OUT/ring_c*_*.log $OUT/shared_c*_*.log; do echo "== $(basename $f)"; grep -E "^gemm_(rs|ar) .*pipelined_ce" $f | awk '{print $1,$3,$9,$10,$13}'; done
