#include "comm/gpu_count.h"

#include <cuda_runtime_api.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>

namespace tpgemm::comm {

GpuCount count_gpus_in_child() {
  struct Answer {
    int count;
    char error[200];
  } ans{};
  int fds[2];
  if (::pipe(fds) != 0) return {0, "pipe() failed"};
  std::fflush(stdout);
  const pid_t pid = ::fork();
  if (pid < 0) {
    ::close(fds[0]);
    ::close(fds[1]);
    return {0, "fork() failed"};
  }
  if (pid == 0) {
    ::close(fds[0]);
    int n = 0;
    const cudaError_t e = cudaGetDeviceCount(&n);
    ans.count = e == cudaSuccess ? n : 0;
    if (e != cudaSuccess) std::snprintf(ans.error, sizeof(ans.error), "%s", cudaGetErrorString(e));
    else if (n == 0) std::snprintf(ans.error, sizeof(ans.error), "no CUDA device is visible");
    const ssize_t w = ::write(fds[1], &ans, sizeof(ans));
    ::_exit(w == static_cast<ssize_t>(sizeof(ans)) ? 0 : 1);
  }
  ::close(fds[1]);
  size_t got = 0;
  while (got < sizeof(ans)) {
    const ssize_t k = ::read(fds[0], reinterpret_cast<char*>(&ans) + got, sizeof(ans) - got);
    if (k <= 0) break;
    got += static_cast<size_t>(k);
  }
  ::close(fds[0]);
  int st = 0;
  ::waitpid(pid, &st, 0);
  if (got != sizeof(ans)) return {0, "the CUDA probe process died (a broken driver install?)"};
  ans.error[sizeof(ans.error) - 1] = '\0';
  return {ans.count, ans.error};
}

}  // namespace tpgemm::comm
