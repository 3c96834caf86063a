#pragma once

#include <nccl.h>

#include "tpgemm/types.h"

namespace tpgemm::ops {

inline ncclDataType_t nccl_type(DType t) {
  return t == DType::kBF16 ? ncclBfloat16 : t == DType::kFP16 ? ncclFloat16 : ncclFloat32;
}

}  // namespace tpgemm::ops
