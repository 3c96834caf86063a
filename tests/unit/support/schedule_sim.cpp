#include "support/schedule_sim.h"

#include <chrono>
#include <cmath>
#include <algorithm>
#include <condition_variable>
#include <map>
#include <mutex>
#include <random>
#include <stdexcept>
#include <thread>

#include "core/format.h"
#include "plan/problem.h"

namespace tpgemm::sim {
namespace {

using plan::Buf;
using plan::Region;
using plan::Step;
using plan::StepKind;
using Clock = std::chrono::steady_clock;

struct Abort {};  // thrown inside a stream thread once any thread has failed

bool internal(Buf b) { return b != Buf::kUserA && b != Buf::kUserC && b != Buf::kUserD; }

float value(uint64_t seed, uint64_t i) {
  std::mt19937_64 g(seed * 0x9e3779b97f4a7c15ull + i);
  return static_cast<float>(static_cast<int>(g() % 17) - 8) / 8.0f;  // small exact values
}

class Sim {
 public:
  // Call i of problem ps[i] runs schedules sched[i] (one per rank); the calls differ in M at most.
  Sim(const std::vector<GemmProblem>& ps, const std::vector<std::vector<plan::Schedule>>& sched, const SimOptions& o)
      : p_(ps.at(0)), ps_(ps), sched_(sched), o_(o), W_(static_cast<int>(sched.at(0).size())), calls_(static_cast<int>(ps.size())),
        ranks_(static_cast<size_t>(W_)) {
    for (int r = 0; r < W_; ++r) init_rank(r);
    count_planned_reads();
  }

  std::string run() {
    std::vector<std::thread> threads;
    for (int r = 0; r < W_; ++r)
      for (int st = 0; st < plan::kNumStreams; ++st) threads.emplace_back([this, r, st] { stream_thread(r, static_cast<plan::Stream>(st)); });
    for (auto& t : threads) t.join();
    if (!error_.empty()) return error_;
    return check_results();
  }

 private:
  struct RankState {
    std::vector<float> buf[plan::kNumBufs];     // internal buffers
    std::vector<int> tag[plan::kNumBufs];       // per row unit: the call that last wrote it (-1: never)
    std::vector<int> reads[plan::kNumBufs];     // reads the current version has had
    std::vector<std::vector<int>> planned[plan::kNumBufs];  // [call][unit]: the reads a version written in that call must get
    std::vector<std::vector<float>> a, c, d;    // user buffers, one per call
    std::vector<float> b;
    std::vector<uint64_t> barrier_flags, family_flags;  // [index][source]
    uint64_t epoch = 0;
    std::vector<uint64_t> seq;
    std::map<std::pair<int, int>, bool> recorded;  // (call, event)
  };

  // Buffer b as call `call` lays it out. Along M a row unit has the same columns in every call, so
  // unit u is the same memory whatever the call's M: the hazard tags carry over between calls.
  plan::BufGeometry geo(Buf b, int call) const { return plan::buffer_geometry(b, ps_[static_cast<size_t>(call)], W_); }

