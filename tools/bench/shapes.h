// The shape-file format of bench/shapes.txt: one 'op M N K' per line (op: ag, rs, ar
// or their long names), or 'allreduce BYTES'; '#' starts a comment.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "tpgemm/types.h"

namespace tpgemm::bench {

struct ShapeSpec {
  bool allreduce = false;  // true: an all-reduce of `bytes` bytes per rank
  Op op = Op::kAgGemm;
  int64_t m = 0, n = 0, k = 0;
  int64_t bytes = 0;
};

// The all-reduce moves 16-byte vectors: a size must be a positive multiple of 16 bytes.
bool valid_allreduce_bytes(int64_t bytes);

// Throws Error(InvalidArgument) naming `origin` and the line for anything malformed.
std::vector<ShapeSpec> parse_shapes(const std::string& text, const std::string& origin);
std::vector<ShapeSpec> read_shapes_file(const std::string& path);

}  // namespace tpgemm::bench
