#include "bench/shapes.h"

#include <fstream>
#include <sstream>

#include "core/env.h"
#include "core/format.h"
#include "tpgemm/error.h"

namespace tpgemm::bench {

bool valid_allreduce_bytes(int64_t bytes) { return bytes >= 16 && bytes % 16 == 0; }

std::vector<ShapeSpec> parse_shapes(const std::string& text, const std::string& origin) {
  std::vector<ShapeSpec> out;
  std::istringstream in(text);
  std::string line;
  for (int lineno = 1; std::getline(in, line); ++lineno) {
    line = line.substr(0, line.find('#'));
    std::istringstream words(line);
    std::vector<std::string> w;
    for (std::string s; words >> s;) w.push_back(s);
    if (w.empty()) continue;
    auto bad = [&](const std::string& why) {
      return Error(ErrorCode::kInvalidArgument, strfmt("%s:%d: '%s': %s", origin.c_str(), lineno, line.c_str(), why.c_str()));
    };
    auto number = [&](const std::string& s, const char* what) {
      const auto v = parse_int(s);
      if (!v || *v < 1) throw bad(strfmt("%s='%s' is not a positive integer", what, s.c_str()));
      return *v;
    };
    ShapeSpec spec;
    if (w[0] == "allreduce") {
      if (w.size() != 2) throw bad("expected 'allreduce BYTES'");
      spec.allreduce = true;
      spec.bytes = number(w[1], "BYTES");
      if (!valid_allreduce_bytes(spec.bytes)) throw bad("BYTES: expected a multiple of 16 (16-byte vectors)");
    } else {
      const auto op = parse_op(w[0]);
      if (!op) throw bad(strfmt("unknown op '%s': expected ag, rs, ar (or ag_gemm, gemm_rs, gemm_ar) or allreduce", w[0].c_str()));
      if (w.size() != 4) throw bad("expected 'op M N K'");
      spec.op = *op;
      spec.m = number(w[1], "M");
      spec.n = number(w[2], "N");
      spec.k = number(w[3], "K");
    }
    out.push_back(spec);
  }
  return out;
}

std::vector<ShapeSpec> read_shapes_file(const std::string& path) {
  std::ifstream f(path);
  if (!f) throw Error(ErrorCode::kInvalidArgument, strfmt("--shapes %s: cannot open the file", path.c_str()));
  std::stringstream ss;
  ss << f.rdbuf();
  return parse_shapes(ss.str(), path);
}

}  // namespace tpgemm::bench
