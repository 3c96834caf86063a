// printf-style formatting into std::string (g++ 12 has no std::format).
#pragma once

#include <cstdio>
#include <string>

namespace tpgemm {

template <typename... Args>
std::string strfmt(const char* fmt, Args... args) {
  const int n = std::snprintf(nullptr, 0, fmt, args...);
  if (n <= 0) return {};
  std::string out(static_cast<size_t>(n) + 1, '\0');
  std::snprintf(out.data(), out.size(), fmt, args...);
  out.resize(static_cast<size_t>(n));
  return out;
}

}  // namespace tpgemm
