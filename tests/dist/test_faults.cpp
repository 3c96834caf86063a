// The fault matrix: rank 1 of 2 is killed (SIGKILL, no word to anyone) while the team is made,
// while a plan is built, in the middle of a call of each implementation family, or before
// teardown, under a launcher that does not watch its ranks (as torchrun's workers run: the
// survivor is not stopped for it). Rank 0 must end on its own, with an error where it waited for
// rank 1, within its configured timeout and a stated margin, and its teardown must return. The
// team is made from a unique id the launcher handed out, or (the last test) from the environment
// a torchrun-style launcher sets, through tpgemm's own exchange of the id, with either rank lost.
#include <gtest/gtest.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <csignal>
#include <cstdio>
#include <functional>
#include <string>
#include <thread>

#include "comm/launcher.h"
#include "core/check.h"
#include "core/cuda_raii.h"
#include "core/format.h"
#include "support/dist_harness.h"
#include "support/gpu_env.h"
#include "support/plan_check.h"
#include "testing/problem_data.h"

namespace tpgemm {
namespace {

using Clock = std::chrono::steady_clock;
using testsupport::caught;

// The host bound covers the team's creation too (two NCCL initialisations: NOTE [bounded
// initialisation]), so it leaves room for them.
constexpr int64_t kDeviceTimeoutMs = 1000, kHostTimeoutMs = 8000;
constexpr int kMarginS = 15;  // beyond the timeout that applies: teardown, process start, NCCL

double ms_since(Clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
}

// What the survivor saw: the status its step ended with, and how long until it and its teardown returned.
struct Survivor {
  bool reported = false;
  ErrorCode code = ErrorCode::kOk;
  std::string message;
  double step_ms = 0, total_ms = 0;
  ErrorCode after = ErrorCode::kOk;  // what the survivor's `after` returned, once its team was gone
};

// How the ranks make their team: Team::from_unique_id with an id made before the fork (tpgemm's
// launcher), or Team::from_env from RANK / WORLD_SIZE / LOCAL_RANK / MASTER_ADDR and a port (a
// torchrun-style launcher), rank 0 handing the id to the other over TCP.
enum class Launch { kUniqueId, kEnvironment };

int free_port() {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof(a);
  const bool ok = fd >= 0 && ::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) == 0 &&
                  ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) == 0;
  if (fd >= 0) ::close(fd);
  return ok ? ntohs(a.sin_port) : 29517;
}

// Runs `step` on both ranks of a team made with short timeouts; `step` gets whether it is the
// victim (rank `victim`) and kills it where the case says. The survivor then runs `after`, where
// given, in the same process. The survivor's outcome comes back through a file.
Survivor run_case(bool kill_before_team, const std::function<Status(const Team&, bool victim)>& step,
                  const std::function<Status()>& after = nullptr, Launch launch = Launch::kUniqueId, int victim = 1,
                  TeamOptions::CallCheck call_check = TeamOptions::CallCheck::kLocal) {
  char path[] = "/tmp/tpgemm-fault-XXXXXX";
  const int fd = ::mkstemp(path);
  if (fd < 0) return {};
  ::close(fd);
  ncclUniqueId id;
  TPGEMM_NCCL_CHECK(ncclGetUniqueId(&id));
  const int port = free_port();
  comm::LauncherOptions lo;
  lo.timeout_s = 90;                   // a hang is a failure (a survivor stuck for good)
  lo.stop_peers_on_failure = false;    // the victim's death must not stop the survivor
  comm::run_workers(2, [&](int rank) {
    if (launch == Launch::kEnvironment) {  // what a torchrun-style launcher gives each worker
      ::setenv("RANK", std::to_string(rank).c_str(), 1);
      ::setenv("LOCAL_RANK", std::to_string(rank).c_str(), 1);
      ::setenv("WORLD_SIZE", "2", 1);
      ::setenv("MASTER_ADDR", "127.0.0.1", 1);
      ::setenv("TPGEMM_BOOTSTRAP_PORT", std::to_string(port).c_str(), 1);
      ::setenv("TPGEMM_BOOTSTRAP_TIMEOUT_MS", std::to_string(kHostTimeoutMs).c_str(), 1);
    }
    if (rank == victim && kill_before_team) ::raise(SIGKILL);
    const auto t0 = Clock::now();
    Status s;
    double step_ms = 0;
    s = caught([&] {
      TeamOptions o;
      o.timeout_ms = kDeviceTimeoutMs;
      o.host_timeout_ms = kHostTimeoutMs;
      o.call_check = call_check;
      const Team team = launch == Launch::kEnvironment ? Team::from_env(o) : Team::from_unique_id(id, rank, 2, rank, o);
      const Status inner = step(team, rank == victim);
      step_ms = ms_since(t0);
      throw_if_error(inner);
    });  // the team (and whatever the step left) is torn down here
    if (step_ms == 0) step_ms = ms_since(t0);
    if (rank != victim) {
      const double total_ms = ms_since(t0);
      const Status a = after ? after() : Status::Ok();
      if (!a.ok()) std::fprintf(stderr, "[rank %d] after the fault: %s\n", rank, a.message.c_str());
      std::FILE* f = std::fopen(path, "w");
      std::fprintf(f, "%d %.1f %.1f %d\n%s", static_cast<int>(s.code), step_ms, total_ms, static_cast<int>(a.code),
                   s.message.c_str());
      std::fclose(f);
    }
    return 0;
  }, lo);
  Survivor out;
  if (std::FILE* f = std::fopen(path, "r")) {
    int code = 0, after = 0;
    char buf[4096] = {};
    if (std::fscanf(f, "%d %lf %lf %d\n", &code, &out.step_ms, &out.total_ms, &after) == 4) {
      out.reported = true;
      out.code = static_cast<ErrorCode>(code);
      out.after = static_cast<ErrorCode>(after);
      out.message.assign(buf, std::fread(buf, 1, sizeof(buf) - 1, f));
    }
    std::fclose(f);
  }
  std::remove(path);
  return out;
}