  void init_rank(int r) {
    RankState& s = ranks_[r];
    for (int b = 0; b < plan::kNumBufs; ++b) {
      if (!internal(static_cast<Buf>(b))) continue;
      size_t units = 0;  // the largest call's
      for (int call = 0; call < calls_; ++call) {
        const plan::BufGeometry g = geo(static_cast<Buf>(b), call);
        units = std::max(units, static_cast<size_t>(g.slots * p_.l * g.rows));
        if (g.slots > 0 && geo(static_cast<Buf>(b), 0).slots > 0 && g.cols != geo(static_cast<Buf>(b), 0).cols)
          throw std::invalid_argument("the calls' buffers differ in columns");
      }
      s.buf[b].assign(units * static_cast<size_t>(geo(static_cast<Buf>(b), 0).cols), NAN);
      s.tag[b].assign(units, -1);
      s.reads[b].assign(units, 0);
      s.planned[b].assign(static_cast<size_t>(calls_), std::vector<int>(units, 0));
    }
    for (int call = 0; call < calls_; ++call) {
      const auto ga = geo(Buf::kUserA, call), gd = geo(Buf::kUserD, call);
      std::vector<float> a(static_cast<size_t>(p_.l * ga.rows * ga.cols));
      for (size_t i = 0; i < a.size(); ++i) a[i] = value(o_.seed + 7919u * call + 104729u * r, i);
      s.a.push_back(std::move(a));
      std::vector<float> c(static_cast<size_t>(p_.has_c ? p_.l * gd.rows * gd.cols : 0));
      for (size_t i = 0; i < c.size(); ++i) c[i] = value(o_.seed + 31u + 7919u * call + 104729u * r, i);
      s.c.push_back(std::move(c));
      s.d.emplace_back(static_cast<size_t>(p_.l * gd.rows * gd.cols), NAN);  // poisoned
    }
    s.b.resize(static_cast<size_t>(p_.l * p_.k * p_.n));
    for (size_t i = 0; i < s.b.size(); ++i) s.b[i] = value(o_.seed + 17u + 104729u * r, i);
    int barriers = 1;
    for (int call = 0; call < calls_; ++call) {
      const plan::Schedule& sc = sched_[static_cast<size_t>(call)][static_cast<size_t>(r)];
      barriers = std::max(barriers, sc.num_barriers);
      if (sc.rounds != sched_[0][static_cast<size_t>(r)].rounds)
        throw std::invalid_argument("the calls' schedules differ in rounds: their sequence numbers would not follow");
    }
    s.barrier_flags.assign(static_cast<size_t>(barriers * W_), 0);
    s.family_flags.assign(static_cast<size_t>(plan::kNumFlags * W_), 0);
    s.seq.assign(static_cast<size_t>(sched_[0][static_cast<size_t>(r)].rounds), 0);
  }

  size_t unit(Buf b, int slot, int64_t batch, int64_t row, int call) const {
    const auto g = geo(b, call);
    return static_cast<size_t>((slot * p_.l + batch) * g.rows + row);
  }

  template <typename F>
  void for_units(const Region& r, int call, F&& f) const {
    for (int64_t batch = 0; batch < p_.l; ++batch)
      for (int64_t i = 0; i < r.rows; ++i) f(unit(r.buf, r.slot, batch, r.row0 + i, call), batch, r.row0 + i);
  }

  void count_planned_reads() {
    for (int call = 0; call < calls_; ++call)
      for (int r = 0; r < W_; ++r) {
        const auto plan_read = [&](const Region& x) {
          for_units(x, call, [&](size_t u, int64_t, int64_t) { ++ranks_[x.rank].planned[static_cast<int>(x.buf)][call][u]; });
        };
        for (const Step& s : sched_[static_cast<size_t>(call)][static_cast<size_t>(r)].steps) {
          if ((s.kind == StepKind::kGemm || s.kind == StepKind::kCopy) && internal(s.src.buf)) plan_read(s.src);
          if (s.kind == StepKind::kGemm && s.has_addend) plan_read(s.addend);
          if (s.kind == StepKind::kReduce)
            for (int slot = 0; slot < W_; ++slot) {
              Region x = s.src;
              x.slot = slot;
              x.rank = r;
              plan_read(x);
            }
        }
      }
  }

  [[noreturn]] void fail(const std::string& why) {
    if (error_.empty()) error_ = why;
    cv_.notify_all();
    throw Abort{};
  }

  // Pointer to row `row` of batch `batch` of region r's buffer in rank `r.rank`, for call `call`.
  float* row_ptr(const Region& r, int call, int64_t batch, int64_t row) {
    RankState& s = ranks_[r.rank];
    const auto g = geo(r.buf, call);
    std::vector<float>* v = nullptr;
    switch (r.buf) {
      case Buf::kUserA: v = &s.a[call]; break;
      case Buf::kUserC: v = &s.c[call]; break;
      case Buf::kUserD: v = &s.d[call]; break;
      default: v = &s.buf[static_cast<int>(r.buf)];
    }
    return v->data() + ((r.slot * p_.l + batch) * g.rows + row) * g.cols;
  }

