// Reproducible random operands: the tests' and the benchmark's data, and what the planner times
// its candidates on (uniform data, not zeros: a tensor core multiplying zeros draws less power).
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "tpgemm/types.h"

namespace tpgemm::ops {

// Element (b, i, j) of a [l][rows][cols] block gets the value of element
// (b, row_offset + i, j) of a [l][total_rows][cols] matrix drawn from `seed`: uniform in
// [-1, 1), rounded to dtype. So a shard filled with its row offset equals the same rows of
// the whole matrix filled at once.
void fill_random(void* p, DType dtype, int64_t l, int64_t rows, int64_t cols, int64_t row_offset, int64_t total_rows,
                 uint64_t seed, cudaStream_t stream);

}  // namespace tpgemm::ops
