#include "support/dist_harness.h"

#include <nccl.h>

#include "comm/launcher.h"
#include "comm/timeout.h"
#include "core/check.h"

namespace tpgemm::testsupport {

int& rank_failures() {
  static int n = 0;
  return n;
}
int& current_rank() {
  static int r = -1;
  return r;
}

Status caught(const std::function<void()>& fn) {
  try {
    fn();
  } catch (const Error& e) {
    return {e.code(), e.what()};
  }
  return Status::Ok();
}

int run_on_ranks(int world, const std::function<void(const Team&)>& body, const TeamOptions& options, int limit_s) {
  ncclUniqueId id;
  TPGEMM_NCCL_CHECK(ncclGetUniqueId(&id));
  comm::LauncherOptions lo;
  lo.timeout_s = limit_s;  // a hang is a failure, not a stuck CI job
  return comm::run_workers(world, [&](int rank) {
    current_rank() = rank;
    rank_failures() = 0;
    // The error tests check that every rank hears of one rank's bad call: the collective
    // per-call check, unless a test asks for another.
    TeamOptions o = options;
    if (o.call_check == TeamOptions::CallCheck::kDefault) o.call_check = TeamOptions::CallCheck::kCollective;
    o.timeout_ms = comm::in_step_timeout_ms(o.timeout_ms);  // (the tests' ranks run in step)
    const Team team = Team::from_unique_id(id, rank, world, rank, o);
    body(team);
    std::fflush(stderr);
    return rank_failures() == 0 ? 0 : 1;
  }, lo);
}

}  // namespace tpgemm::testsupport
