// Reading configuration from the environment, with errors that name the variable.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

namespace tpgemm {

std::optional<std::string> env_string(const char* name);
// Integer in [lo, hi]; throws Error(InvalidArgument) naming the variable on junk or range.
std::optional<int64_t> env_int(const char* name, int64_t lo, int64_t hi);
// Parses a whole decimal integer; nullopt on anything else.
std::optional<int64_t> parse_int(const std::string& s);
// TPGEMM_TUNE=0: every measured choice (the planner's, the all-reduce's, the GEMM core's
// configuration) falls back to its rules.
bool tuning_switched_off();

}  // namespace tpgemm
