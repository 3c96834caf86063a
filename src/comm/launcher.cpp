#include "comm/launcher.h"

#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <exception>
#include <thread>
#include <vector>

namespace tpgemm::comm {
namespace {

using Clock = std::chrono::steady_clock;

int exit_code(int status) {
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return 1;
}

void stop_all(const std::vector<pid_t>& pids, const std::vector<bool>& done, int grace_s) {
  for (size_t i = 0; i < pids.size(); ++i)
    if (!done[i]) ::kill(pids[i], SIGTERM);
  const auto deadline = Clock::now() + std::chrono::seconds(grace_s);
  std::vector<bool> gone = done;
  while (Clock::now() < deadline) {
    bool all = true;
    for (size_t i = 0; i < pids.size(); ++i) {
      int st = 0;
      if (!gone[i] && ::waitpid(pids[i], &st, WNOHANG) == pids[i]) gone[i] = true;
      all = all && gone[i];
    }
    if (all) return;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  for (size_t i = 0; i < pids.size(); ++i)
    if (!gone[i]) {
      ::kill(pids[i], SIGKILL);
      int st = 0;
      ::waitpid(pids[i], &st, 0);
    }
}

}  // namespace

int run_workers(int world, const std::function<int(int rank)>& worker, const LauncherOptions& options) {
  std::fflush(stdout);
  std::fflush(stderr);
  const pid_t parent = ::getpid();
  std::vector<pid_t> pids;
  for (int r = 0; r < world; ++r) {
    const pid_t pid = ::fork();
    if (pid < 0) {
      std::perror("tpgemm launcher: fork");
      stop_all(pids, std::vector<bool>(pids.size(), false), options.grace_s);
      return 1;
    }
    if (pid == 0) {
      ::prctl(PR_SET_PDEATHSIG, SIGKILL);
      if (::getppid() != parent) ::_exit(1);  // the parent died before prctl took effect
      int rc = 1;
      try {
        rc = worker(r);
      } catch (const std::exception& e) {
        std::fprintf(stderr, "[rank %d] %s\n", r, e.what());
      } catch (...) {
        std::fprintf(stderr, "[rank %d] unknown exception\n", r);
      }
      std::fflush(stdout);
      std::fflush(stderr);
      ::_exit(rc);
    }
    pids.push_back(pid);
  }
  std::vector<bool> done(pids.size(), false);
  int first_failure = 0;
  size_t finished = 0;
  const auto deadline = Clock::now() + std::chrono::seconds(options.timeout_s);
  while (finished < pids.size()) {
    bool progressed = false;
    for (size_t i = 0; i < pids.size(); ++i) {
      int st = 0;
      if (done[i] || ::waitpid(pids[i], &st, WNOHANG) != pids[i]) continue;
      done[i] = true;
      ++finished;
      progressed = true;
      const int code = exit_code(st);
      if (code != 0 && first_failure == 0) {
        first_failure = code;
        if (!options.stop_peers_on_failure) {
          std::fprintf(stderr, "tpgemm launcher: rank %zu failed (exit code %d); the others go on\n", i, code);
          continue;
        }
        std::fprintf(stderr, "tpgemm launcher: rank %zu failed (exit code %d); stopping the other ranks\n", i, code);
        stop_all(pids, done, options.grace_s);
        return first_failure;
      }
    }
    if (options.timeout_s > 0 && Clock::now() > deadline) {
      std::fprintf(stderr, "tpgemm launcher: workers still running after %d s; stopping them\n", options.timeout_s);
      stop_all(pids, done, options.grace_s);
      return 124;
    }
    if (!progressed) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return first_failure;
}

}  // namespace tpgemm::comm
