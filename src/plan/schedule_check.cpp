// The static checks of a pipelined schedule (check_schedule), which pipelined_ce runs on every
// schedule before it enqueues one, and its steps in words (describe), for errors and tests.
#include <string>
#include <vector>

#include "core/format.h"
#include "plan/problem.h"
#include "plan/schedule.h"

namespace tpgemm::plan {
namespace {

bool region_in_bounds(const Region& x, const GemmProblem& p, int world, int64_t* rows_out) {
  const BufGeometry g = buffer_geometry(x.buf, p, world);
  *rows_out = g.rows;
  return g.slots > 0 && x.slot >= 0 && x.slot < g.slots && x.rank >= 0 && x.rank < world && x.row0 >= 0 &&
         x.rows >= 0 && x.row0 + x.rows <= g.rows;
}

}  // namespace

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
  // NOTE [direct stores]: peers a matmul stored into since their last flag from the SMs (every
  // such store must have a flag behind it on the compute stream; a flag of an empty piece has none
  // before it).
  std::vector<bool> stored_into(static_cast<size_t>(s.world), false);
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
        if (x.src.rank != s.rank) return fail(i, "a matmul reads another rank's memory");
        // NOTE [direct stores]: a matmul may write a peer's symmetric rows, once barrier 0 says
        // the peer is done with them.
        if (x.dst.rank != s.rank && (x.dst.buf != Buf::kRecv || x.dst.slot != s.rank || !after_b0[st]))
          return fail(i, "a matmul writes another rank's memory other than its own receive slot there, or before barrier 0");
        if (x.dst.rank != s.rank) stored_into[static_cast<size_t>(x.dst.rank)] = true;
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
        // (on the compute stream only a flag raised behind a matmul's own stores into that peer)
        if (x.stream == Stream::kCompute && !(x.kind == StepKind::kSignal && x.from_sms))
          return fail(i, "flag step on the compute stream");
        // (only there is it ordered after the matmul's stores)
        if (x.from_sms && (x.kind != StepKind::kSignal || x.stream != Stream::kCompute))
          return fail(i, "flag raised from the SMs off the compute stream");
        if (x.kind == StepKind::kSignal && x.from_sms) stored_into[static_cast<size_t>(x.peer)] = false;
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
  for (int q = 0; q < s.world; ++q)
    if (stored_into[static_cast<size_t>(q)])
      return fail(s.steps.size(), strfmt("a matmul stored into rank %d's slot and no flag from the SMs follows it", q));
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
    case StepKind::kSignal:
      return strfmt("%s: signal %s round %d to rank %d%s", st, fl, x.round, x.peer, x.from_sms ? " (from the SMs)" : "");
    case StepKind::kWaitSignal: return strfmt("%s: wait %s round %d from rank %d", st, fl, x.round, x.peer);
    case StepKind::kReduce: return strfmt("%s: reduce %s -> %s round %d", st, reg(x.src).c_str(), reg(x.dst).c_str(), x.round);
    case StepKind::kAddC: return strfmt("%s: D %s += beta * C", st, reg(x.dst).c_str());
    case StepKind::kRecord: return strfmt("%s: record event %d", st, x.index);
    case StepKind::kWaitEvent: return strfmt("%s: wait event %d", st, x.index);
  }
  return "?";
}

}  // namespace tpgemm::plan
