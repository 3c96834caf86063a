#include "plan/schedule.h"

#include <algorithm>

#include "core/assert.h"
#include "plan/problem.h"

namespace tpgemm::plan {

std::string_view to_string(Buf b) {
  switch (b) {
    case Buf::kUserA: return "A";
    case Buf::kUserC: return "C";
    case Buf::kUserD: return "D";
    case Buf::kGathered: return "gathered";
    case Buf::kStage: return "stage";
    case Buf::kRecv: return "recv";
    case Buf::kReduced: return "reduced";
  }
  return "?";
}

bool is_symmetric(Buf b) { return b == Buf::kGathered || b == Buf::kRecv || b == Buf::kReduced; }

BufGeometry buffer_geometry(Buf b, const GemmProblem& p, int world) {
  const bool ag = p.op == Op::kAgGemm, ar = p.op == Op::kGemmAr;
  const int64_t block = max_block_rows(p.m, world);
  switch (b) {
    case Buf::kUserA: return {a_rows(p, world), p.k, 1};
    case Buf::kUserC: return {d_rows(p, world), p.n, p.has_c ? 1 : 0};
    case Buf::kUserD: return {d_rows(p, world), p.n, 1};
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
  void signal(Stream st, int peer, Flag f, int round, bool from_sms = false) {
    Step x;
    x.kind = StepKind::kSignal;
    x.stream = st;
    x.peer = peer;
    x.flag = f;
    x.round = round;
    x.from_sms = from_sms;
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

// The rows of A a piece must start on: A stored [K, M] (along M) keeps a piece's rows as a block
// of columns, which starts 16 bytes aligned (cuBLASLt's fast path for the chunk matmul) only on a
// multiple of 16 bytes of elements; rows of an [M, K] A start aligned wherever K's row does.
int64_t piece_unit(const GemmProblem& p) {
  return p.a_layout == ALayout::kKM && p.shard_dim == ShardDim::kM ? 16 / static_cast<int64_t>(dtype_size(p.dtype)) : 1;
}

// Part `part` of `parts` of block `blk` (rows relative to the block, as split_rows gives them),
// each boundary moved to the nearest multiple of piece_unit(p) in the rows of A (blk.begin counts
// from A's first row); pieces may be empty. Every rank splits a block through here, the same way.
RowBlock split_block(const GemmProblem& p, const RowBlock& blk, int parts, int part) {
  const int64_t unit = piece_unit(p);
  if (unit <= 1) return split_rows(blk.rows, parts, part);
  const auto edge = [&](int j) -> int64_t {
    if (j <= 0) return 0;
    if (j >= parts) return blk.rows;
    const int64_t at = blk.begin + blk.rows * j / parts, rounded = (at + unit / 2) / unit * unit;
    return std::clamp<int64_t>(rounded - blk.begin, 0, blk.rows);
  };
  const int64_t b = edge(part), e = edge(part + 1);
  return {b, e - b};
}

// gemm_ar's all-gather of part j (of `parts`) of every rank block, after all the compute stream
// holds so far: tell the peers on stream `st` that this rank's reduced rows of part j are ready,
// wait there for each peer's, and pull them into D on stream `pull` (which may be `st`).
void gather_reduced(Builder& b, const GemmProblem& p, int W, int r, Stream st, Stream pull, int parts, int j) {
  b.join(Stream::kCompute, st);
  for (int s = 1; s < W; ++s) b.signal(st, (r + s) % W, Flag::kReady, j);
  for (int s = 1; s < W; ++s) {
    const int src = (r + s) % W;
    const RowBlock blk = rank_block(p.m, W, src), part = split_block(p, blk, parts, j);
    b.wait_signal(st, src, Flag::kReady, j);
    if (pull != st) b.join(st, pull);
    b.copy(pull, region(Buf::kReduced, src, 0, part.begin, part.rows),
           region(Buf::kUserD, r, 0, blk.begin + part.begin, part.rows));
  }
}

// AllGather + GEMM, rotating A (CUTLASS's AllGather1D_TilingCD_RotatingA; PyTorch async-TP):
// multiply the own shard straight from the caller's A while the copy engine pushes it, chunk by
// chunk, from the caller's A into every peer's gathered buffer, raising the peer's arrival flag
// after each chunk; multiply each peer's shard (r + s) mod W as its chunks' flags rise.
// Pushing from the caller's A, no copy of the shard comes first: a pull needs the shard in
// symmetric memory, and that local copy, queued beside the first matmul, ran as late as the
// matmul's end (every transfer behind it exposed).
Schedule build_ag(const GemmProblem& p, int W, int r, int chunks) {
  Builder b(p, W, r, chunks);  // one sequence number per chunk of a shard
  const int64_t mw = p.m / W;
  if (W == 1) {
    b.gemm(region(Buf::kUserA, r, 0, 0, mw), region(Buf::kUserD, r, 0, 0, mw), p.has_c, false);
    return b.take();
  }
  b.join(Stream::kCompute, Stream::kCopy);  // the call starts after everything before it on the caller's stream
  b.barrier();  // 0: every rank has finished multiplying its gathered rows of the previous call
  const int epoch_bumped = b.record(Stream::kCopy);
  for (int s = 1; s < W; ++s) {  // rank r - s multiplies r's shard at its step s
    const int dest = (r + W - s) % W;
    for (int j = 0; j < chunks; ++j) {
      const RowBlock c = split_block(p, {r * mw, mw}, chunks, j);
      b.copy(region(Buf::kUserA, r, 0, c.begin, c.rows), region(Buf::kGathered, dest, 0, r * mw + c.begin, c.rows));
      b.signal(dest, Flag::kArrive, j);
    }
  }
  // The flag waits run on the gather stream, so that the compute stream waits on events only;
  // the first matmul leaves SMs free (carveout) for them and for barrier 0 beside it. Later
  // matmuls take every SM: a wait still pending then starts as soon as one frees.
  b.wait_event(Stream::kGather, epoch_bumped);  // the waits read this call's sequence numbers
  std::vector<int> landed;
  for (int s = 1; s < W; ++s)
    for (int j = 0; j < chunks; ++j) {
      b.wait_signal(Stream::kGather, (r + s) % W, Flag::kArrive, j);
      landed.push_back(b.record(Stream::kGather));
    }
  b.gemm(region(Buf::kUserA, r, 0, 0, mw), region(Buf::kUserD, r, 0, r * mw, mw), p.has_c, true);
  for (int s = 1, e = 0; s < W; ++s) {
    const int src = (r + s) % W;
    for (int j = 0; j < chunks; ++j) {
      const RowBlock c = split_block(p, {src * mw, mw}, chunks, j);
      const int64_t g = src * mw + c.begin;
      b.wait_event(Stream::kCompute, landed[static_cast<size_t>(e++)]);
      b.gemm(region(Buf::kGathered, r, 0, g, c.rows), region(Buf::kUserD, r, 0, g, c.rows), p.has_c, false);
    }
  }
  b.join(Stream::kCopy, Stream::kCompute);  // the caller may reuse A once its pushes are done
  return b.take();
}

// GEMM + ReduceScatter, rotating C along M (CUTLASS's ReduceScatter1D_TilingA_RotatingC, with
// the copy engine instead of a ring through bf16 outputs): at stage s compute the partial for
// rank (r + s) mod W and push it into that rank's receive slot while the next stage computes;
// the own partial comes last and lands in place; then one kernel sums the W slots in fp32 in
// slot order (bitwise repeatable) and adds beta * C.
// gemm_ar adds, per round, the all-gather of the reduced rows (pulled by every peer).
//
// With direct stores (NOTE [direct stores]) each peer's rows go straight into that peer's slot,
// its flag raised from the SMs; round 0 multiplies the own rows first, beside barrier 0.
Schedule build_rs_ar(const GemmProblem& p, int W, int r, int chunks, bool direct) {
  direct = direct && W > 1;
  const bool ar = p.op == Op::kGemmAr;
  const int rounds = ar ? chunks : 1;
  // Transfers per destination per round; with direct stores a matmul per peer (its pieces would
  // share one flag: more launches, nothing sent sooner).
  const int pieces = ar || direct ? 1 : chunks;
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
  // Rows of rank `dest`'s block this rank multiplies in round j, piece by piece: fn(rows within
  // dest's block, rows within A, how many).
  const auto for_pieces = [&](int dest, int j, const auto& fn) {
    const RowBlock blk = rank_block(p.m, W, dest);
    const RowBlock sub = split_block(p, blk, rounds, j);
    for (int c = 0; c < pieces; ++c) {
      const RowBlock piece = split_block(p, {blk.begin + sub.begin, sub.rows}, pieces, c);
      fn(sub.begin + piece.begin, blk.begin + sub.begin + piece.begin, piece.rows);
    }
  };
  bool first = true;
  for (int j = 0; j < rounds; ++j) {
    const RowBlock mine = rank_block(p.m, W, r);
    const RowBlock own = split_block(p, mine, rounds, j);
    const auto own_gemm = [&] {
      b.gemm(region(Buf::kUserA, r, 0, mine.begin + own.begin, own.rows), region(Buf::kRecv, r, r, own.begin, own.rows),
             false, beside_sync(first, j));
      first = false;
    };
    // Direct stores: round 0's own rows run beside barrier 0, before the stores into peers that
    // must wait for it; later rounds' come last, as staged ones do, so peers' flags rise sooner.
    const bool own_first = direct && j == 0;
    if (own_first) {
      own_gemm();
      b.wait_event(Stream::kCompute, epoch_bumped);  // peers' slots are free, the flags' values set
    }
    for (int s = 1; s < W; ++s) {
      const int dest = (r + s) % W;
      for_pieces(dest, j, [&](int64_t local, int64_t global, int64_t rows) {
        if (direct) {  // (no SMs left beside it in round 0: the own matmul ran beside barrier 0)
          b.gemm(region(Buf::kUserA, r, 0, global, rows), region(Buf::kRecv, dest, r, local, rows), false,
                 beside_sync(false, j));
          return;
        }
        b.gemm(region(Buf::kUserA, r, 0, global, rows), region(Buf::kStage, r, 0, global, rows), false,
               beside_sync(first, j));
        first = false;
        b.join(Stream::kCompute, Stream::kCopy);
        b.copy(region(Buf::kStage, r, 0, global, rows), region(Buf::kRecv, dest, r, local, rows));
      });
      if (direct) b.signal(Stream::kCompute, dest, Flag::kArrive, j, /*from_sms=*/true);
      else b.signal(dest, Flag::kArrive, j);
    }
    if (!own_first) {
      own_gemm();
      if (!direct && j == 0 && W > 1) b.wait_event(Stream::kCompute, epoch_bumped);
    }
    b.reduce(region(Buf::kRecv, r, 0, own.begin, own.rows),
             region(Buf::kUserD, r, 0, ar ? mine.begin + own.begin : own.begin, own.rows), j, ar);
    if (!ar || W == 1) continue;
    gather_reduced(b, p, W, r, Stream::kGather, Stream::kGather, rounds, j);
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
  // Every matmul leaves SMs free: from barrier 0 to the last arrival a flag-wait kernel spins on
  // the gather stream beside it (gemm_ar: its ready flags are raised and waited for there too).
  // With all the SMs, W=2 gemm_rs ran 5-10% slower on the large shapes: the waits then queue
  // behind the matmul's tiles.
  constexpr bool kCarveout = true;
  for (int step = 0; step < W; ++step) {
    // Block r - 1 - step: its sum starts here at step 0 and ends with its owner at step W - 1.
    const int owner = (r + 2 * W - 1 - step) % W;
    const RowBlock blk = rank_block(p.m, W, owner);
    const bool last = step == W - 1;
    // The sum so far of chunk c, pushed by the previous rank into slot `owner`: waited for on the
    // gather stream, an event after each wait.
    std::vector<int> arrived(static_cast<size_t>(chunks), -1);
    const auto await_arrival = [&](int c) {
      b.wait_signal(Stream::kGather, prev, Flag::kArrive, (step - 1) * chunks + c);
      arrived[static_cast<size_t>(c)] = b.record(Stream::kGather);
    };
    if (step > 0) await_arrival(0);
    for (int c = 0; c < chunks; ++c) {
      const RowBlock piece = split_block(p, blk, chunks, c);
      const int64_t global = blk.begin + piece.begin;
      const Region a = region(Buf::kUserA, r, 0, global, piece.rows);
      const Region d = !last ? region(Buf::kStage, r, 0, global, piece.rows)
                       : ar  ? region(Buf::kReduced, r, 0, piece.begin, piece.rows)
                             : region(Buf::kUserD, r, 0, piece.begin, piece.rows);
      if (step == 0) {
        b.gemm(a, d, false, kCarveout);
      } else {
        b.wait_event(Stream::kCompute, arrived[static_cast<size_t>(c)]);
        b.gemm_plus(a, d, region(Buf::kRecv, r, owner, piece.begin, piece.rows), kCarveout);
        // The next chunk's wait goes first on the gather stream, ahead of this chunk's ready
        // flags below, so that the next matmul never waits for them. (Matmul c + 2's wait still
        // sits behind the waits for every peer's ready flag of chunk c: a peer more than a chunk
        // late holds the matmuls back.)
        if (c + 1 < chunks) await_arrival(c + 1);
      }
      if (last) {
        // gemm_ar: the ready flags on the gather stream, the pulls on the copy stream (which
        // pushes no more), so that a pull waits only for the pull before it: the flags behind
        // the pulls added a flag write and a wait kernel's launch between every two.
        if (ar) gather_reduced(b, p, W, r, Stream::kGather, Stream::kCopy, chunks, c);
        continue;
      }
      b.join(Stream::kCompute, Stream::kCopy);
      b.copy(region(Buf::kStage, r, 0, global, piece.rows), region(Buf::kRecv, next, owner, piece.begin, piece.rows));
      b.signal(next, Flag::kArrive, step * chunks + c);
    }
  }
  // gemm_ar: the own reduced rows into the own D, in one copy after the last matmul, beside the
  // last pull. Copied chunk by chunk between the matmuls, the device-local copy ran several times
  // slower beside a matmul than alone and held back the flag waits queued behind it, and where the
  // driver ran it as a copy kernel between two matmuls it delayed the second.
  if (ar) {
    b.join(Stream::kCompute, Stream::kGather);
    b.copy(Stream::kGather, region(Buf::kReduced, r, 0, 0, mine.rows), region(Buf::kUserD, r, 0, mine.begin, mine.rows));
  }
  b.join(Stream::kCopy, Stream::kCompute);
  if (ar) b.join(Stream::kGather, Stream::kCompute);
  return b.take();
}

}  // namespace

bool pipelined_pieces_fit(const GemmProblem& p, int world, int chunks, int64_t unit) {
  const bool ring = partial_as_c_fits(p, world) && chunks >= 2;
  for (int r = 0; r < world; ++r)
    for (const Step& s : build_pipelined(p, world, r, chunks, ring).steps)
      if (s.kind == StepKind::kGemm && (s.src.row0 % unit != 0 || s.src.rows % unit != 0)) return false;
  return true;
}

Schedule build_pipelined(const GemmProblem& p, int world, int rank, int chunks, bool partial_as_c, bool direct_stores) {
  TPGEMM_ASSERT(world >= 1 && rank >= 0 && rank < world && chunks >= 1);
  TPGEMM_ASSERT(!(partial_as_c && direct_stores) && (!direct_stores || direct_stores_fit(p, world)));
  if (partial_as_c) {
    TPGEMM_ASSERT(partial_as_c_fits(p, world) && chunks >= 2);
    return build_ring(p, world, rank, chunks);
  }
  return p.op == Op::kAgGemm ? build_ag(p, world, rank, chunks) : build_rs_ar(p, world, rank, chunks, direct_stores);
}

}  // namespace tpgemm::plan
