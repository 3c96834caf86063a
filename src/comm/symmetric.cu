#include <nccl.h>
#include <nccl_device.h>

#include <utility>

#include "comm/symmetric.h"
#include "comm/team_state.h"
#include "core/check.h"

namespace tpgemm::comm {
namespace {

// NCCL 2.28 has no host call for a peer's address in a window: read it on the device.
__global__ void read_peer_pointers(ncclWindow_t window, int world, void** out) {
  for (int r = threadIdx.x; r < world; r += blockDim.x) out[r] = ncclGetPeerPointer(window, 0, r);
}

}  // namespace

SymmetricBuffer::SymmetricBuffer(std::shared_ptr<detail::TeamState> team, size_t bytes, const char* what)
    : team_(std::move(team)) {
  detail::TeamState& t = *team_;
  TPGEMM_ASSERT(t.all_lsa);
  bytes_ = (std::max<size_t>(bytes, 1) + NCCL_WIN_REQUIRED_ALIGNMENT - 1) / NCCL_WIN_REQUIRED_ALIGNMENT *
           NCCL_WIN_REQUIRED_ALIGNMENT;
  peers_.resize(static_cast<size_t>(t.world));
  // Allocate everything local first and agree before the collective registration, so that one
  // rank running out of memory cannot leave the others waiting inside ncclCommWindowRegister.
  Status allocated;
  if (cudaMalloc(&device_peers_, sizeof(void*) * peers_.size()) != cudaSuccess) {
    device_peers_ = nullptr;
    allocated = {ErrorCode::kCudaError, strfmt("cudaMalloc of the peer table for %s on device %d failed", what, t.device)};
  } else if (t.world == 1) {
    // A team of one has no peers: plain device memory (NCCL maps no LSA window for it).
    plain_ = true;
    if (cudaMalloc(&local_, bytes_) != cudaSuccess) {
      local_ = nullptr;
      allocated = {ErrorCode::kCudaError, strfmt("cudaMalloc of %zu bytes for %s on device %d failed", bytes_, what, t.device)};
    }
  } else if (const ncclResult_t r = ncclMemAlloc(&local_, bytes_); r != ncclSuccess) {
    local_ = nullptr;
    allocated = {ErrorCode::kNcclError, strfmt("ncclMemAlloc of %zu bytes for %s on device %d: %s", bytes_, what, t.device,
                                               ncclGetErrorString(r))};
  }
  try {
    t.agree(allocated, strfmt("symmetric buffer '%s' of %zu bytes", what, bytes_), "allocating symmetric memory");
    if (plain_) {
      peers_[0] = local_;
      TPGEMM_CUDA_CHECK(cudaMemcpyAsync(device_peers_, peers_.data(), sizeof(void*), cudaMemcpyHostToDevice, t.internal_stream));
    } else {
      TPGEMM_NCCL_CHECK(ncclCommWindowRegister(t.comm, local_, bytes_, &window_, NCCL_WIN_COLL_SYMMETRIC));
      read_peer_pointers<<<1, 32, 0, t.internal_stream>>>(window_, t.world, device_peers_);
      TPGEMM_CHECK_LAUNCH();
      TPGEMM_CUDA_CHECK(cudaMemcpyAsync(peers_.data(), device_peers_, sizeof(void*) * peers_.size(), cudaMemcpyDeviceToHost,
                                        t.internal_stream));
      // This rank's own entry is another mapping of the same memory (NCCL's flat LSA space);
      // keep the allocation's own address for local use.
    }
    t.zero_now(local_, bytes_);
    for (int q = 0; q < t.world; ++q)
      if (peers_[static_cast<size_t>(q)] == nullptr)
        throw Error(ErrorCode::kInternal, strfmt("NCCL gave no address for rank %d's part of window '%s'", q, what));
    t.barrier();  // nobody writes into a peer's buffer before that peer has zeroed it
  } catch (...) {
    release();
    throw;
  }
}

void SymmetricBuffer::release() noexcept {
  if (team_ == nullptr) return;
  if (device_peers_ != nullptr) cudaFree(device_peers_);
  // Deregistration is local to each rank (NCCL 2.28); after a failure (NOTE [failed team]) the
  // communicator may be gone (aborted, null): then there is nothing left to deregister from.
  if (window_ != nullptr && team_->comm != nullptr) ncclCommWindowDeregister(team_->comm, window_);
  if (local_ != nullptr && plain_) cudaFree(local_);
  if (local_ != nullptr && !plain_) ncclMemFree(local_);
  device_peers_ = nullptr;
  window_ = nullptr;
  local_ = nullptr;
  peers_.clear();
  team_.reset();
}

SymmetricBuffer::~SymmetricBuffer() { release(); }

SymmetricBuffer::SymmetricBuffer(SymmetricBuffer&& o) noexcept { *this = std::move(o); }

SymmetricBuffer& SymmetricBuffer::operator=(SymmetricBuffer&& o) noexcept {
  if (this != &o) {
    release();
    team_ = std::move(o.team_);
    local_ = std::exchange(o.local_, nullptr);
    bytes_ = std::exchange(o.bytes_, 0);
    window_ = std::exchange(o.window_, nullptr);
    plain_ = o.plain_;
    peers_ = std::move(o.peers_);
    device_peers_ = std::exchange(o.device_peers_, nullptr);
  }
  return *this;
}

}  // namespace tpgemm::comm
