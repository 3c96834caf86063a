#include "core/env.h"

#include <cerrno>
#include <cstdlib>

#include "core/format.h"
#include "tpgemm/error.h"

namespace tpgemm {

std::optional<std::string> env_string(const char* name) {
  const char* v = std::getenv(name);
  if (v == nullptr || *v == '\0') return std::nullopt;
  return std::string(v);
}

std::optional<int64_t> parse_int(const std::string& s) {
  if (s.empty()) return std::nullopt;
  errno = 0;
  char* end = nullptr;
  const long long v = std::strtoll(s.c_str(), &end, 10);
  if (errno != 0 || end == s.c_str() || *end != '\0') return std::nullopt;
  return static_cast<int64_t>(v);
}

std::optional<int64_t> env_int(const char* name, int64_t lo, int64_t hi) {
  const auto s = env_string(name);
  if (!s) return std::nullopt;
  const auto v = parse_int(*s);
  if (!v || *v < lo || *v > hi)
    throw Error(ErrorCode::kInvalidArgument, strfmt("environment variable %s='%s': expected an integer in [%lld, %lld]",
                                                    name, s->c_str(), (long long)lo, (long long)hi));
  return v;
}

bool tuning_switched_off() {
  const auto v = env_string("TPGEMM_TUNE");
  return v && *v == "0";
}

}  // namespace tpgemm