  void note_read(const Region& r, int call, const std::string& who) {
    if (!internal(r.buf)) return;
    RankState& s = ranks_[r.rank];
    const int b = static_cast<int>(r.buf);
    for_units(r, call, [&](size_t u, int64_t batch, int64_t row) {
      if (s.tag[b][u] != call)
        fail(strfmt("%s (call %d) reads %s@%d slot %d batch %lld row %lld, which was last written in call %d", who.c_str(),
                    call, std::string(plan::to_string(r.buf)).c_str(), r.rank, r.slot, (long long)batch, (long long)row,
                    s.tag[b][u]));
      ++s.reads[b][u];
    });
  }

  void note_write(const Region& r, int call, const std::string& who) {
    if (!internal(r.buf)) return;
    RankState& s = ranks_[r.rank];
    const int b = static_cast<int>(r.buf);
    for_units(r, call, [&](size_t u, int64_t batch, int64_t row) {
      const int planned = s.tag[b][u] >= 0 ? s.planned[b][static_cast<size_t>(s.tag[b][u])][u] : 0;
      if (s.tag[b][u] >= 0 && s.reads[b][u] < planned)
        fail(strfmt("%s (call %d) overwrites %s@%d slot %d batch %lld row %lld (written in call %d) after %d of its %d "
                    "planned reads", who.c_str(), call, std::string(plan::to_string(r.buf)).c_str(), r.rank, r.slot,
                    (long long)batch, (long long)row, s.tag[b][u], s.reads[b][u], planned));
      s.tag[b][u] = call;
      s.reads[b][u] = 0;
    });
  }

  // Blocks (releasing the lock) until pred() holds; a deadlock past the timeout is an error.
  template <typename Pred>
  void wait(std::unique_lock<std::mutex>& lk, Pred pred, const std::string& what) {
    const auto deadline = Clock::now() + std::chrono::milliseconds(o_.wait_timeout_ms);
    while (!pred()) {
      if (!error_.empty()) throw Abort{};
      if (cv_.wait_until(lk, deadline) == std::cv_status::timeout && !pred())
        fail("deadlock: " + what + strfmt(" waited %d ms", o_.wait_timeout_ms));
    }
  }

