#include "plan/schedule.h"

#include "core/assert.h"
#include "core/format.h"
#include "plan/problem.h"

namespace tpgemm::plan {

std::string_view to_string(Buf b) {
  switch (b) {
    case Buf::kUserA: return "A";
    case Buf::kUserC: return "C";
    case Buf::kUserD: return "D";
    case Buf::kShard: return "shard";
    case Buf::kGathered: return "gathered";
    case Buf::kStage: return "stage";
    case Buf::kRecv: return "recv";
    case Buf::kReduced: return "reduced";
  }
  return "?";
}

bool is_symmetric(Buf b) { return b == Buf::kShard || b == Buf::kRecv || b == Buf::kReduced; }

BufGeometry buffer_geometry(Buf b, const GemmProblem& p, int world) {
  const bool ag = p.op == Op::kAgGemm, ar = p.op == Op::kGemmAr;
  const int64_t block = max_block_rows(p.m, world);
  switch (b) {
    case Buf::kUserA: return {a_rows(p, world), p.k, 1};
    case Buf::kUserC: return {d_rows(p, world), p.n, p.has_c ? 1 : 0};
    case Buf::kUserD: return {d_rows(p, world), p.n, 1};
    case Buf::kShard: return {ag ? block : 0, p.k, ag ? 1 : 0};
    case Buf::kGathered: return {ag ? p.m : 0, p.k, ag ? 1 : 0};
    case Buf::kStage: return {ag ? 0 : p.m, p.n, ag ? 0 : 1};
    case Buf::kRecv: return {ag ? 0 : block, p.n, ag ? 0 : world};
    case Buf::kReduced: return {ar ? block : 0, p.n, ar ? 1 : 0};
  }
  return {};
}

namespace {

// Appends steps with the little bookkeeping every builder needs.
class Builder {
 public:
  Builder(const GemmProblem& p, int world, int rank, int rounds) {
    s_.op = p.op;
    s_.world = world;
    s_.rank = rank;
    s_.rounds = rounds;
  }

  int record(Stream st) {
    Step x;
    x.kind = StepKind::kRecord;
    x.stream = st;
    x.index = s_.num_events++;
    s_.steps.push_back(x);
    return x.index;
  }
  void wait_event(Stream st, int event) {
    Step x;
    x.kind = StepKind::kWaitEvent;
    x.stream = st;
    x.index = event;
    s_.steps.push_back(x);
  }
  // Makes `to` wait for everything enqueued so far on `from`.
  void join(Stream from, Stream to) { wait_event(to, record(from)); }

  void barrier() {
    Step x;
    x.kind = StepKind::kBarrier;
    x.stream = Stream::kCopy;
    x.index = s_.num_barriers++;
    s_.steps.push_back(x);
  }
  void gemm(const Region& a, const Region& d, bool add_c, bool carveout) {
    if (a.rows == 0) return;  // an empty chunk: nothing to multiply (events around it still stand)
    Step x;
    x.kind = StepKind::kGemm;
    x.stream = Stream::kCompute;
    x.src = a;
    x.dst = d;
    x.add_c = add_c;
    x.carveout = carveout;
    s_.steps.push_back(x);
  }
  // D = alpha * A B + addend (NOTE [partial as C]).
  void gemm_plus(const Region& a, const Region& d, const Region& addend, bool carveout) {
    if (a.rows == 0) return;
    gemm(a, d, false, carveout);
    s_.steps.back().has_addend = true;
    s_.steps.back().addend = addend;
  }
  void copy(const Region& from, const Region& to) { copy(Stream::kCopy, from, to); }
  void copy(Stream st, const Region& from, const Region& to) {
    if (from.rows == 0) return;
    Step x;
    x.kind = StepKind::kCopy;
    x.stream = st;
    x.src = from;
    x.dst = to;
    s_.steps.push_back(x);
  }
  void signal(int peer, Flag f, int round) { signal(Stream::kCopy, peer, f, round); }
  void signal(Stream st, int peer, Flag f, int round) {
    Step x;
    x.kind = StepKind::kSignal;
    x.stream = st;
    x.peer = peer;
    x.flag = f;
    x.round = round;
    s_.steps.push_back(x);
  }
  void wait_signal(Stream st, int peer, Flag f, int round) {
    Step x;
    x.kind = StepKind::kWaitSignal;
    x.stream = st;
    x.peer = peer;
    x.flag = f;
    x.round = round;
    s_.steps.push_back(x);
  }
  void reduce(const Region& recv_rows, const Region& d_rows, int round, bool to_reduced) {
    Step x;
    x.kind = StepKind::kReduce;
    x.stream = Stream::kCompute;
    x.src = recv_rows;
    x.dst = d_rows;
    x.round = round;
    x.flag = Flag::kArrive;
    x.to_reduced = to_reduced;
    s_.steps.push_back(x);
  }
  void add_c(const Region& d_rows) {
    if (d_rows.rows == 0) return;
    Step x;
    x.kind = StepKind::kAddC;
    x.stream = Stream::kCompute;
    x.dst = d_rows;
    s_.steps.push_back(x);
  }
  Schedule take() { return std::move(s_); }

