export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
R=gpu-results; mkdir -p $R/u4; B=build-gpu
run() {  # name, env, impl order
  env $2 timeout 60 $B/tpgemm-bench --gpus 4 --op ag_gemm --m 16 --n 1360 --k 24 --impl $3 --timing graph --iterations 200 --json $R/u4/$1.json > $R/u4/$1.log 2>&1
  python3 -c "
import json; d=json.load(open('$R/u4/$1.json'))
print('$1', '$3', ' '.join('%s=%.2fus' % (r['impl'], r['ms']*1000) for r in d['rows']))"
}
run a "X=1" pipelined_ce,allgather_gemm,auto
run b "X=1" pipelined_ce,auto,allgather_gemm
run c "X=1" auto,allgather_gemm
run d "TPGEMM_TUNE=0" auto,allgather_gemm
run e "TPGEMM_TUNE=0" allgather_gemm,auto
run f "X=1" fused,allgather_gemm,auto
tar czf $OUT/results.tgz -C $R u4
