// Symmetric memory over NCCL 2.28's windows: every rank allocates the same size with
// ncclMemAlloc and registers it with ncclCommWindowRegister(NCCL_WIN_COLL_SYMMETRIC); NCCL
// maps every peer's buffer into this process, and we keep the table of those addresses for
// kernels (a device array) and for copy-engine copies (a host array).
#pragma once

#include <nccl.h>

#include <cstddef>
#include <memory>
#include <vector>

namespace tpgemm::detail {
struct TeamState;
}

namespace tpgemm::comm {

class SymmetricBuffer {
 public:
  SymmetricBuffer() = default;
  // Collective: every rank passes the same `bytes` (rounded up to 4 KiB). Zero-filled, and
  // every rank has zeroed its buffer before any returns. Needs all ranks to be LSA peers.
  SymmetricBuffer(std::shared_ptr<detail::TeamState> team, size_t bytes, const char* what);
  ~SymmetricBuffer();
  SymmetricBuffer(SymmetricBuffer&& o) noexcept;
  SymmetricBuffer& operator=(SymmetricBuffer&& o) noexcept;
  SymmetricBuffer(const SymmetricBuffer&) = delete;
  SymmetricBuffer& operator=(const SymmetricBuffer&) = delete;

  void* local() const { return local_; }
  void* peer(int rank) const { return peers_[static_cast<size_t>(rank)]; }  // this process's address of rank's buffer
  void* const* device_peers() const { return device_peers_; }              // the same table, in device memory
  size_t bytes() const { return bytes_; }
  explicit operator bool() const { return local_ != nullptr; }

 private:
  void release() noexcept;

  std::shared_ptr<detail::TeamState> team_;
  void* local_ = nullptr;
  size_t bytes_ = 0;
  ncclWindow_t window_ = nullptr;
  bool plain_ = false;  // a team of one: cudaMalloc, no window
  std::vector<void*> peers_;
  void** device_peers_ = nullptr;
};

}  // namespace tpgemm::comm
