#include "bench/random_shapes.h"

#include <algorithm>
#include <cmath>
#include <random>

namespace tpgemm::bench {
namespace {

// Log-uniform integer in [lo, hi].
int64_t log_uniform(std::mt19937_64& rng, int64_t lo, int64_t hi) {
  std::uniform_real_distribution<double> u(std::log(static_cast<double>(lo)), std::log(static_cast<double>(hi) + 1.0));
  return std::clamp<int64_t>(static_cast<int64_t>(std::exp(u(rng))), lo, hi);
}

// A multiple of 8 up to `hi`; odd multiples when `odd`.
int64_t multiple_of_8(std::mt19937_64& rng, int64_t hi, bool odd) {
  int64_t units = log_uniform(rng, 1, hi / 8);
  if (odd && units % 2 == 0) units = units + 1 <= hi / 8 ? units + 1 : units - 1;
  return 8 * std::max<int64_t>(units, 1);
}

}  // namespace

std::vector<RandomShape> draw_shapes(const std::vector<Op>& ops, const ShapeDraw& d) {
  std::mt19937_64 rng(d.seed);
  std::vector<RandomShape> out;
  for (Op op : ops)
    for (int i = 0; i < d.per_op; ++i) {
      RandomShape s;
      s.op = op;
      do {
        const int64_t unit = op == Op::kGemmAr ? 1 : d.world;
        s.m = unit * log_uniform(rng, 1, std::max<int64_t>(1, d.max_m / unit));
        s.n = multiple_of_8(rng, d.max_nk, i % 2 == 1);
        s.k = multiple_of_8(rng, d.max_nk, i % 4 >= 2);
      } while (s.m * s.n * s.k > d.max_macs);
      out.push_back(s);
    }
  return out;
}

}  // namespace tpgemm::bench
