// The measured all-reduce's table and the routing of a call by it. Pure host logic.
//
// NOTE [measured all-reduce]
// An all-reduce plan with impl = auto, on a team whose ranks are all NVLink peers and with tuning
// on (TPGEMM_TUNE != 0), times its algorithms on the team's own GPUs when it is made: at every
// power of two from 4 KiB up to its message (rounded up to a power of two, at most
// kLargestTimedBytes) that the team has not timed yet, NCCL, one-shot and two-shot, each built as a
// plan of exactly that size would build it, on random data, from CUDA graphs replayed from the
// start line (ops/timed_calls.h), each algorithm's slowest rank's median kept. The team keeps the
// table, so later plans time only sizes above it. Every rank has the same table (the times are the
// slowest rank's, the rules below deterministic), so every rank routes a call alike.
//   Winner of a size: the fastest, where NCCL keeps a tie within 2% and one-shot one with two-shot
//   within 1% (the GEMM tuner's tie rules: the tuner's own noise does not move a size off NCCL).
//   Pruning: one-shot or two-shot is not timed at a size where it lost (or was not timed) at both
//   of the two sizes below: the symmetric algorithms win at small messages and lose past a
//   crossover (one-shot sends W - 1 copies of the message, two-shot moves it twice), so timing
//   them further only costs, and one-shot's staging (2 W x the message) grows with the sizes.
//   Routing: a call of b bytes runs the winner of the smallest timed size >= b; past the table,
//   the largest size's winner (the bandwidth regime does not turn back).
// Where the table is empty (tuning off, one rank, a team without the symmetric kernels) the rules
// of plan/choose.cpp decide.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "tpgemm/types.h"

namespace tpgemm::plan {

constexpr int64_t kSmallestTimedBytes = 4096;
constexpr int64_t kLargestTimedBytes = int64_t(64) << 20;

// The algorithms timed, in the order of the tie rules (NCCL first: the baseline).
constexpr AllReduceImpl kAllReduceCandidates[] = {AllReduceImpl::kNccl, AllReduceImpl::kOneShot, AllReduceImpl::kTwoShot};
constexpr int kNumAllReduceCandidates = 3;
int candidate_index(AllReduceImpl impl);  // into kAllReduceCandidates; -1 if none

struct AllReduceTimings {
  struct Row {
    float ms[kNumAllReduceCandidates] = {-1, -1, -1};  // slowest rank's median per call; < 0: not timed or failed
    AllReduceImpl winner = AllReduceImpl::kNccl;
  };
  std::map<int64_t, Row> rows;  // by message bytes (powers of two)
};

// The sizes a plan of `message_bytes` still has to time, smallest first.
std::vector<int64_t> sizes_to_time(const AllReduceTimings& t, int64_t message_bytes);
// Whether `impl` is worth timing at `bytes`, given the smaller sizes' rows (pruning above). NCCL
// always is.
bool worth_timing(const AllReduceTimings& t, AllReduceImpl impl, int64_t bytes);
// The winner of one size's times (tie rules above); NCCL if none was timed.
AllReduceImpl winner_of(const float (&ms)[kNumAllReduceCandidates]);
// The algorithm of a call of `bytes` (> 0) by the table; the table must not be empty.
AllReduceImpl route(const AllReduceTimings& t, int64_t bytes);
// The largest call, at most `up_to_bytes`, that route() gives `impl` (0: none).
int64_t largest_routed(const AllReduceTimings& t, AllReduceImpl impl, int64_t up_to_bytes);
// "4096 B: nccl 0.0101 oneshot 0.0034 twoshot 0.0049 -> oneshot; ..." (ms per call), sizes up to
// `up_to_bytes`' row.
std::string describe(const AllReduceTimings& t, int64_t up_to_bytes);

}  // namespace tpgemm::plan