GemmProblem small(Op op, int64_t m = 256) {
  GemmProblem p;
  p.op = op;
  p.m = m, p.n = 512, p.k = 384;
  return p;
}

// Fault (c)'s step: a plan of `impl` built and its data ready on both ranks, the victim killed
// just before its part of the call; the survivor's call, waited for, and its check.
Status killed_in_a_call(const Team& team, bool victim, Op op, Impl impl, int64_t m) {
  PlanOptions o;
  o.impl = impl;
  const GemmProblem p = small(op, m);
  Plan plan(team, p, o);
  Stream stream = Stream::create();
  testing::RankData data(p, 2, team.rank(), 7, stream.get());
  TPGEMM_CUDA_CHECK(cudaStreamSynchronize(stream.get()));
  team.barrier();
  if (victim) ::raise(SIGKILL);
  plan.run(data.operands(), stream.get());
  return caught([&] {
    TPGEMM_CUDA_CHECK(cudaStreamSynchronize(stream.get()));
    team.check();
  });
}

std::string describe(const Survivor& s) {
  return strfmt("reported %d, %s after %.0f ms (teardown done at %.0f ms): %s", s.reported ? 1 : 0,
                std::string(to_string(s.code)).c_str(), s.step_ms, s.total_ms, s.message.c_str());
}

// (a) Rank 1 dies before the team exists: rank 0's NCCL initialisation must not wait for good.
TEST(Faults, ARankKilledBeforeTheTeamIsMadeEndsTheSurvivorsInit) {
  TPGEMM_REQUIRE_GPUS(2);
  const Survivor s = run_case(true, [](const Team&, bool) { return Status::Ok(); });
  std::printf("fault (a) team creation: %s\n", describe(s).c_str());
  EXPECT_TRUE(s.reported && s.code != ErrorCode::kOk) << describe(s);
  EXPECT_LT(s.total_ms, (kHostTimeoutMs + kMarginS * 1000.0)) << describe(s);
}

// (b) Rank 1 dies before a plan's set-up exchange: rank 0's exchange times out (the host bound),
// saying that rank 1's process has exited (NOTE [peer whereabouts]).
TEST(Faults, ARankKilledWhileAPlanIsBuiltEndsTheSurvivorsPlan) {
  TPGEMM_REQUIRE_GPUS(2);
  const Survivor s = run_case(false, [](const Team& team, bool victim) {
    if (victim) ::raise(SIGKILL);
    PlanOptions o;
    o.impl = Impl::kGemmOneShot;
    return caught([&] { Plan plan(team, small(Op::kGemmAr), o); });
  });
  std::printf("fault (b) plan build: %s\n", describe(s).c_str());
  EXPECT_TRUE(s.reported && s.code == ErrorCode::kTimeout && s.message.find("set-up data") != std::string::npos)
      << describe(s);
  EXPECT_TRUE(s.message.find("rank 1 (pid ") != std::string::npos && s.message.find("has exited") != std::string::npos)
      << describe(s);
  EXPECT_LT(s.total_ms, kHostTimeoutMs + kMarginS * 1000.0) << describe(s);
}