 private:
  Schedule s_;
};

Region region(Buf b, int rank, int slot, int64_t row0, int64_t rows) { return Region{b, rank, slot, row0, rows}; }

// AllGather + GEMM, rotating A (CUTLASS's AllGather1D_TilingCD_RotatingA; PyTorch async-TP):
// multiply the own shard straight from the caller's A while the copy engine pulls shard
// (r + s) mod W directly from its owner, then multiply each shard as it lands.
Schedule build_ag(const GemmProblem& p, int W, int r, int chunks) {
  Builder b(p, W, r, 1);
  const int64_t mw = p.m / W;
  if (W == 1) {
    b.gemm(region(Buf::kUserA, r, 0, 0, mw), region(Buf::kUserD, r, 0, 0, mw), p.has_c, false);
    return b.take();
  }
  b.join(Stream::kCompute, Stream::kCopy);  // the call starts after everything before it on the caller's stream
  b.barrier();  // 0: every peer has finished pulling my shard of the previous call
  b.copy(region(Buf::kUserA, r, 0, 0, mw), region(Buf::kShard, r, 0, 0, mw));
  b.barrier();  // 1: every shard of this call is in place
  b.gemm(region(Buf::kUserA, r, 0, 0, mw), region(Buf::kUserD, r, 0, r * mw, mw), p.has_c, true);
  for (int s = 1; s < W; ++s) {
    const int src = (r + s) % W;
    for (int j = 0; j < chunks; ++j) {
      const RowBlock c = split_rows(mw, chunks, j);
      const int64_t g = src * mw + c.begin;
      b.copy(region(Buf::kShard, src, 0, c.begin, c.rows), region(Buf::kGathered, r, 0, g, c.rows));
      b.join(Stream::kCopy, Stream::kCompute);
      b.gemm(region(Buf::kGathered, r, 0, g, c.rows), region(Buf::kUserD, r, 0, g, c.rows), p.has_c, false);
    }
  }
  return b.take();
}

// GEMM + ReduceScatter, rotating C along M (CUTLASS's ReduceScatter1D_TilingA_RotatingC, with
// the copy engine instead of a ring through bf16 outputs): at stage s compute the partial for
// rank (r + s) mod W and push it into that rank's receive slot while the next stage computes;
// the own partial comes last and lands in place; then one kernel sums the W slots in fp32 in
// slot order (bitwise repeatable) and adds beta * C.
// gemm_ar adds, per round, the all-gather of the reduced rows (pulled by every peer).
Schedule build_rs_ar(const GemmProblem& p, int W, int r, int chunks) {
  const bool ar = p.op == Op::kGemmAr;
  const int rounds = ar ? chunks : 1;
  const int pieces = ar ? 1 : chunks;  // transfers per destination per round
  Builder b(p, W, r, rounds);
  // The first matmul runs beside barrier 0; in later rounds of gemm_ar, beside the waits for
  // peers' reduced rows of the round before.
  auto beside_sync = [W](bool first, int round) { return W > 1 && (first || round > 0); };
  int epoch_bumped = -1;  // an event after barrier 0: the reduction reads this call's sequence numbers
  if (W > 1) {
    b.join(Stream::kCompute, Stream::kCopy);
    b.barrier();  // 0: every rank has finished reading its receive slots (and reduced rows) of the previous call
    epoch_bumped = b.record(Stream::kCopy);
  }
  bool first = true;
  for (int j = 0; j < rounds; ++j) {
    for (int s = 1; s < W; ++s) {
      const int dest = (r + s) % W;
      const RowBlock blk = rank_block(p.m, W, dest);
      const RowBlock sub = split_rows(blk.rows, rounds, j);
      for (int c = 0; c < pieces; ++c) {
        const RowBlock piece = split_rows(sub.rows, pieces, c);
        const int64_t local = sub.begin + piece.begin;  // rows within dest's block
        const int64_t global = blk.begin + local;
        b.gemm(region(Buf::kUserA, r, 0, global, piece.rows), region(Buf::kStage, r, 0, global, piece.rows), false,
               beside_sync(first, j));
        first = false;
        b.join(Stream::kCompute, Stream::kCopy);
        b.copy(region(Buf::kStage, r, 0, global, piece.rows), region(Buf::kRecv, dest, r, local, piece.rows));
      }
      b.signal(dest, Flag::kArrive, j);
    }
    const RowBlock mine = rank_block(p.m, W, r);
    const RowBlock sub = split_rows(mine.rows, rounds, j);
    b.gemm(region(Buf::kUserA, r, 0, mine.begin + sub.begin, sub.rows), region(Buf::kRecv, r, r, sub.begin, sub.rows),
           false, beside_sync(first, j));
    first = false;
    const int64_t d_row0 = ar ? mine.begin + sub.begin : sub.begin;
    if (j == 0 && W > 1) b.wait_event(Stream::kCompute, epoch_bumped);
    b.reduce(region(Buf::kRecv, r, 0, sub.begin, sub.rows), region(Buf::kUserD, r, 0, d_row0, sub.rows), j, ar);
    if (!ar || W == 1) continue;
    b.join(Stream::kCompute, Stream::kGather);
    for (int s = 1; s < W; ++s) b.signal(Stream::kGather, (r + s) % W, Flag::kReady, j);
    for (int s = 1; s < W; ++s) {
      const int src = (r + s) % W;
      const RowBlock sblk = rank_block(p.m, W, src);
      const RowBlock ssub = split_rows(sblk.rows, rounds, j);
      b.wait_signal(Stream::kGather, src, Flag::kReady, j);
      b.copy(Stream::kGather, region(Buf::kReduced, src, 0, ssub.begin, ssub.rows),
             region(Buf::kUserD, r, 0, sblk.begin + ssub.begin, ssub.rows));
    }
  }
  if (W > 1) b.join(Stream::kCopy, Stream::kCompute);
  if (W > 1 && ar) b.join(Stream::kGather, Stream::kCompute);
  // gemm_ar: rows pulled from their owners carry the plain sum; this rank's own C goes on top.
  if (ar && p.has_c)
    for (int s = 1; s < W; ++s) {
      const RowBlock blk = rank_block(p.m, W, (r + s) % W);
      b.add_c(region(Buf::kUserD, r, 0, blk.begin, blk.rows));
    }
  return b.take();
}

// GEMM + ReduceScatter and GEMM + AllReduce without C, the running sum of each block passed
// around the ring and added in the matmuls' epilogues (NOTE [partial as C]). gemm_ar: the owner's sum goes into its
// reduced rows chunk by chunk, and every rank pulls them, as in build_rs_ar.
Schedule build_ring(const GemmProblem& p, int W, int r, int chunks) {
  const bool ar = p.op == Op::kGemmAr;
  const int next = (r + 1) % W, prev = (r + W - 1) % W;
  Builder b(p, W, r, (W - 1) * chunks);  // one sequence number per pushed chunk (gemm_ar's ready flags: per chunk)
  b.join(Stream::kCompute, Stream::kCopy);
  b.barrier();  // 0: every rank has finished reading its receive slots (and reduced rows) of the previous call
  const int epoch_bumped = b.record(Stream::kCopy);
  b.wait_event(Stream::kGather, epoch_bumped);  // the waits below read this call's sequence numbers
  const RowBlock mine = rank_block(p.m, W, r);
  // gemm_ar: the own reduced rows of chunk c into the own D, on the gather stream.
  auto keep_own = [&](int c) {
    const RowBlock piece = split_rows(mine.rows, chunks, c);
    b.join(Stream::kCompute, Stream::kGather);
    b.copy(Stream::kGather, region(Buf::kReduced, r, 0, piece.begin, piece.rows),
           region(Buf::kUserD, r, 0, mine.begin + piece.begin, piece.rows));
  };
  // gemm_ar: tell the peers that chunk c of the own sum is ready, and pull chunk c of theirs.
  auto gather = [&](int c) {
    b.join(Stream::kCompute, Stream::kCopy);
    for (int s = 1; s < W; ++s) b.signal(Stream::kCopy, (r + s) % W, Flag::kReady, c);
    for (int s = 1; s < W; ++s) {
      const int src = (r + s) % W;
      const RowBlock sblk = rank_block(p.m, W, src), piece = split_rows(sblk.rows, chunks, c);
      b.wait_signal(Stream::kCopy, src, Flag::kReady, c);
      b.copy(region(Buf::kReduced, src, 0, piece.begin, piece.rows),
             region(Buf::kUserD, r, 0, sblk.begin + piece.begin, piece.rows));
    }
  };
  // Every matmul leaves SMs free: from barrier 0 to the last arrival a flag-wait kernel spins on
  // the gather stream beside it (gemm_ar: on the copy stream too). With all the SMs, W=2 gemm_rs
  // ran 5-10% slower at M=8192 and 16384 (bench/results/2026-11-23-ring, carveout-h200x2).
  constexpr bool kCarveout = true;
  for (int step = 0; step < W; ++step) {
    // Block r - 1 - step: its sum starts here at step 0 and ends with its owner at step W - 1.
    const int owner = (r + 2 * W - 1 - step) % W;
    const RowBlock blk = rank_block(p.m, W, owner);
    const bool last = step == W - 1;
    for (int c = 0; c < chunks; ++c) {
      const RowBlock piece = split_rows(blk.rows, chunks, c);
      const int64_t global = blk.begin + piece.begin;
      const Region a = region(Buf::kUserA, r, 0, global, piece.rows);
      const Region d = !last ? region(Buf::kStage, r, 0, global, piece.rows)
                       : ar  ? region(Buf::kReduced, r, 0, piece.begin, piece.rows)
                             : region(Buf::kUserD, r, 0, piece.begin, piece.rows);
      if (step == 0) {
        b.gemm(a, d, false, kCarveout);
      } else {  // the sum so far, pushed by the previous rank into slot `owner`
        b.wait_signal(Stream::kGather, prev, Flag::kArrive, (step - 1) * chunks + c);
        b.join(Stream::kGather, Stream::kCompute);
        // The own copy of chunk c - 1 goes after the event this matmul waits for, so that the
        // matmul never waits for the copy.
        if (ar && last && c > 0) keep_own(c - 1);
        b.gemm_plus(a, d, region(Buf::kRecv, r, owner, piece.begin, piece.rows), kCarveout);
      }
      if (last) {
        if (ar) gather(c);
        continue;
      }
      b.join(Stream::kCompute, Stream::kCopy);
      b.copy(region(Buf::kStage, r, 0, global, piece.rows), region(Buf::kRecv, next, owner, piece.begin, piece.rows));
      b.signal(next, Flag::kArrive, step * chunks + c);
    }
  }
  if (ar) keep_own(chunks - 1);
  b.join(Stream::kCopy, Stream::kCompute);
  if (ar) b.join(Stream::kGather, Stream::kCompute);
  return b.take();
}

bool region_in_bounds(const Region& x, const GemmProblem& p, int world, int64_t* rows_out) {
  const BufGeometry g = buffer_geometry(x.buf, p, world);
  *rows_out = g.rows;
  return g.slots > 0 && x.slot >= 0 && x.slot < g.slots && x.rank >= 0 && x.rank < world && x.row0 >= 0 &&
         x.rows >= 0 && x.row0 + x.rows <= g.rows;
}

}  // namespace

Schedule build_pipelined(const GemmProblem& p, int world, int rank, int chunks, bool partial_as_c) {
  TPGEMM_ASSERT(world >= 1 && rank >= 0 && rank < world && chunks >= 1);
  if (partial_as_c) {
    TPGEMM_ASSERT(partial_as_c_fits(p, world) && chunks >= 2);
    return build_ring(p, world, rank, chunks);
  }
  return p.op == Op::kAgGemm ? build_ag(p, world, rank, chunks) : build_rs_ar(p, world, rank, chunks);
}

Status check_schedule(const Schedule& s, const GemmProblem& p) {
  auto fail = [&](size_t i, const std::string& why) {
    return Status{ErrorCode::kInternal, strfmt("schedule of rank %d, step %zu (%s): %s", s.rank, i,
                                               i < s.steps.size() ? describe(s.steps[i]).c_str() : "end", why.c_str())};
  };
  std::vector<int> recorded_at(static_cast<size_t>(s.num_events), -1);
  // Happens-after-barrier-0, per stream and per event: barrier 0 of the call bumps the epoch
  // that every flag value and every reduction reads. The copy stream gets there by stream
  // order; the others only by waiting on an event recorded after it.
  bool after_b0[kNumStreams] = {s.world == 1, s.world == 1, s.world == 1};
  std::vector<bool> event_after_b0(static_cast<size_t>(s.num_events), false);
  int64_t last_step[kNumStreams] = {-1, -1, -1};
  std::vector<int64_t> joined(kNumStreams, -1);  // last side-stream step the compute stream has waited for
  for (size_t i = 0; i < s.steps.size(); ++i) {
    const Step& x = s.steps[i];
    const int st = static_cast<int>(x.stream);
    int64_t rows = 0;
    last_step[st] = static_cast<int64_t>(i);
    switch (x.kind) {
      case StepKind::kRecord:
        if (x.index < 0 || x.index >= s.num_events || recorded_at[x.index] >= 0) return fail(i, "event recorded twice or out of range");
        recorded_at[x.index] = static_cast<int>(i);
        event_after_b0[x.index] = after_b0[st];
        break;
      case StepKind::kWaitEvent: {
        if (x.index < 0 || x.index >= s.num_events || recorded_at[x.index] < 0)
          return fail(i, "waits on an event not yet recorded in enqueue order (CUDA would not wait at all)");
        const Step& rec = s.steps[recorded_at[x.index]];
        if (rec.stream == x.stream) return fail(i, "waits on an event of its own stream");
        if (event_after_b0[x.index]) after_b0[st] = true;
        if (x.stream == Stream::kCompute && recorded_at[x.index] == last_step[static_cast<int>(rec.stream)])
          joined[static_cast<int>(rec.stream)] = recorded_at[x.index];
        break;
      }
      case StepKind::kBarrier:
        if (x.index == 0) after_b0[st] = true;
        if (x.stream != Stream::kCopy || x.index >= s.num_barriers) return fail(i, "barrier off the copy stream or out of range");
        break;
      case StepKind::kGemm:
        if (!region_in_bounds(x.src, p, s.world, &rows) || !region_in_bounds(x.dst, p, s.world, &rows))
          return fail(i, "region out of bounds");
        if (x.src.rank != s.rank || x.dst.rank != s.rank) return fail(i, "a matmul touches another rank's memory");
        if (x.src.rows != x.dst.rows || x.src.rows == 0) return fail(i, "matmul rows of A and D differ or are empty");
        if (x.stream != Stream::kCompute) return fail(i, "matmul off the compute stream");
        if (x.has_addend && (!region_in_bounds(x.addend, p, s.world, &rows) || x.addend.buf != Buf::kRecv ||
                             x.addend.rank != s.rank || x.addend.rows != x.dst.rows || x.add_c))
          return fail(i, "bad addend (this rank's receive rows, as many as D's, and no C besides)");
        if (x.has_addend && !after_b0[st]) return fail(i, "reads received partials before barrier 0 bumps the epoch");
        break;
      case StepKind::kCopy:
        if (!region_in_bounds(x.src, p, s.world, &rows) || !region_in_bounds(x.dst, p, s.world, &rows))
          return fail(i, "region out of bounds");
        if (x.src.rank != s.rank && x.dst.rank != s.rank) return fail(i, "a copy between two other ranks");
        if (x.src.rank != s.rank && !is_symmetric(x.src.buf)) return fail(i, "pulls from a peer buffer that is not symmetric");
        if (x.dst.rank != s.rank && !is_symmetric(x.dst.buf)) return fail(i, "pushes into a peer buffer that is not symmetric");
        if (x.src.rows != x.dst.rows || x.src.rows == 0) return fail(i, "copy sizes differ or are empty");
        if (buffer_geometry(x.src.buf, p, s.world).cols != buffer_geometry(x.dst.buf, p, s.world).cols)
          return fail(i, "copy between buffers of different row lengths");
        if (!after_b0[st] && (x.src.rank != s.rank || x.dst.rank != s.rank || is_symmetric(x.dst.buf)))
          return fail(i, "touches shared memory before barrier 0");
        if (x.stream == Stream::kCompute) return fail(i, "copy on the compute stream");
        break;
      case StepKind::kSignal:
      case StepKind::kWaitSignal:
        if (x.peer < 0 || x.peer >= s.world || x.peer == s.rank) return fail(i, "flag of an invalid peer");
        if (x.round < 0 || x.round >= s.rounds) return fail(i, "round out of range");
        if (!after_b0[st]) return fail(i, "flag step not ordered after barrier 0 (the epoch is bumped there)");
        if (x.stream == Stream::kCompute) return fail(i, "flag step on the compute stream");
        break;
      case StepKind::kAddC:
        if (!region_in_bounds(x.dst, p, s.world, &rows) || x.dst.buf != Buf::kUserD || !p.has_c || x.stream != Stream::kCompute)
          return fail(i, "bad add-C step");
        break;
      case StepKind::kReduce:
        if (!region_in_bounds(x.src, p, s.world, &rows) || !region_in_bounds(x.dst, p, s.world, &rows))
          return fail(i, "region out of bounds");
        if (x.src.buf != Buf::kRecv || x.dst.buf != Buf::kUserD || x.src.rows != x.dst.rows) return fail(i, "bad reduce regions");
        if (x.stream != Stream::kCompute) return fail(i, "reduce off the compute stream");
        if (!after_b0[st]) return fail(i, "reduce may run before barrier 0 bumps the epoch it reads");
        break;
    }
  }
  for (int st = 1; st < kNumStreams; ++st)
    if (last_step[st] >= 0 && joined[st] != last_step[st])
      return fail(s.steps.size(), strfmt("side stream %d is not joined back into the compute stream at the end", st));
  return Status::Ok();
}

std::string describe(const Step& x) {
  auto reg = [](const Region& r) {
    return strfmt("%s@%d[%d] rows %lld+%lld", std::string(to_string(r.buf)).c_str(), r.rank, r.slot, (long long)r.row0,
                  (long long)r.rows);
  };
  const char* st = x.stream == Stream::kCompute ? "compute" : x.stream == Stream::kCopy ? "copy" : "gather";
  const char* fl = x.flag == Flag::kArrive ? "arrive" : "ready";
  switch (x.kind) {
    case StepKind::kGemm:
      return strfmt("%s: gemm %s -> %s%s%s", st, reg(x.src).c_str(), reg(x.dst).c_str(), x.add_c ? " +C" : "",
                    x.has_addend ? (" + " + reg(x.addend)).c_str() : "");
    case StepKind::kCopy: return strfmt("%s: copy %s -> %s", st, reg(x.src).c_str(), reg(x.dst).c_str());
    case StepKind::kBarrier: return strfmt("%s: barrier %d", st, x.index);
    case StepKind::kSignal: return strfmt("%s: signal %s round %d to rank %d", st, fl, x.round, x.peer);
    case StepKind::kWaitSignal: return strfmt("%s: wait %s round %d from rank %d", st, fl, x.round, x.peer);
    case StepKind::kReduce: return strfmt("%s: reduce %s -> %s round %d", st, reg(x.src).c_str(), reg(x.dst).c_str(), x.round);
    case StepKind::kAddC: return strfmt("%s: D %s += beta * C", st, reg(x.dst).c_str());
    case StepKind::kRecord: return strfmt("%s: record event %d", st, x.index);
    case StepKind::kWaitEvent: return strfmt("%s: wait event %d", st, x.index);
  }
  return "?";
}

}  // namespace tpgemm::plan
