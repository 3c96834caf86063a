#include "bench/random_shapes.h"

#include <algorithm>
#include <cmath>
#include <random>

namespace tpgemm::bench {
namespace {

// Uniform in [lo, hi).
double uniform(std::mt19937_64& rng, double lo, double hi) { return std::uniform_real_distribution<double>(lo, hi)(rng); }

// `x` rounded to a multiple of `unit`, at least one unit; odd multiples when `odd`.
int64_t round_to(double x, int64_t unit, bool odd) {
  int64_t units = std::max<int64_t>(1, std::llround(x / static_cast<double>(unit)));
  if (odd && units % 2 == 0) units += 1;
  return units * unit;
}

}  // namespace

std::vector<RandomShape> draw_shapes(const std::vector<Op>& ops, const ShapeDraw& d) {
  std::mt19937_64 rng(d.seed);
  std::vector<RandomShape> out;
  const double max_work =
      std::min(std::log(static_cast<double>(d.max_macs)),
               std::log(static_cast<double>(d.max_m)) + 2 * std::log(static_cast<double>(d.max_nk)));
  for (Op op : ops)
    for (int i = 0; i < d.per_op; ++i) {
      RandomShape s;
      s.op = op;
      const int64_t unit = op == Op::kGemmAr ? 1 : d.world;
      // The work first (log-uniform up to max_macs), then its split among M, N and K (shares of
      // its logarithm, Dirichlet(2, 2, 2): any aspect, the extremes rarer), drawn again until
      // every dimension is within its bound: tiny, medium and large problems come alike.
      double work = 0;
      for (int tries = 0;; ++tries) {
        if (tries % 1000 == 0) work = uniform(rng, std::log(static_cast<double>(unit) * 64.0), max_work);
        double share[3], sum = 0;
        for (double& x : share) sum += x = -std::log(uniform(rng, 1e-12, 1) * uniform(rng, 1e-12, 1));
        s.m = round_to(std::exp(work * share[0] / sum), unit, false);
        s.n = round_to(std::exp(work * share[1] / sum), 8, i % 2 == 1);
        s.k = round_to(std::exp(work * share[2] / sum), 8, i % 4 >= 2);
        if (s.m <= d.max_m && s.n <= d.max_nk && s.k <= d.max_nk && s.m * s.n * s.k <= d.max_macs) break;
      }
      out.push_back(s);
    }
  return out;
}

}  // namespace tpgemm::bench