  void execute(int r, const Step& s, int call, std::unique_lock<std::mutex>& lk) {
    RankState& me = ranks_[r];
    const std::string who = strfmt("rank %d step '%s'", r, plan::describe(s).c_str());
    switch (s.kind) {
      case StepKind::kRecord: me.recorded[{call, s.index}] = true; break;
      case StepKind::kWaitEvent:
        wait(lk, [&] { return me.recorded.count({call, s.index}) > 0; }, who);
        break;
      case StepKind::kBarrier: {
        if (s.index == 0) {
          me.epoch += 1;
          for (int j = 0; j < static_cast<int>(me.seq.size()); ++j) me.seq[j] = (me.epoch - 1) * me.seq.size() + j + 1;
        }
        const uint64_t v = me.epoch;
        for (int q = 0; q < W_; ++q)
          if (q != r) ranks_[q].barrier_flags[static_cast<size_t>(s.index * W_ + r)] = v;
        if (s.index == 0 && !o_.barrier0_waits) break;
        for (int q = 0; q < W_; ++q)
          if (q != r) wait(lk, [&] { return me.barrier_flags[static_cast<size_t>(s.index * W_ + q)] >= v; }, who);
        break;
      }
      case StepKind::kSignal:
        ranks_[s.peer].family_flags[static_cast<size_t>(static_cast<int>(s.flag) * W_ + r)] = me.seq[s.round];
        break;
      case StepKind::kWaitSignal: {
        const uint64_t v = me.seq[s.round];
        wait(lk, [&] { return me.family_flags[static_cast<size_t>(static_cast<int>(s.flag) * W_ + s.peer)] >= v; }, who);
        break;
      }
      case StepKind::kGemm: {
        note_read(s.src, call, who);
        if (s.has_addend) note_read(s.addend, call, who);
        note_write(s.dst, call, who);
        for (int64_t batch = 0; batch < p_.l; ++batch)
          for (int64_t i = 0; i < s.src.rows; ++i) {
            const float* a = row_ptr(s.src, call, batch, s.src.row0 + i);
            float* d = row_ptr(s.dst, call, batch, s.dst.row0 + i);
            const float* c = s.add_c && p_.has_c ? row_ptr(Region{Buf::kUserC, r, 0, 0, 0}, call, batch, s.dst.row0 + i) : nullptr;
            const float* add = s.has_addend ? row_ptr(s.addend, call, batch, s.addend.row0 + i) : nullptr;
            for (int64_t j = 0; j < p_.n; ++j) {
              double acc = 0;
              for (int64_t k = 0; k < p_.k; ++k) acc += double(a[k]) * b_at(r, batch, k, j);
              d[j] = static_cast<float>(p_.alpha * acc + (c ? p_.beta * c[j] : 0.0) + (add ? add[j] : 0.0));
            }
          }
        break;
      }
      case StepKind::kCopy: {
        note_read(s.src, call, who);
        note_write(s.dst, call, who);
        const int64_t cols = geo(s.src.buf, call).cols;
        for (int64_t batch = 0; batch < p_.l; ++batch)
          for (int64_t i = 0; i < s.src.rows; ++i)
            std::copy_n(row_ptr(s.src, call, batch, s.src.row0 + i), cols, row_ptr(s.dst, call, batch, s.dst.row0 + i));
        break;
      }
      case StepKind::kAddC:
        for (int64_t batch = 0; batch < p_.l; ++batch)
          for (int64_t i = 0; i < s.dst.rows; ++i) {
            float* d = row_ptr(s.dst, call, batch, s.dst.row0 + i);
            const float* c = row_ptr(Region{Buf::kUserC, r, 0, 0, 0}, call, batch, s.dst.row0 + i);
            for (int64_t j = 0; j < p_.n; ++j) d[j] += p_.beta * c[j];
          }
        break;
      case StepKind::kReduce: {
        const uint64_t v = me.seq[s.round];
        for (int q = 0; q < W_; ++q)
          if (q != r)
            wait(lk, [&] { return me.family_flags[static_cast<size_t>(static_cast<int>(plan::Flag::kArrive) * W_ + q)] >= v; }, who);
        for (int slot = 0; slot < W_; ++slot) {
          Region x = s.src;
          x.slot = slot;
          note_read(x, call, who);
        }
        Region red{Buf::kReduced, r, 0, s.src.row0, s.src.rows};
        if (s.to_reduced && W_ > 1) note_write(red, call, who);
        for (int64_t batch = 0; batch < p_.l; ++batch)
          for (int64_t i = 0; i < s.src.rows; ++i) {
            float* d = row_ptr(s.dst, call, batch, s.dst.row0 + i);
            const float* c = p_.has_c ? row_ptr(Region{Buf::kUserC, r, 0, 0, 0}, call, batch, s.dst.row0 + i) : nullptr;
            for (int64_t j = 0; j < p_.n; ++j) {
              double acc = 0;
              for (int slot = 0; slot < W_; ++slot) {
                Region x = s.src;
                x.slot = slot;
                acc += row_ptr(x, call, batch, s.src.row0 + i)[j];
              }
              if (s.to_reduced && W_ > 1) row_ptr(red, call, batch, s.src.row0 + i)[j] = static_cast<float>(acc);
              d[j] = static_cast<float>(acc + (c ? p_.beta * c[j] : 0.0));
            }
          }
        break;
      }
    }
  }

  float b_at(int r, int64_t batch, int64_t k, int64_t j) const {
    const auto& b = ranks_[r].b;
    const int64_t base = batch * p_.k * p_.n;
    return p_.b_layout == BLayout::kKN ? b[static_cast<size_t>(base + k * p_.n + j)] : b[static_cast<size_t>(base + j * p_.k + k)];
  }

