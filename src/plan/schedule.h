// Pipelined schedules as data. Pure host logic: the GPU executor (src/ops/pipelined) enqueues
// these steps on CUDA streams; the CPU simulation in tests/unit runs them on threads.
//
// NOTE [schedule model]
// Each rank has up to three in-order streams: kCompute (the caller's stream; cuBLASLt matmuls
// and reduction kernels), kCopy (a high-priority side stream; copy-engine transfers over
// NVLink, flag writes, small synchronisation kernels) and kGather (a second such stream: for
// gemm_ar's all-gather in rounds, so that pulling round j's reduced rows never delays round
// j + 1's pushes; for the arrival waits of ag_gemm and of NOTE [partial as C], so that no wait
// sits behind this rank's own pushes; for the ready flags of NOTE [partial as C]'s gemm_ar, whose
// pulls then run alone on kCopy). Steps are listed in host enqueue
// order. Ordering between the streams of one rank is by events only (record / wait);
// ordering between ranks is by barriers and by flags in symmetric memory (signal /
// wait_signal / reduce). Every cross-rank wait is bounded on the GPU.
//
// Flag values are sequence numbers, never reset: a plan's device epoch e (1, 2, ... per
// call, bumped by barrier 0 of each call) and, for a step of round j in a schedule of R
// rounds, seq = (e - 1) * R + j + 1. A waiter waits for flag >= seq. Because values only
// grow, repeated calls and CUDA graph replays need no reset.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "tpgemm/error.h"
#include "tpgemm/types.h"

