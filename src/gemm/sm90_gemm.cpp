#include "gemm/sm90_gemm.h"

#include <algorithm>
#include <cstdint>
#include <iterator>

#include "core/check.h"
#include "core/env.h"
#include "gemm/sm90_config.h"
#include "gemm/sm90_measured.h"

namespace tpgemm::gemm {
namespace sm90 {
// One per src/gemm/sm90/<config>.cu, in the order of sm90_config.cpp's table.
extern const KernelTable kCoop128x256C2x1, kCoop256x128C1x2, kPingpong128x128C1x2, kStreamK128x256C2x1,
    kCoop128x128C1x1, kPingpong64x128C1x1, kCoop256x192C1x2, kCoop256x192C2x1,
    kCoop128x192C2x1;
extern const KernelTable kGatherCoop128x256C2x1;  // coop_128x256_c2x1: chunk-wait mainloop, rotated tile rows
extern const KernelTable kSignalCoop128x256C2x1;  // coop_128x256_c2x1: tile-signal epilogue, interleaved tile rows
}  // namespace sm90

namespace {

const sm90::KernelTable* const kTables[] = {&sm90::kCoop128x256C2x1, &sm90::kCoop256x128C1x2,
                                            &sm90::kPingpong128x128C1x2, &sm90::kStreamK128x256C2x1,
                                            &sm90::kCoop128x128C1x1,      &sm90::kPingpong64x128C1x1,
                                            &sm90::kCoop256x192C1x2,      &sm90::kCoop256x192C2x1,
                                            &sm90::kCoop128x192C2x1};

int pick_config(const MatmulShape& s, std::string_view asked, int sm_count, bool measure) {
  std::string name(asked);
  const char* origin = "config";
  if (name.empty()) {
    if (const auto env = env_string("TPGEMM_SM90_CONFIG")) name = *env, origin = "TPGEMM_SM90_CONFIG";
  }
  if (name.empty() && measure) return measured_config(s, sm90::choose_config(s.m, s.n, s.k, s.batch, sm_count));
  if (name.empty() || name == "rule") return sm90::choose_config(s.m, s.n, s.k, s.batch, sm_count);
  const auto i = sm90::find_config(name);
  if (!i)
    throw Error(ErrorCode::kInvalidArgument, strfmt("sm90 GEMM core: %s='%s': expected one of %s, or rule", origin,
                                                    name.c_str(), sm90::config_names().c_str()));
  return *i;
}

}  // namespace

bool Sm90Gemm::supports(const MatmulShape& shape, std::string* why) {
  const Status st = sm90::check_shape(shape);
  if (!st.ok() && why != nullptr) *why = st.message;
  return st.ok();
}

Status Sm90Gemm::device_supported(int device) {
  int major = 0, minor = 0;
  TPGEMM_CUDA_CHECK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device));
  TPGEMM_CUDA_CHECK(cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, device));
  if (major == 9 && minor == 0) return Status::Ok();
  return {ErrorCode::kUnsupported,
          strfmt("the sm90 GEMM core (impls fused and gather_then_gemm) needs a Hopper GPU (sm_90), and device %d is "
                 "sm_%d%d; use impl=pipelined_ce or baseline",
                 device, major, minor)};
}

Sm90Gemm::Sm90Gemm(const MatmulShape& s, std::string_view config_name, bool measure) {
  set_up(s);
  config_ = pick_config(s, config_name, base_.sm_count, measure);
  kernel_ = &kTables[config_]->fns[static_cast<int>(s.dtype)][static_cast<int>(s.b_layout)];
  TPGEMM_ASSERT(kernel_->run != nullptr);
  base_.swizzle = sm90::swizzle_setting(1);
  base_.raster = static_cast<int>(env_int("TPGEMM_SM90_RASTER", 0, 2).value_or(0));
  finish();
}

Sm90Gemm::Sm90Gemm(const MatmulShape& s, const sm90::ChunkWait& wait) {
  TPGEMM_ASSERT(wait.world >= 1 && wait.pieces >= 1 && wait.pieces <= sm90::chunk_wait_k_tiles(s.k) &&
                wait.rows_per_rank * wait.world == s.m &&
                (!wait.own_in_place || wait.rows_per_rank % sm90::kChunkWaitTileM == 0));
  set_up_fused(s, sm90::kGatherCoop128x256C2x1, "coop_128x256_c2x1+chunk_wait");
  sm90::Args& x = base_;
  x.wait = wait;
  x.order.first_row = wait.rank * wait.rows_per_rank;  // each rank starts on its own rows
  x.swizzle = sm90::swizzle_setting(sm90::chunk_wait_swizzle(s.m, s.n, wait.rows_per_rank));
  finish();
}

