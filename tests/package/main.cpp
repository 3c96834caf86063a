// Uses an installed tpgemm (tests/check_package.sh): its version and two host-only calls, so that
// it runs without a GPU. Prints "tpgemm <version>" first: the script compares it with the build's.
#include <tpgemm/tpgemm.h>

#include <cstdio>
#include <string>

#define STR2(x) #x
#define STR(x) STR2(x)

int main() {
  std::printf("tpgemm %s\n", TPGEMM_VERSION_STRING);
  // The string and the numbers come from one project(VERSION): they must agree.
  const std::string parts = STR(TPGEMM_VERSION_MAJOR) "." STR(TPGEMM_VERSION_MINOR) "." STR(TPGEMM_VERSION_PATCH);
  if (parts != TPGEMM_VERSION_STRING) {
    std::fprintf(stderr, "version.h: %s != %s\n", parts.c_str(), TPGEMM_VERSION_STRING);
    return 1;
  }

  tpgemm::GemmProblem p;
  p.op = tpgemm::Op::kAgGemm;  // A shard [M/W, K], B [N, K] (nk), D [M, N]
  p.m = 4096;
  p.n = 8192;
  p.k = 1024;
  const int world = 4;
  const tpgemm::OperandSizes s = tpgemm::operand_sizes(p, world);
  const std::string d = tpgemm::describe(p);
  std::printf("%s, W=%d: a=%lld b=%lld c=%lld d=%lld\n", d.c_str(), world, (long long)s.a, (long long)s.b,
              (long long)s.c, (long long)s.d);
  if (s.a != p.m / world * p.k || s.b != p.k * p.n || s.c != 0 || s.d != p.m * p.n ||
      d.rfind("ag_gemm M=4096 N=8192 K=1024", 0) != 0) {
    std::fprintf(stderr, "unexpected operand sizes or description\n");
    return 1;
  }
  return 0;
}
