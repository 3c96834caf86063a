// The measured all-reduce's table and the routing of a call by it. Pure host logic.
//
// NOTE [measured all-reduce]
// An all-reduce plan with impl = auto, on a team whose ranks are all NVLink peers and with tuning
// on (TPGEMM_TUNE != 0), times its algorithms on the team's own GPUs when it is made: at every
// power of two from 4 KiB up to its message rounded up to a power of two (at most
// kLargestTimedBytes) that the team has not timed yet, NCCL, one-shot and two-shot, each made as a
// plan of exactly that size would make it, on random data, from CUDA graphs replayed from the start
// line (ops/timed_calls.h), each algorithm's slowest rank's median kept. The team keeps the table,
// so later plans time only sizes above it; it is by bytes, whatever the 16-bit dtype. Every rank
// has the same table (the times are the slowest rank's, the rules below deterministic), so every
// rank routes a call alike.
//   Winner of a size: the fastest, where NCCL keeps a tie within 2% and one-shot one with two-shot
//   within 1% (the GEMM tuner's tie rules: the tuner's own noise does not move a size off NCCL).
//   Pruning: one-shot or two-shot is not timed at a size where it was slower than NCCL (or not
//   timed) at both of the two sizes below: the symmetric algorithms win at small messages and lose
//   to NCCL's ring past a crossover, so timing them further only costs, and their staging (one-shot
//   2 W x the message, two-shot about 4 x) grows with the size.
//   Routing: a call of b bytes runs the winner of the smallest timed size >= b; past the table
//   (beyond kLargestTimedBytes), NCCL, whose ring reaches the link's rate there (two-shot measured
//   0.97x of it at 1 GB at W=2, 0.88x from 64 MB at W=4: docs/planner.md), with no staging to make.
// A call runs on the plan's instance of its algorithm, made for the largest call the table routes
// to it within the plan; its threads per block follow that size (symm_collective.cpp), which can
// differ from what the timing of a smaller size used where that instance spans the threshold
// between 128 and 512 threads.
// Where the table is empty (tuning off, one rank, a team without the symmetric kernels, a timing
// that failed) the rules of plan/choose.cpp decide.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "tpgemm/types.h"

namespace tpgemm::plan {

constexpr int64_t kSmallestTimedBytes = 4096;
constexpr int64_t kLargestTimedBytes = int64_t(256) << 20;

// The algorithms timed, in the order of the tie rules (NCCL first: the baseline).
constexpr AllReduceImpl kAllReduceCandidates[] = {AllReduceImpl::kNccl, AllReduceImpl::kOneShot, AllReduceImpl::kTwoShot};
constexpr int kNumAllReduceCandidates = 3;
int candidate_index(AllReduceImpl impl);  // into kAllReduceCandidates; -1 if none

struct AllReduceTimings {
  struct Row {
    float ms[kNumAllReduceCandidates] = {-1, -1, -1};  // slowest rank's median per call; < 0: not timed or failed
    AllReduceImpl winner = AllReduceImpl::kNccl;
  };
  std::map<int64_t, Row> rows;  // by message bytes (powers of two); -1 in ms: not timed (pruned) or failed
};

// The sizes a plan of `message_bytes` still has to time, smallest first.
std::vector<int64_t> sizes_to_time(const AllReduceTimings& t, int64_t message_bytes);
// Whether `impl` is worth timing at `bytes`, given the smaller sizes' rows (pruning above). NCCL
// always is.
bool worth_timing(const AllReduceTimings& t, AllReduceImpl impl, int64_t bytes);
// The winner of one size's times (tie rules above); NCCL if none was timed.
AllReduceImpl winner_of(const float (&ms)[kNumAllReduceCandidates]);
// The algorithm of a call of `bytes` (> 0) by the table.
AllReduceImpl route(const AllReduceTimings& t, int64_t bytes);
// The largest call, at most `up_to_bytes`, that route() gives `impl` (0: none).
int64_t largest_routed(const AllReduceTimings& t, AllReduceImpl impl, int64_t up_to_bytes);
// "4096 B: nccl 0.0101 oneshot 0.0034 twoshot 0.0049 -> oneshot; ..." (ms per call), sizes up to
// `up_to_bytes`' row.
std::string describe(const AllReduceTimings& t, int64_t up_to_bytes);

}  // namespace tpgemm::plan
