// Pipelined schedules, proven on the CPU: static checks, and a simulation of W ranks that
// runs every schedule step by step with real copies and compares with the full product.
#include <gtest/gtest.h>

#include "plan/problem.h"
#include "plan/schedule.h"
#include "support/schedule_sim.h"

namespace tpgemm {
namespace {

GemmProblem make(Op op, int64_t m, int64_t l = 1, bool with_c = false, BLayout layout = BLayout::kNK) {
  GemmProblem p;
  p.op = op;
  p.m = m;
  p.n = 16;
  p.k = 8;
  p.l = l;
  p.b_layout = layout;
  p.alpha = 0.5f;
  p.has_c = with_c;
  p.beta = with_c ? 2.0f : 0.0f;
  return p;
}

std::string name(const GemmProblem& p, int w, int chunks) {
  return describe(p) + " W=" + std::to_string(w) + " chunks=" + std::to_string(chunks);
}

TEST(Schedule, StaticChecksPassForEveryOpWorldAndChunking) {
  for (Op op : {Op::kAgGemm, Op::kGemmRs, Op::kGemmAr})
    for (int w = 1; w <= 8; ++w)
      for (int chunks = 1; chunks <= 4; ++chunks)
        for (int64_t m : {int64_t(w), int64_t(w) * 5, int64_t(w) * 16 + (op == Op::kGemmAr ? 3 : 0)}) {
          const GemmProblem p = make(op, m, 1, op != Op::kAgGemm);
          for (int r = 0; r < w; ++r) {
            const plan::Schedule s = plan::build_pipelined(p, w, r, chunks);
            const Status st = plan::check_schedule(s, p);
            EXPECT_TRUE(st.ok()) << name(p, w, chunks) << ": " << st.message;
            if (!plan::direct_stores_fit(p, w)) continue;
            const Status direct = plan::check_schedule(plan::build_pipelined(p, w, r, chunks, false, true), p);
            EXPECT_TRUE(direct.ok()) << name(p, w, chunks) << " (direct stores): " << direct.message;
          }
        }
}

// NOTE [direct stores]: the matmuls write their peers' receive slots themselves; every rank's
// schedule, simulated with random delays over several calls, computes the product, and a peer's
// slot is written only after barrier 0 (checked statically: a copy of the schedule that stores
// before it fails the check).
TEST(Schedule, DirectStoresPassTheStaticChecksAndTheSimulation) {
  int seed = 1;
  for (Op op : {Op::kGemmRs, Op::kGemmAr})
    for (int w : {2, 3, 4, 8})
      for (int chunks : {1, 2, 3})
        for (bool with_c : {false, true}) {
          const int64_t m = op == Op::kGemmAr ? int64_t(w) * 4 + w - 1 : int64_t(w) * 4;
          const GemmProblem p = make(op, m, seed % 2 ? 2 : 1, with_c, seed % 2 ? BLayout::kKN : BLayout::kNK);
          sim::SimOptions o;
          o.seed = static_cast<uint64_t>(seed++);
          o.calls = 3;
          o.max_delay_us = 40;
          EXPECT_EQ(sim::simulate_pipelined(p, w, chunks, o, /*direct_stores=*/true), "") << name(p, w, chunks);
        }
  const GemmProblem p = make(Op::kGemmRs, 8);
  plan::Schedule s = plan::build_pipelined(p, 2, 0, 1, false, true);
  for (auto it = s.steps.begin(); it != s.steps.end(); ++it)
    if (it->kind == plan::StepKind::kWaitEvent && it->stream == plan::Stream::kCompute) {
      s.steps.erase(it);  // the compute stream's wait for barrier 0
      break;
    }
  const Status st = plan::check_schedule(s, p);
  EXPECT_FALSE(st.ok());
  EXPECT_NE(st.message.find("before barrier 0"), std::string::npos) << st.message;
  // A flag moved ahead of the matmul it announces leaves that matmul's stores unannounced.
  plan::Schedule t = plan::build_pipelined(p, 2, 0, 1, false, true);
  for (size_t i = 1; i < t.steps.size(); ++i)
    if (t.steps[i].kind == plan::StepKind::kSignal && t.steps[i - 1].kind == plan::StepKind::kGemm) {
      std::swap(t.steps[i], t.steps[i - 1]);
      break;
    }
  const Status late = plan::check_schedule(t, p);
  EXPECT_FALSE(late.ok());
  EXPECT_NE(late.message.find("no flag from the SMs follows"), std::string::npos) << late.message;
  // Raised from another stream, the flag is not ordered after the matmul's stores.
  plan::Schedule u = plan::build_pipelined(p, 2, 0, 1, false, true);
  for (plan::Step& x : u.steps)
    if (x.kind == plan::StepKind::kSignal && x.from_sms) x.stream = plan::Stream::kCopy;
  const Status off = plan::check_schedule(u, p);
  EXPECT_FALSE(off.ok());
  EXPECT_NE(off.message.find("off the compute stream"), std::string::npos) << off.message;
}

// Without barrier 0's wait, a fast rank's next call stores into a slot its slow peer still reads.
TEST(SimulationCanFail, DirectStoresWithoutTheReuseBarrierOverwriteASlotStillBeingRead) {
  const GemmProblem p = make(Op::kGemmRs, 8);
  sim::SimOptions o;
  o.slow_matmul_rank = 1;
  o.barrier0_waits = false;
  o.calls = 3;
  const std::string err = sim::simulate_pipelined(p, 4, 1, o, /*direct_stores=*/true);
  EXPECT_NE(err.find("overwrites recv@"), std::string::npos) << err;
}

TEST(Schedule, StaticCheckCatchesAWaitOnAnEventNotYetRecorded) {
  const GemmProblem p = make(Op::kAgGemm, 8);
  // Move the first record after its wait: CUDA would not wait at all.
  plan::Schedule t = plan::build_pipelined(p, 2, 0, 1);
  std::swap(t.steps[0], t.steps[1]);
  const Status st = plan::check_schedule(t, p);
  EXPECT_FALSE(st.ok());
  EXPECT_NE(st.message.find("not yet recorded"), std::string::npos) << st.message;
}

TEST(Schedule, StaticCheckCatchesAReduceBeforeTheEpochBump) {
  const GemmProblem p = make(Op::kGemmRs, 8);
  plan::Schedule s = plan::build_pipelined(p, 2, 0, 1);
  for (auto it = s.steps.begin(); it != s.steps.end(); ++it)
    if (it->kind == plan::StepKind::kWaitEvent && it->stream == plan::Stream::kCompute && (it + 1)->kind == plan::StepKind::kReduce) {
      s.steps.erase(it);
      break;
    }
  const Status st = plan::check_schedule(s, p);
  EXPECT_FALSE(st.ok());
  EXPECT_NE(st.message.find("epoch"), std::string::npos) << st.message;
}
// NOTE [partial as C]: gemm_rs and gemm_ar without C, each block's sum passed around the ring of ranks.
std::vector<plan::Schedule> partial_as_c(const GemmProblem& p, int w, int chunks) {
  std::vector<plan::Schedule> out;
  for (int r = 0; r < w; ++r) out.push_back(plan::build_pipelined(p, w, r, chunks, true));
  return out;
}

TEST(Schedule, PartialAsCPassesTheStaticChecksAndTheSimulation) {
  int seed = 100;
  for (Op op : {Op::kGemmRs, Op::kGemmAr})
    for (int w : {2, 3, 4, 8})
      for (int chunks : {2, 3, 4})
        for (int64_t l : {1, 2})
          for (int64_t rows : {1, 3, 4, 7}) {  // rows per block: 1 and 3 leave chunks empty
            // gemm_ar: blocks of unequal rows too
            const int64_t m = rows * w + (op == Op::kGemmAr && rows > 1 ? w - 1 : 0);
            const GemmProblem p = make(op, m, l, false, seed % 2 ? BLayout::kKN : BLayout::kNK);
            for (const plan::Schedule& s : partial_as_c(p, w, chunks)) {
              const Status st = plan::check_schedule(s, p);
              EXPECT_TRUE(st.ok()) << name(p, w, chunks) << ": " << st.message;
            }
            sim::SimOptions o;
            o.seed = static_cast<uint64_t>(seed++);
            o.calls = 3;
            o.max_delay_us = 40;
            EXPECT_EQ(sim::simulate(p, partial_as_c(p, w, chunks), o), "") << name(p, w, chunks) << " (partial as C)";
          }
}

// Each rank multiplies every block exactly once, the owner's last, so the sum has every partial.
TEST(Schedule, PartialAsCRingVisitsEveryBlockOnceAndEndsWithTheOwner) {
  const int w = 4;
  const GemmProblem p = make(Op::kGemmRs, 8 * w);
  for (int r = 0; r < w; ++r) {
    const plan::Schedule s = plan::build_pipelined(p, w, r, 2, true);
    std::vector<int64_t> rows_per_block(w, 0);
    int plain = 0;
    for (const plan::Step& x : s.steps) {
      if (x.kind != plan::StepKind::kGemm) continue;
      ++rows_per_block[x.src.row0 / 8];
      if (!x.has_addend) {
        ++plain;
        EXPECT_EQ(x.src.row0 / 8, (r + w - 1) % w) << "rank " << r << ": only block r - 1 starts a sum";
      }
      if (x.dst.buf == plan::Buf::kUserD) {
        EXPECT_EQ(x.src.row0 / 8, r) << "rank " << r << ": only its own block ends in D";
      }
    }
    EXPECT_EQ(plain, 2);
    for (int q = 0; q < w; ++q) EXPECT_EQ(rows_per_block[q], 2) << "rank " << r << " block " << q;
  }
}

// gemm_ar's ring: nothing queues ahead of a pull but the pulls before it and its own ready wait.
// The ready flags and waits are on the gather stream (each chunk's arrival wait ahead of them),
// the copy stream holds only pushes and then pulls, and the own rows' copy into D comes once,
// after the last matmul.
TEST(Schedule, PartialAsCAllReducePullsQueueOnlyBehindPulls) {
  for (int w : {2, 3, 4})
    for (int chunks : {2, 4})
      for (int64_t rows : {8, 3}) {  // 3 rows per block: some of 4 chunks are empty
        const GemmProblem p = make(Op::kGemmAr, rows * w);
        for (int r = 0; r < w; ++r) {
          const plan::Schedule s = plan::build_pipelined(p, w, r, chunks, true);
          size_t last_gemm = 0;
          for (size_t i = 0; i < s.steps.size(); ++i)
            if (s.steps[i].kind == plan::StepKind::kGemm) last_gemm = i;
          bool pulling = false;
          int own_copies = 0;
          // On the gather stream, the last step's arrival wait of chunk c + 1 comes before the
          // ready flags of chunk c (so that matmul c + 1 never waits for them).
          std::vector<int> arrival_at(static_cast<size_t>(chunks), -1), ready_at(static_cast<size_t>(chunks), -1);
          for (size_t i = 0; i < s.steps.size(); ++i) {
            const plan::Step& x = s.steps[i];
            const int last_step_round = x.round - (w - 2) * chunks;  // arrival rounds of the last step
            if (x.kind == plan::StepKind::kWaitSignal && x.flag == plan::Flag::kArrive && last_step_round >= 0)
              arrival_at.at(static_cast<size_t>(last_step_round)) = static_cast<int>(i);
            if (x.kind == plan::StepKind::kSignal && x.flag == plan::Flag::kReady) {
              int& first = ready_at.at(static_cast<size_t>(x.round));
              if (first < 0) first = static_cast<int>(i);
            }
            const bool pull = x.kind == plan::StepKind::kCopy && x.src.buf == plan::Buf::kReduced && x.src.rank != r;
            if ((x.kind == plan::StepKind::kSignal && x.flag == plan::Flag::kReady) || x.kind == plan::StepKind::kWaitSignal) {
              EXPECT_EQ(x.stream, plan::Stream::kGather) << name(p, w, chunks) << " rank " << r << " step " << i;
            }
            if (pull) {
              EXPECT_EQ(x.stream, plan::Stream::kCopy) << name(p, w, chunks) << " rank " << r << " step " << i;
              pulling = true;
            }
            if (x.kind == plan::StepKind::kCopy && x.stream == plan::Stream::kCopy && !pull) {
              EXPECT_FALSE(pulling) << name(p, w, chunks) << " rank " << r << ": a push after a pull, step " << i;
            }
            if (x.kind == plan::StepKind::kCopy && x.src.buf == plan::Buf::kReduced && x.src.rank == r) {
              ++own_copies;
              EXPECT_GT(i, last_gemm) << name(p, w, chunks) << " rank " << r;
              EXPECT_EQ(x.src.rows, plan::rank_block(p.m, w, r).rows) << name(p, w, chunks) << " rank " << r;
            }
          }
          EXPECT_EQ(own_copies, 1) << name(p, w, chunks) << " rank " << r;
          for (int c = 0; c + 1 < chunks; ++c) {
            EXPECT_GE(arrival_at[static_cast<size_t>(c + 1)], 0)
                << name(p, w, chunks) << " rank " << r << " chunk " << c;
            EXPECT_LT(arrival_at[static_cast<size_t>(c + 1)], ready_at[static_cast<size_t>(c)])
                << name(p, w, chunks) << " rank " << r << " chunk " << c;
          }
        }
      }
}

TEST(SimulationCanFail, PartialAsCWithoutTheArrivalWaitReadsAPartialNotYetPushed) {
  for (int w : {2, 4}) {
    const GemmProblem p = make(Op::kGemmRs, 4 * w);
    std::vector<plan::Schedule> s = partial_as_c(p, w, 2);
    for (plan::Schedule& x : s)
      for (auto it = x.steps.begin(); it != x.steps.end(); ++it)
        if (it->kind == plan::StepKind::kWaitSignal) {
          x.steps.erase(it);
          break;
        }
    sim::SimOptions o;
    o.slow_rank = w - 1;  // pushes late: rank 0 must not read its first chunk before it lands
    const std::string err = sim::simulate(p, s, o);
    EXPECT_NE(err.find("reads recv@"), std::string::npos) << "W=" << w << ": " << err;
  }
}

// Every flag wait of the ring is needed: drop any one of them, from one rank, and with the rank
// it waits for slow in its matmuls, that rank's partial or sum is read before it is written.
TEST(SimulationCanFail, PartialAsCWithoutAnyOneFlagWaitReadsDataNotYetWritten) {
  for (Op op : {Op::kGemmRs, Op::kGemmAr})
    for (int w : {2, 4}) {
      const GemmProblem p = make(op, 4 * w);
      const std::vector<plan::Schedule> full = partial_as_c(p, w, 2);
      const int waiter = 1;
      int dropped = 0;
      for (size_t i = 0; i < full[waiter].steps.size(); ++i) {
        const plan::Step& x = full[waiter].steps[i];
        if (x.kind != plan::StepKind::kWaitSignal) continue;
        std::vector<plan::Schedule> s = full;
        s[waiter].steps.erase(s[waiter].steps.begin() + static_cast<std::ptrdiff_t>(i));
        sim::SimOptions o;
        o.calls = 1;
        o.max_delay_us = 0;
        o.slow_matmul_rank = x.peer;
        // The slow rank's head start exposes the race unless the waiter's threads are themselves
        // held up that long (a loaded machine; 5 ms missed it about one run in five on two busy
        // cores): 20 ms, and a few tries, any one of which must see it.
        o.slow_matmul_us = 20000;
        std::string err;
        for (int attempt = 0; attempt < 4 && err.find(" reads ") == std::string::npos; ++attempt)
          err = sim::simulate(p, s, o);
        EXPECT_NE(err.find(" reads "), std::string::npos)
            << to_string(op) << " W=" << w << " without '" << plan::describe(x) << "' on rank " << waiter << ": " << err;
        ++dropped;
      }
      EXPECT_EQ(dropped, (w - 1) * 2 + (op == Op::kGemmAr ? (w - 1) * 2 : 0)) << to_string(op) << " W=" << w;
    }
}

TEST(SimulationCanFail, PartialAsCAllReduceWithoutTheReadyWaitPullsRowsNotYetSummed) {
  const GemmProblem p = make(Op::kGemmAr, 8);
  std::vector<plan::Schedule> s = partial_as_c(p, 2, 2);
  for (plan::Schedule& x : s)
    for (auto it = x.steps.begin(); it != x.steps.end(); ++it)
      if (it->kind == plan::StepKind::kWaitSignal && it->flag == plan::Flag::kReady) {
        x.steps.erase(it);
        break;
      }
  sim::SimOptions o;
  o.slow_matmul_rank = 1;  // sums late: rank 0 must not pull its first chunk before it is there
  o.slow_matmul_us = 20000;  // (as above: a margin busy cores do not eat, and a few tries)
  std::string err;
  for (int attempt = 0; attempt < 4 && err.find("reads reduced@1") == std::string::npos; ++attempt)
    err = sim::simulate(p, s, o);
  EXPECT_NE(err.find("reads reduced@1"), std::string::npos) << err;
}

struct SimCase {
  Op op;
  int world;
};

class Simulated : public ::testing::TestWithParam<SimCase> {};

TEST_P(Simulated, EverySchedulePassesTheSimulationAndComputesTheProduct) {
  const auto [op, w] = GetParam();
  int seed = 1;
  for (int chunks : {1, 2, 3})
    for (int64_t l : {1, 2})
      for (bool with_c : {false, true})
        for (int64_t m : {int64_t(w) * 3, int64_t(w) * 4 + (op == Op::kGemmAr ? w - 1 : 0)}) {
          if (op != Op::kGemmAr && m % w != 0) continue;
          const GemmProblem p = make(op, m, l, with_c, seed % 2 ? BLayout::kKN : BLayout::kNK);
          sim::SimOptions o;
          o.seed = static_cast<uint64_t>(seed++);
          o.calls = 3;
          o.max_delay_us = 40;
          EXPECT_EQ(sim::simulate_pipelined(p, w, chunks, o), "") << name(p, w, chunks);
        }
}

INSTANTIATE_TEST_SUITE_P(AllOpsW1to8, Simulated,
                         ::testing::Values(SimCase{Op::kAgGemm, 1}, SimCase{Op::kAgGemm, 2}, SimCase{Op::kAgGemm, 3},
                                           SimCase{Op::kAgGemm, 4}, SimCase{Op::kAgGemm, 8}, SimCase{Op::kGemmRs, 1},
                                           SimCase{Op::kGemmRs, 2}, SimCase{Op::kGemmRs, 3}, SimCase{Op::kGemmRs, 4},
                                           SimCase{Op::kGemmRs, 8}, SimCase{Op::kGemmAr, 1}, SimCase{Op::kGemmAr, 2},
                                           SimCase{Op::kGemmAr, 3}, SimCase{Op::kGemmAr, 5}, SimCase{Op::kGemmAr, 8}),
                         [](const auto& info) {
                           return std::string(to_string(info.param.op)) + "_W" + std::to_string(info.param.world);
                         });

// NOTE [pipelined calls of fewer rows]: every M's schedule keeps the protocol of the plan's M (the
// same rounds, barriers and events, so that calls of different M follow one another on one
// signal pad) and fits in its buffers.
TEST(Schedule, CallsOfFewerRowsKeepTheProtocolAndFitTheBuffers) {
  for (Op op : {Op::kAgGemm, Op::kGemmRs, Op::kGemmAr})
    for (int w = 1; w <= 8; ++w)
      for (int chunks = 1; chunks <= 4; ++chunks)
        for (bool partial_as_c : {false, true}) {
          const int64_t unit = op == Op::kGemmAr ? 1 : w;
          const GemmProblem big = make(op, unit * 37, 2, false);
          if (partial_as_c && (!plan::partial_as_c_fits(big, w) || chunks < 2)) continue;
          for (int64_t m = unit; m <= big.m; m += unit) {
            GemmProblem p = big;
            p.m = m;
            for (int r = 0; r < w; ++r) {
              const plan::Schedule a = plan::build_pipelined(big, w, r, chunks, partial_as_c);
              const plan::Schedule b = plan::build_pipelined(p, w, r, chunks, partial_as_c);
              ASSERT_EQ(a.rounds, b.rounds) << name(p, w, chunks);
              ASSERT_EQ(a.num_barriers, b.num_barriers) << name(p, w, chunks);
              ASSERT_EQ(a.num_events, b.num_events) << name(p, w, chunks);
              ASSERT_TRUE(plan::check_schedule(b, p).ok()) << name(p, w, chunks);
            }
            for (int buf = 0; buf < plan::kNumBufs; ++buf) {
              const plan::BufGeometry g = plan::buffer_geometry(static_cast<plan::Buf>(buf), p, w);
              const plan::BufGeometry h = plan::buffer_geometry(static_cast<plan::Buf>(buf), big, w);
              EXPECT_LE(g.slots * g.rows * g.cols, h.slots * h.rows * h.cols) << name(p, w, chunks) << " buffer " << buf;
              EXPECT_EQ(g.slots, h.slots);
            }
          }
        }
}

// One plan's calls of several M in turn, each on its own M's schedule in the buffers of the
// largest, simulated with random delays: every call's D is the product, and no call reads a row
// before it is written or overwrites one a peer has yet to read (of this call or the one before,
// whose geometry differs).
TEST_P(Simulated, CallsOfSeveralMInTurnComputeTheirProducts) {
  const auto [op, w] = GetParam();
  const int64_t unit = op == Op::kGemmAr ? 1 : w;
  int seed = 500;
  for (int chunks : {1, 2, 3})
    for (const char* mode : {"", "partial as C", "direct stores"})
      for (bool with_c : {false, true}) {
        const GemmProblem p = make(op, unit * 9, 2, with_c, seed % 2 ? BLayout::kKN : BLayout::kNK);
        const bool partial_as_c = mode == std::string("partial as C"), direct = mode == std::string("direct stores");
        if (partial_as_c && (with_c || !plan::partial_as_c_fits(p, w) || chunks < 2)) continue;
        if (direct && !plan::direct_stores_fit(p, w)) continue;
        std::vector<int64_t> ms = {unit * 9, unit * 2, unit * 9, unit, unit * 7, unit * 5, unit * 9};
        if (op == Op::kGemmAr) ms.insert(ms.begin() + 2, {2, 3, 1, 8});
        sim::SimOptions o;
        o.seed = static_cast<uint64_t>(seed++);
        o.max_delay_us = 40;
        EXPECT_EQ(sim::simulate_calls(p, ms, w, chunks, o, partial_as_c, direct), "") << name(p, w, chunks) << " " << mode;
      }
}

// The simulation must be able to fail: drop a synchronisation step and it reports the hazard.
std::vector<plan::Schedule> without(const GemmProblem& p, int w, plan::StepKind kind, int index) {
  std::vector<plan::Schedule> out;
  for (int r = 0; r < w; ++r) {
    plan::Schedule s = plan::build_pipelined(p, w, r, 1);
    for (auto it = s.steps.begin(); it != s.steps.end(); ++it)
      if (it->kind == kind && (kind != plan::StepKind::kBarrier || it->index == index)) {
        s.steps.erase(it);
        break;
      }
    out.push_back(std::move(s));
  }
  return out;
}

TEST(SimulationCanFail, AllGatherWithoutTheArrivalWaitReadsAShardNotYetPushed) {
  const GemmProblem p = make(Op::kAgGemm, 8);
  sim::SimOptions o;
  o.slow_rank = 1;  // rank 1 pushes its shard late
  const std::string err = sim::simulate(p, without(p, 4, plan::StepKind::kWaitSignal, 0), o);
  EXPECT_NE(err.find("reads gathered@"), std::string::npos) << err;
  EXPECT_NE(err.find("last written in call"), std::string::npos) << err;
}

TEST(SimulationCanFail, AllGatherWithoutTheReuseBarrierOverwritesAGatheredShardStillBeingRead) {
  const GemmProblem p = make(Op::kAgGemm, 8);
  sim::SimOptions o;
  o.slow_matmul_rank = 2;  // rank 2 multiplies late, while the others already push the next call's shards
  o.barrier0_waits = false;
  std::vector<plan::Schedule> s;
  for (int r = 0; r < 4; ++r) s.push_back(plan::build_pipelined(p, 4, r, 1));
  const std::string err = sim::simulate(p, s, o);
  // Mostly rank 2's gathered rows; under load another rank's reads can be the ones still pending.
  EXPECT_NE(err.find("overwrites gathered@"), std::string::npos) << err;
  EXPECT_NE(err.find("planned reads"), std::string::npos) << err;
}

TEST(SimulationCanFail, ReduceScatterWithoutArrivalSignalsDeadlocksAndSaysWhere) {
  const GemmProblem p = make(Op::kGemmRs, 8);
  sim::SimOptions o;
  o.wait_timeout_ms = 1000;
  const std::string err = sim::simulate(p, without(p, 2, plan::StepKind::kSignal, 0), o);
  EXPECT_NE(err.find("deadlock"), std::string::npos) << err;
  // Which blocked step times out first depends on thread timing (the reduction, or a step
  // behind it on another rank); each names its rank and step.
  EXPECT_NE(err.find("step '"), std::string::npos) << err;
}

// Ranks that disagree on a call's M (one runs the schedule of another M) are caught: the rows
// the others wait for never come, or come at the wrong place.
TEST(SimulationCanFail, ARankOnTheScheduleOfAnotherMIsCaught) {
  const GemmProblem p = make(Op::kGemmRs, 4 * 8);
  GemmProblem small = p;
  small.m = 4 * 3;
  sim::SimOptions o;
  o.wait_timeout_ms = 500;
  std::vector<plan::Schedule> wrong;
  for (int r = 0; r < 4; ++r) wrong.push_back(plan::build_pipelined(r == 2 ? small : p, 4, r, 2));
  const std::string err = sim::simulate(p, wrong, o);
  EXPECT_NE(err, "");
}

TEST(SimulationCanFail, WrongArithmeticIsCaughtByTheProductCheck) {
  GemmProblem p = make(Op::kGemmRs, 8);
  std::vector<plan::Schedule> s;
  for (int r = 0; r < 2; ++r) s.push_back(plan::build_pipelined(p, 2, r, 1));
  // Rank 1 pushes its partial into the wrong receive slot: the result loses it.
  for (auto& st : s[1].steps)
    if (st.kind == plan::StepKind::kCopy) st.dst.slot = 0;
  const std::string err = sim::simulate(p, s, {});
  EXPECT_FALSE(err.empty());
}

// A stored [K, M] (bf16): a piece of A's rows is a block of its columns, so every piece inside a
// rank block starts on a multiple of 8 rows (16 bytes; the first starts where its block does),
// the pieces still cover every block once (static checks), and the ranks agree on them (the
// simulation, which moves rows whatever their layout, computes the product).
TEST(Schedule, PiecesOfATransposedAStartSixteenBytesAligned) {
  int seed = 100;
  for (Op op : {Op::kAgGemm, Op::kGemmRs, Op::kGemmAr})
    for (int w : {2, 3, 4})
      for (int chunks : {1, 2, 3, 4})
        for (int64_t m : {int64_t(w) * 40, int64_t(w) * 104 + (op == Op::kGemmAr ? w - 1 : 0)}) {
          GemmProblem p = make(op, m, 1, op == Op::kGemmAr && chunks == 3);
          p.a_layout = ALayout::kKM;
          const int64_t mw = m / w;
          for (int r = 0; r < w; ++r) {
            const plan::Schedule s = plan::build_pipelined(p, w, r, chunks, plan::partial_as_c_fits(p, w) && chunks >= 2);
            const Status st = plan::check_schedule(s, p);
            EXPECT_TRUE(st.ok()) << name(p, w, chunks) << ": " << st.message;
            for (const plan::Step& x : s.steps) {
              if (x.kind != plan::StepKind::kGemm || x.src.rows == 0) continue;
              // (the row of A it starts on, and where that row's rank block starts)
              const bool own_shard = op == Op::kAgGemm && x.src.buf == plan::Buf::kUserA;
              const int64_t row = own_shard ? r * mw + x.src.row0 : x.src.row0;
              const int owner = op == Op::kAgGemm ? static_cast<int>(row / mw) : -1;
              int64_t block_begin = owner >= 0 ? owner * mw : -1;
              for (int q = 0; q < w && block_begin < 0; ++q)
                if (plan::rank_block(m, w, q).begin == row) block_begin = row;
              EXPECT_TRUE(row % 8 == 0 || row == block_begin) << name(p, w, chunks) << " rank " << r << ": a piece at row " << row;
            }
          }
          sim::SimOptions o;
          o.seed = static_cast<uint64_t>(seed++);
          o.calls = 2;
          o.max_delay_us = 20;
          EXPECT_EQ(sim::simulate_pipelined(p, w, chunks, o), "") << name(p, w, chunks);
          if (plan::partial_as_c_fits(p, w) && chunks >= 2) {
            EXPECT_EQ(sim::simulate(p, partial_as_c(p, w, chunks), o), "") << name(p, w, chunks) << " (partial as C)";
          }
        }
}

}  // namespace
}  // namespace tpgemm