// (c) Rank 1 dies at the call (before its part runs: a process takes longer to die than these
// calls take to run): rank 0's bounded waits end in a Timeout naming it, for every family with
// waits of tpgemm's own (the baseline's are NCCL's, which wait as NCCL does: README, "Errors").
TEST(Faults, ARankKilledInACallEndsTheSurvivorsCallNamingIt) {
  TPGEMM_REQUIRE_GPUS(2);
  struct Case { Op op; Impl impl; int64_t m; };
  for (const Case c : {Case{Op::kAgGemm, Impl::kPipelinedCE, 256}, Case{Op::kAgGemm, Impl::kFused, 256},
                       Case{Op::kAgGemm, Impl::kAllGatherGemm, 256}, Case{Op::kGemmRs, Impl::kGemmReduceScatter, 256},
                       Case{Op::kGemmRs, Impl::kFused, 512}, Case{Op::kGemmAr, Impl::kGemmOneShot, 64},
                       Case{Op::kGemmAr, Impl::kFused, 16}}) {
    const std::string what = std::string(to_string(c.op)) + " " + std::string(to_string(c.impl));
    const Survivor s = run_case(false, [&](const Team& team, bool victim) {
      return killed_in_a_call(team, victim, c.op, c.impl, c.m);
    });
    std::printf("fault (c) %s mid-call: %s\n", what.c_str(), describe(s).c_str());
    EXPECT_TRUE(s.reported && s.code == ErrorCode::kTimeout && s.message.find("rank 1") != std::string::npos)
        << what << ": " << describe(s);
    EXPECT_LT(s.total_ms, kDeviceTimeoutMs + kMarginS * 1000.0) << what << ": " << describe(s);
  }
}

// After (c), the survivor's process is still good for tpgemm: a new team (of one: its peer is
// gone) is made and runs a checked plan. NCCL itself allows a new communicator after an abort.
TEST(Faults, ASurvivorMakesANewTeamAfterItsTeamFailed) {
  TPGEMM_REQUIRE_GPUS(2);
  const Survivor s = run_case(
      false,
      [](const Team& team, bool victim) { return killed_in_a_call(team, victim, Op::kGemmAr, Impl::kGemmOneShot, 64); },
      [] {
        return caught([] {
          ncclUniqueId id;
          TPGEMM_NCCL_CHECK(ncclGetUniqueId(&id));
          const Team solo = Team::from_unique_id(id, 0, 1, 0);
          for (Op op : {Op::kAgGemm, Op::kGemmRs, Op::kGemmAr}) {
            const auto c = testsupport::check_plan(solo, small(op), PlanOptions{}, 1, 11);
            if (!c.ok) throw Error(ErrorCode::kInternal, testsupport::describe_check(small(op), PlanOptions{}, c));
          }
        });
      });
  std::printf("fault (c) then a new team: %s; the new team: %s\n", describe(s).c_str(),
              std::string(to_string(s.after)).c_str());
  EXPECT_TRUE(s.reported && s.code == ErrorCode::kTimeout) << describe(s);
  EXPECT_EQ(s.after, ErrorCode::kOk) << describe(s);
}

// With call_check=collective, a rank lost between two calls leaves its peer's next call waiting in
// the host rendezvous: that wait is bounded (a Timeout naming the lost rank) and fails the team,
// whose communicator is then aborted (its NCCL work, if any was stuck, ends; its teardown returns).
TEST(Faults, ARankLostToTheCollectiveCheckFailsTheTeam) {
  TPGEMM_REQUIRE_GPUS(2);
  const Survivor s = run_case(
      false,
      [](const Team& team, bool victim) {
        PlanOptions o;
        o.impl = Impl::kBaseline;
        const GemmProblem p = small(Op::kGemmRs);
        Plan plan(team, p, o);
        Stream stream = Stream::create();
        testing::RankData data(p, 2, team.rank(), 9, stream.get());
        plan.run(data.operands(), stream.get());
        TPGEMM_CUDA_CHECK(cudaStreamSynchronize(stream.get()));
        team.barrier();
        if (victim) ::raise(SIGKILL);
        const Status second = caught([&] { plan.run(data.operands(), stream.get()); });
        if (second.code == ErrorCode::kTimeout && team.comm() != nullptr)
          return Status{ErrorCode::kInternal, "the rendezvous timed out but the team's communicator was not aborted: " +
                                                  second.message};
        return second;
      },
      nullptr, Launch::kUniqueId, 1, TeamOptions::CallCheck::kCollective);
  std::printf("fault: a rank lost to the collective check: %s\n", describe(s).c_str());
  EXPECT_TRUE(s.reported && s.code == ErrorCode::kTimeout && s.message.find("rank 1") != std::string::npos)
      << describe(s);
  EXPECT_LT(s.total_ms, kHostTimeoutMs + kMarginS * 1000.0) << describe(s);
}

