export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
R=gpu-results; mkdir -p $R/u6; B=build-gpu
python3 -m pip install --no-deps --no-build-isolation . -Cbuild-dir=$B -Cbuild.targets=all -Ccmake.define.TPGEMM_BUILD_TESTS=ON > $R/u6/pip.log 2>&1; echo "pip rc=$? ${SECONDS}s"
(cd $B && timeout 100 python3 -m torch.distributed.run --standalone --nproc-per-node 4 ../tests/python/dist_check.py > ../$R/u6/dist_check_W4.log 2>&1; echo "dist_check W4 rc=$?"); grep -E "FAIL|dist_check|ops:" $R/u6/dist_check_W4.log | head -8
cd $B && timeout $((230 - SECONDS)) ctest -R "W/Dist.EveryOpDtypeLayout|KernelFamilies|Dist.AllReduceKernels" > ../$R/u6/test_dist.log 2>&1; echo "dist rc=$? ${SECONDS}s"; cd ..
grep -E "Test +#" $R/u6/test_dist.log | grep -v Skipped; grep -E "Failure|rank [0-9]\]" $R/u6/test_dist.log | cut -c1-300 | head -6
tar czf $OUT/results.tgz -C $R u6
