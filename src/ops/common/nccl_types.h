#pragma once

#include <nccl.h>

#include "tpgemm/types.h"

namespace tpgemm::ops {

// FP8 is moved as bytes (gathers only: tpgemm never reduces in FP8).
inline ncclDataType_t nccl_type(DType t) {
  switch (t) {
    case DType::kBF16: return ncclBfloat16;
    case DType::kFP16: return ncclFloat16;
    case DType::kFP32: return ncclFloat32;
    case DType::kE4M3:
    case DType::kE5M2: return ncclUint8;
  }
  return ncclUint8;
}

}  // namespace tpgemm::ops