// (d) Rank 1 dies after a good call, before teardown: rank 0's teardown (plan, team) returns.
TEST(Faults, ARankKilledBeforeTeardownLeavesTheSurvivorsTeardownBounded) {
  TPGEMM_REQUIRE_GPUS(2);
  const Survivor s = run_case(false, [](const Team& team, bool victim) {
    PlanOptions o;
    o.impl = Impl::kGemmOneShot;
    const GemmProblem p = small(Op::kGemmAr, 64);
    Plan plan(team, p, o);
    Stream stream = Stream::create();
    testing::RankData data(p, 2, team.rank(), 8, stream.get());
    plan.run(data.operands(), stream.get());
    TPGEMM_CUDA_CHECK(cudaStreamSynchronize(stream.get()));
    team.barrier();
    if (victim) ::raise(SIGKILL);
    std::this_thread::sleep_for(std::chrono::milliseconds(500));  // rank 1 is gone by now
    return Status::Ok();
  });
  std::printf("fault (d) teardown: %s\n", describe(s).c_str());
  EXPECT_TRUE(s.reported) << describe(s);
  EXPECT_LT(s.total_ms, kMarginS * 1000.0) << describe(s);
}

// The matrix's team-level cases again with the team made from the environment (Team::from_env),
// as under torchrun, whose agent does not stop the survivors before its monitor sees the death:
// (a) either rank dies before the team exists: the survivor's exchange of the unique id (rank 0
// serves it, rank 1 fetches it) or NCCL's initialisation ends in an error naming the lost rank;
// (b) a rank dies while a plan is built; (c) in a fused call; (d) before teardown.
TEST(Faults, UnderAnEnvironmentLauncherEverySurvivorEndsNamingTheLostRank) {
  TPGEMM_REQUIRE_GPUS(2);
  for (int victim : {1, 0}) {
    const Survivor s = run_case(true, [](const Team&, bool) { return Status::Ok(); }, nullptr, Launch::kEnvironment, victim);
    std::printf("fault (a) environment launch, rank %d lost: %s\n", victim, describe(s).c_str());
    const std::string v = std::to_string(victim);  // "rank 0 ..." or "ranks [1] ..."
    const bool named = s.message.find("rank " + v) != std::string::npos || s.message.find("ranks [" + v) != std::string::npos;
    EXPECT_TRUE(s.reported && s.code != ErrorCode::kOk && named) << "rank " << victim << " lost: " << describe(s);
    EXPECT_LT(s.total_ms, kHostTimeoutMs + kMarginS * 1000.0) << describe(s);
  }
  const Survivor b = run_case(false, [](const Team& team, bool victim) {
    if (victim) ::raise(SIGKILL);
    PlanOptions o;
    o.impl = Impl::kGemmOneShot;
    return caught([&] { Plan plan(team, small(Op::kGemmAr), o); });
  }, nullptr, Launch::kEnvironment);
  std::printf("fault (b) environment launch, plan build: %s\n", describe(b).c_str());
  EXPECT_TRUE(b.reported && b.code == ErrorCode::kTimeout) << describe(b);
  EXPECT_LT(b.total_ms, kHostTimeoutMs + kMarginS * 1000.0) << describe(b);
  const Survivor c = run_case(false, [](const Team& team, bool victim) {
    return killed_in_a_call(team, victim, Op::kAgGemm, Impl::kFused, 256);
  }, nullptr, Launch::kEnvironment);
  std::printf("fault (c) environment launch, ag_gemm fused mid-call: %s\n", describe(c).c_str());
  EXPECT_TRUE(c.reported && c.code == ErrorCode::kTimeout && c.message.find("rank 1") != std::string::npos) << describe(c);
  EXPECT_LT(c.total_ms, kDeviceTimeoutMs + kMarginS * 1000.0) << describe(c);
  const Survivor d = run_case(false, [](const Team& team, bool victim) {
    team.barrier();
    if (victim) ::raise(SIGKILL);
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
    return Status::Ok();
  }, nullptr, Launch::kEnvironment);
  std::printf("fault (d) environment launch, teardown: %s\n", describe(d).c_str());
  EXPECT_TRUE(d.reported) << describe(d);
  EXPECT_LT(d.total_ms, kMarginS * 1000.0) << describe(d);
}

}  // namespace
}  // namespace tpgemm
