export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
R=gpu-results; rm -rf $R; mkdir -p $R; B=build-gpu
G=$(nvidia-smi -L | wc -l); WS="4 2"; [ $G -ge 4 ] || WS=2
WORLDS="$WS" DEADLINE=140 bash scripts/gpu_check.sh build > /dev/null 2>&1; cp $R/summary.txt $R/summary_0.txt; cat $R/summary_0.txt
WORLDS="$WS" DEADLINE=$((200 - SECONDS)) bash scripts/gpu_check.sh test_gpu > /dev/null 2>&1; cp $R/summary.txt $R/summary_g.txt; cat $R/summary_g.txt | grep -E "rc="; grep -E "tests passed|tests failed|\(Failed\)" $R/test_gpu.log | head -5
WORLDS="$WS" DEADLINE=$((400 - SECONDS)) bash scripts/gpu_check.sh test_dist > /dev/null 2>&1; cp $R/summary.txt $R/summary_1.txt; grep -E "rc=" $R/summary_1.txt; grep -E "tests passed|tests failed|\(Failed\)|Timeout" $R/test_dist.log | head -8; grep -E "Failure|rank [0-9]\]" $R/test_dist.log | cut -c1-300 | head -6
WORLDS="$WS" DEADLINE=$((520 - SECONDS)) bash scripts/gpu_check.sh python > /dev/null 2>&1; cp $R/summary.txt $R/summary_2.txt; cat $R/summary_2.txt | tail -8
tar czf $OUT/results.tgz -C $R .
