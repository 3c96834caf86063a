// A CPU simulation of a pipelined schedule on W ranks: a thread per rank and stream plays that
// stream, buffers are real float arrays, copies are real copies between ranks'
// buffers, flags and barriers behave as on the GPU (monotonic sequence numbers), and every
// step is delayed at random to shake out orderings. Each buffer row carries a tag of the call
// that wrote it and a count of the reads it got, so the simulation reports any read of a row
// not yet written in this call and any overwrite of a row before all its planned readers read
// it. Each call's D is compared with the full product.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "plan/schedule.h"
#include "tpgemm/types.h"

namespace tpgemm::sim {

struct SimOptions {
  int calls = 3;          // consecutive calls, each with fresh A and a fresh D
  uint64_t seed = 1;      // data and delays
  int max_delay_us = 50;  // random delay before each step
  int slow_rank = -1;     // this rank also waits 2 ms before each step (to expose missing syncs)
  // This rank also waits slow_matmul_us before each matmul only, as a GPU's flags and copies
  // outrun its matmuls: a peer that does not wait for what those matmuls write reads it too early.
  int slow_matmul_rank = -1;
  int slow_matmul_us = 5000;
  int wait_timeout_ms = 5000;  // a wait longer than this is reported as a deadlock
  // Barrier 0 still bumps the epoch but waits for no peer: what only its waiting protects (reuse
  // of buffers across calls) is exposed, and the flags of the call still work.
  bool barrier0_waits = true;
};

// "" when every call of every rank ran without a hazard and produced the right D; else the
// first problem found.
std::string simulate(const GemmProblem& p, const std::vector<plan::Schedule>& per_rank, const SimOptions& opt);
// Calls of `p` with M = ms[0], ms[1], ... in turn, each running build_pipelined's schedules of
// its own M (NOTE [pipelined calls of fewer rows]) in buffers sized for the largest: what one
// plan's calls of several M do. SimOptions::calls is not read.
std::string simulate_calls(const GemmProblem& p, const std::vector<int64_t>& ms, int world, int chunks, const SimOptions& opt,
                           bool partial_as_c = false, bool direct_stores = false);
// build_pipelined's schedules of every rank (`direct_stores`: NOTE [direct stores]).
std::string simulate_pipelined(const GemmProblem& p, int world, int chunks, const SimOptions& opt,
                               bool direct_stores = false);

}  // namespace tpgemm::sim
