// 16-byte vectors of eight 16-bit floats, widened to fp32 for accumulation.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>

namespace tpgemm::ops {

template <typename T>
struct Pair;
template <>
struct Pair<__nv_bfloat16> {
  using type = __nv_bfloat162;
  static __device__ __forceinline__ float2 to_float2(type v) { return __bfloat1622float2(v); }
  static __device__ __forceinline__ type from_float2(float2 f) { return __float22bfloat162_rn(f); }
};
template <>
struct Pair<__half> {
  using type = __half2;
  static __device__ __forceinline__ float2 to_float2(type v) { return __half22float2(v); }
  static __device__ __forceinline__ type from_float2(float2 f) { return __float22half2_rn(f); }
};

// One raw 16-byte vector of eight T, widened to fp32.
template <typename T>
__device__ __forceinline__ void widen8(const uint4& v, float (&f)[8]) {
  const auto* h = reinterpret_cast<const typename Pair<T>::type*>(&v);
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const float2 x = Pair<T>::to_float2(h[i]);
    f[2 * i] = x.x;
    f[2 * i + 1] = x.y;
  }
}

// Widens one raw vector and adds it to acc. Loading and widening are separate steps so that a
// kernel can issue all its loads before the first add (latency-bound over NVLink).
template <typename T>
__device__ __forceinline__ void add_raw8(const uint4& v, float (&acc)[8]) {
  float f[8];
  widen8<T>(v, f);
#pragma unroll
  for (int i = 0; i < 8; ++i) acc[i] += f[i];
}

template <typename T>
__device__ __forceinline__ void load8(const T* p, float (&f)[8]) {
  widen8<T>(*reinterpret_cast<const uint4*>(p), f);
}

template <typename T>
__device__ __forceinline__ void add8(const T* p, float (&acc)[8]) {
  add_raw8<T>(*reinterpret_cast<const uint4*>(p), acc);
}

// Eight floats rounded to T, as one raw 16-byte vector.
template <typename T>
__device__ __forceinline__ uint4 pack8(const float (&f)[8]) {
  uint4 v;
  auto* h = reinterpret_cast<typename Pair<T>::type*>(&v);
#pragma unroll
  for (int i = 0; i < 4; ++i) h[i] = Pair<T>::from_float2(make_float2(f[2 * i], f[2 * i + 1]));
  return v;
}

template <typename T>
__device__ __forceinline__ void store8(T* p, const float (&f)[8]) {
  *reinterpret_cast<uint4*>(p) = pack8<T>(f);
}

}  // namespace tpgemm::ops