namespace tpgemm::plan {

// NOTE [pipelined buffers]: every buffer a schedule touches (along N, of the transposed problem:
// NOTE [shard along N]). Row spaces (per batch entry):
//   kUserA     the caller's A: ag_gemm [0, M/W) (its shard); gemm_rs / gemm_ar [0, M)
//   kUserC     the caller's C, rows as kUserD
//   kUserD     the caller's D: ag_gemm / gemm_ar [0, M); gemm_rs [0, M/W)
//   kGathered  symmetric, [0, M) x K: peers push their shards here, at their global rows (ag_gemm)
//   kStage     local, [0, M) x N: partial products bound for other ranks (gemm_rs / gemm_ar)
//   kRecv      symmetric, W slots of [0, maxblock) x N: partials for my rows (slot = source
//              rank), or in NOTE [partial as C] running sums (slot = the block's owner)
//   kReduced   symmetric, [0, maxblock) x N: my reduced rows, pulled by peers (gemm_ar)
enum class Buf : uint8_t { kUserA, kUserC, kUserD, kGathered, kStage, kRecv, kReduced };
constexpr int kNumBufs = 7;
constexpr Buf kFirstOwnBuf = Buf::kGathered;  // the buffers the implementation allocates
std::string_view to_string(Buf b);
bool is_symmetric(Buf b);

struct BufGeometry {
  int64_t rows = 0;  // rows per batch entry per slot
  int64_t cols = 0;  // elements per row (also the leading dimension: buffers are packed)
  int slots = 0;     // 0: the schedule does not use this buffer
};
// Batch entries are outermost: element (slot, l, row, col) is at
// ((slot * L + l) * rows + row) * cols + col.
BufGeometry buffer_geometry(Buf b, const GemmProblem& p, int world);

enum class Stream : uint8_t { kCompute, kCopy, kGather };
constexpr int kNumStreams = 3;
enum class StepKind : uint8_t { kGemm, kCopy, kBarrier, kSignal, kWaitSignal, kReduce, kAddC, kRecord, kWaitEvent };
// Families of per-source flags in a plan's signal pad (NOTE [signal pad layout]). kArrive: rows
// this rank pushed have landed (raised after the copy, on its stream: a copy-engine write behind
// it). kReady: rows this rank computed can be pulled (raised after the kernel that wrote them:
// from the SMs, ahead of whatever the copy engines still hold).
enum class Flag : uint8_t { kArrive, kReady };
constexpr int kNumFlags = 2;

// Rows [row0, row0 + rows) of slot `slot` of buffer `buf` in rank `rank`'s memory, for all L
// batch entries.
struct Region {
  Buf buf = Buf::kUserA;
  int rank = 0;
  int slot = 0;
  int64_t row0 = 0;
  int64_t rows = 0;
};

struct Step {
  StepKind kind = StepKind::kGemm;
  Stream stream = Stream::kCompute;
  // kGemm: src = A rows, dst = D rows (D = alpha * A * B [+ beta * C]).
  // kCopy: src -> dst; one of the two is this rank's memory.
  // kReduce: src = rows of this rank's kRecv (all W slots, summed in slot order 0..W-1),
  //          dst = the same rows' place in kUserD (+ beta * C there).
  // kAddC:   dst = rows of kUserD that get beta * C (gemm_ar: rows pulled from their owners).
  Region src, dst;
  bool add_c = false;       // kGemm: the epilogue adds beta * C (C rows = D rows)
  bool has_addend = false;  // kGemm: the epilogue adds `addend` (a peer's partial, weight 1) instead
  Region addend;            //        (NOTE [partial as C])
  bool carveout = false;    // kGemm: a synchronisation kernel may run beside it; leave SMs free
  bool to_reduced = false;  // kReduce: also store the result in kReduced (same rows)
  bool from_sms = false;    // kSignal: raised by a kernel after the stores before it on its stream
                            //          (a matmul's into a peer: NOTE [direct stores]), not by the copy engine
  int peer = -1;            // kSignal: the rank whose flag is raised; kWaitSignal: the rank waited for
  Flag flag = Flag::kArrive;
  int round = 0;            // kSignal / kWaitSignal / kReduce: sequence number of this round
  int index = 0;            // kBarrier: barrier number within the call; kRecord / kWaitEvent: event id
};

struct Schedule {
  Op op = Op::kAgGemm;
  int world = 1;
  int rank = 0;
  int rounds = 1;        // sequence numbers per call (see NOTE [schedule model])
  int num_barriers = 0;  // barriers per call
  int num_events = 0;
  std::vector<Step> steps;  // host enqueue order
};

// The copy-engine pipelined schedule of `p` for `rank`. `chunks` splits each rank's block:
// ag_gemm / gemm_rs into that many transfers, gemm_ar into that many rounds (reduce and
// all-gather of round j overlap the matmuls of round j + 1). chunks >= 1.
//
// NOTE [partial as C]
// gemm_rs and gemm_ar without C, in 2 or more chunks (`partial_as_c`; along M only; the
// planner's choice on two ranks, for gemm_rs from 1024 rows per block and gemm_ar from 4096 at
// N >= 8192, src/plan/choose.cpp): no reduction after the last matmul.
// The sum of each rank block travels once around the ring r -> r + 1, and each rank adds its
// partial in a matmul's epilogue, taking the sum so far as C with weight 1. At step s (0 ..
// W - 1) rank r multiplies the rows of block r - 1 - s chunk by chunk: at step 0 plainly, later
// adding the sum the previous rank pushed into its receive slot `block`, as soon as that chunk's
// flag (round = (s - 1) * chunks + chunk) is up. Before the last step it pushes each chunk into
// the next rank's slot and raises its flag; at step W - 1 the block is its own and the matmul
// writes D (gemm_ar: its reduced rows, which every rank then pulls into D chunk by chunk on the
// copy stream, each after a ready flag raised and waited for on the gather stream; the owner
// copies its own into D once, after its last matmul). The gather stream waits for the arrival
// flags, so that the compute stream waits only on events. A chunk lands while this rank multiplies the chunks before it, as long as one chunk's
// transfer is shorter than the other chunks' matmuls of a step.
// Each step rounds the sum so far to D's type: W roundings in all, of growing sums, where the
// slot reduction rounds each of the W partials and then their fp32 sum once. The order of the
// sum is fixed, so results repeat bitwise.
//
// NOTE [direct stores]
// gemm_rs and gemm_ar along M, `direct_stores` (TPGEMM_PIPELINED_DIRECT=1, not yet a choice of
// the planner): each matmul of a peer's rows writes its partial straight into that peer's receive
// slot over NVLink, from the matmul's own stores, and a flag raised from the SMs behind it says
// so; nothing is staged locally and no copy engine moves it. In round 0 the own rows come first,
// into the own slot, beside barrier 0; the matmuls into peers wait for barrier 0 (a peer may still
// be reducing the previous call's slots); in later rounds (gemm_ar) the own rows come last. The
// reduction is build_rs_ar's. gemm_rs's chunks do not split a peer's matmul here (its pieces
// would share one flag); gemm_ar's rounds stay.
Schedule build_pipelined(const GemmProblem& p, int world, int rank, int chunks, bool partial_as_c = false,
                         bool direct_stores = false);
// Whether `p` takes NOTE [direct stores]: gemm_rs or gemm_ar on two or more ranks, along M.
inline bool direct_stores_fit(const GemmProblem& p, int world) {
  return p.op != Op::kAgGemm && world >= 2 && p.shard_dim == ShardDim::kM;
}
// Whether the caller's problem (before any transposition along N) takes that schedule when cut
// into 2 or more chunks: gemm_rs or gemm_ar on two or more ranks, along M, without C.
inline bool partial_as_c_fits(const GemmProblem& p, int world) {
  return p.op != Op::kAgGemm && world >= 2 && p.shard_dim == ShardDim::kM && !p.has_c;
}

// Whether every matmul of pipelined_ce's schedules of p (along M, at least a row per rank) in
// `chunks`, on every rank, multiplies rows that start and end on multiples of `unit`: FP8 block
// scales need 4 (NOTE [gathered scales]).
bool pipelined_pieces_fit(const GemmProblem& p, int world, int chunks, int64_t unit);

// Static checks of a schedule: every waited event was recorded earlier in enqueue order,
// regions lie inside their buffers, copies touch this rank's memory on one side, every side
// stream is joined back into the compute stream at the end, and nothing that reads this
// call's sequence numbers can run before barrier 0 bumps the epoch.
Status check_schedule(const Schedule& s, const GemmProblem& p);

std::string describe(const Step& step);

}  // namespace tpgemm::plan