  void stream_thread(int r, plan::Stream stream) {
    std::mt19937 rng(static_cast<uint32_t>(o_.seed * 131 + r * 7 + static_cast<int>(stream)));
    try {
      for (int call = 0; call < calls_; ++call)
        for (const Step& s : sched_[static_cast<size_t>(call)][static_cast<size_t>(r)].steps) {
          if (s.stream != stream) continue;
          int delay = o_.max_delay_us > 0 ? static_cast<int>(rng() % static_cast<uint32_t>(o_.max_delay_us)) : 0;
          if (r == o_.slow_rank) delay += 2000;
          if (r == o_.slow_matmul_rank && s.kind == StepKind::kGemm) delay += o_.slow_matmul_us;
          if (delay > 0) std::this_thread::sleep_for(std::chrono::microseconds(delay));
          std::unique_lock<std::mutex> lk(mu_);
          if (!error_.empty()) return;
          execute(r, s, call, lk);
          cv_.notify_all();
        }
    } catch (const Abort&) {
    }
  }

  // Every call's D against the full product computed here from the same data.
  std::string check_results() {
    for (int call = 0; call < calls_; ++call)
      for (int r = 0; r < W_; ++r) {
        const GemmProblem& p = ps_[static_cast<size_t>(call)];
        const int64_t mw = p.m / W_;
        const auto gd = geo(Buf::kUserD, call);
        for (int64_t batch = 0; batch < p_.l; ++batch)
          for (int64_t i = 0; i < gd.rows; ++i)
            for (int64_t j = 0; j < p_.n; ++j) {
              double want = 0;
              if (p_.op == Op::kAgGemm) {
                const int owner = static_cast<int>(i / mw);
                const float* a = ranks_[owner].a[call].data() + (batch * mw + (i - owner * mw)) * p_.k;
                for (int64_t k = 0; k < p_.k; ++k) want += double(a[k]) * b_at(r, batch, k, j);
                want *= p_.alpha;
              } else {
                const int64_t gi = p_.op == Op::kGemmRs ? r * mw + i : i;
                for (int q = 0; q < W_; ++q) {
                  const float* a = ranks_[q].a[call].data() + (batch * p.m + gi) * p_.k;
                  for (int64_t k = 0; k < p_.k; ++k) want += p_.alpha * double(a[k]) * b_at(q, batch, k, j);
                }
              }
              if (p_.has_c) want += p_.beta * ranks_[r].c[call][static_cast<size_t>((batch * gd.rows + i) * p_.n + j)];
              const float got = ranks_[r].d[call][static_cast<size_t>((batch * gd.rows + i) * p_.n + j)];
              if (!(std::fabs(got - want) <= 1e-3 * (1.0 + std::fabs(want))))
                return strfmt("call %d rank %d: D[%lld][%lld][%lld] = %g, expected %g", call, r, (long long)batch, (long long)i,
                              (long long)j, got, want);
            }
      }
    return "";
  }

  const GemmProblem p_;  // what the calls share (all but M)
  const std::vector<GemmProblem> ps_;
  const std::vector<std::vector<plan::Schedule>>& sched_;
  const SimOptions o_;
  const int W_, calls_;
  std::vector<RankState> ranks_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::string error_;
};

}  // namespace

std::string simulate(const GemmProblem& p, const std::vector<plan::Schedule>& per_rank, const SimOptions& opt) {
  const std::vector<std::vector<plan::Schedule>> calls(static_cast<size_t>(opt.calls), per_rank);
  return Sim(std::vector<GemmProblem>(static_cast<size_t>(opt.calls), p), calls, opt).run();
}

std::string simulate_calls(const GemmProblem& p, const std::vector<int64_t>& ms, int world, int chunks, const SimOptions& opt,
                           bool partial_as_c, bool direct_stores) {
  std::vector<GemmProblem> ps;
  std::vector<std::vector<plan::Schedule>> calls;
  for (int64_t m : ms) {
    GemmProblem q = p;
    q.m = m;
    ps.push_back(q);
    calls.emplace_back();
    for (int r = 0; r < world; ++r) calls.back().push_back(plan::build_pipelined(q, world, r, chunks, partial_as_c, direct_stores));
  }
  return Sim(ps, calls, opt).run();
}

std::string simulate_pipelined(const GemmProblem& p, int world, int chunks, const SimOptions& opt, bool direct_stores) {
  std::vector<plan::Schedule> s;
  for (int r = 0; r < world; ++r) s.push_back(plan::build_pipelined(p, world, r, chunks, false, direct_stores));
  return simulate(p, s, opt);
}

}  // namespace tpgemm::sim