Sm90Gemm::Sm90Gemm(const MatmulShape& s, const sm90::TileRowOrder& order, const sm90::TileSignal& signal) {
  TPGEMM_ASSERT(signal.flags != nullptr && signal.seq != nullptr);
  set_up_fused(s, sm90::kSignalCoop128x256C2x1, "coop_128x256_c2x1+tile_signal");
  sm90::Args& x = base_;
  x.order = order;
  x.signal = signal;
  x.swizzle = 1;  // whole tile rows, in the order's turn
  finish();
}

void Sm90Gemm::set_up_fused(const MatmulShape& s, const sm90::KernelTable& table, const char* variant) {
  set_up(s);
  config_ = *sm90::find_config("coop_128x256_c2x1");  // the configuration both fused kernels extend
  variant_ = variant;
  kernel_ = &table.fns[static_cast<int>(s.dtype)][static_cast<int>(s.b_layout)];
  base_.raster = 2;  // along N: a wave covers a few rows of tiles, met in the order's turn
}

void Sm90Gemm::set_up(const MatmulShape& s) {
  throw_if_error(sm90::check_shape(s));
  TPGEMM_ASSERT(std::size(kTables) == sm90::configs().size());
  shape_ = s;
  int device = 0, sms = 0;
  TPGEMM_CUDA_CHECK(cudaGetDevice(&device));
  throw_if_error(device_supported(device));
  TPGEMM_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
  if (s.sm_count > 0) sms = std::min(sms, s.sm_count);  // leave the rest to communication kernels
  sm90::Args& x = base_;
  x.m = static_cast<int>(s.m), x.n = static_cast<int>(s.n), x.k = static_cast<int>(s.k), x.l = static_cast<int>(s.batch);
  x.lda = s.lda, x.ldb = s.ldb, x.ldd = s.ldd;
  x.ldc = s.has_c ? s.ldc : s.ldd;  // without C, D stands in for it (never read: beta = 0)
  x.stride_a = s.stride_a, x.stride_b = s.stride_b, x.stride_d = s.stride_d;
  x.stride_c = s.has_c ? s.stride_c : s.stride_d;
  x.device = device;
  x.sm_count = sms;
}

void Sm90Gemm::finish() {
  const MatmulShape& s = shape_;
  base_.max_active_clusters = kernel_->prepare();
  if (!kernel_->implementable(base_))
    throw Error(ErrorCode::kUnsupported, strfmt("sm90 GEMM core: %s cannot run M=%lld N=%lld K=%lld L=%lld (%s, B %s)",
                                                config(), (long long)s.m, (long long)s.n, (long long)s.k,
                                                (long long)s.batch, std::string(to_string(s.dtype)).c_str(),
                                                std::string(to_string(s.b_layout)).c_str()));
  workspace_bytes_ = kernel_->workspace_bytes(base_);
}

const char* Sm90Gemm::config() const {
  if (variant_ != nullptr) return variant_;
  return config_ < 0 ? "none" : sm90::configs()[config_].name;
}

void Sm90Gemm::run(const void* a, const void* b, const void* c, void* d, float alpha, float beta, void* workspace,
                   cudaStream_t stream, const void* own_a) const {
  if (kernel_ == nullptr) throw Error(ErrorCode::kInvalidArgument, "Sm90Gemm::run on a default-constructed plan");
  sm90::Args x = base_;
  x.a = a, x.b = b, x.d = d;
  x.own_a = own_a;
  x.c = shape_.has_c ? c : d;
  x.alpha = alpha;
  x.beta = shape_.has_c ? beta : 0.0f;
  // TMA faults on misaligned global addresses: refuse here, with the operand's name.
  for (const auto& [name, p] : {std::pair{"A", x.a}, std::pair{"B", x.b}, std::pair{"D", (const void*)d},
                                std::pair{"C", shape_.has_c ? x.c : d},  // without C, x.c is D: checked as D
                                std::pair{"own A", base_.wait.own_in_place ? own_a : a}})  // else not read
    if (p == nullptr || reinterpret_cast<uintptr_t>(p) % 16 != 0)
      throw Error(ErrorCode::kInvalidArgument,
                  strfmt("Sm90Gemm::run: %s=%p: expected a non-null, 16-byte aligned device pointer", name, p));
  TPGEMM_ASSERT(own_a == nullptr || base_.wait.own_in_place);
  if (workspace_bytes_ > 0 && workspace == nullptr)
    throw Error(ErrorCode::kInvalidArgument, strfmt("Sm90Gemm::run: %s needs a workspace of %zu bytes", config(),
                                                    workspace_bytes_));
  kernel_->run(x, workspace, stream);
}

}  // namespace tpgemm::gemm
