// Helpers of the host-logic tests: a problem by its sizes, and a refusal checked for its code
// and the words that must name what was wrong.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "tpgemm/error.h"
#include "tpgemm/types.h"

namespace tpgemm::plan::testhost {

inline GemmProblem ag(int64_t m, int64_t n, int64_t k) {
  GemmProblem p;
  p.op = Op::kAgGemm;
  p.m = m, p.n = n, p.k = k;
  return p;
}

inline void expect_error(const Status& s, ErrorCode code, const std::vector<std::string>& words) {
  EXPECT_EQ(s.code, code) << s.message;
  for (const auto& w : words) EXPECT_NE(s.message.find(w), std::string::npos) << "'" << w << "' not in: " << s.message;
}

}  // namespace tpgemm::plan::testhost
