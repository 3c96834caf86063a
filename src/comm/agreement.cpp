#include "comm/agreement.h"

#include <cstring>

#include "core/assert.h"
#include "core/format.h"

namespace tpgemm::comm {

Agreement::Agreement(int rank, int world, Transport transport)
    : rank_(rank), world_(world), transport_(std::move(transport)) {}

std::vector<std::vector<uint8_t>> Agreement::exchange(const Status& mine, const void* payload, size_t bytes,
                                                      const char* what) {
  TPGEMM_ASSERT(bytes <= kMaxPayload && transport_ != nullptr);
  // A slot: int32 code, the message (a failed rank's), the payload (NOTE [agreement]).
  std::vector<uint8_t> slot(kSlot, 0);
  const int32_t code = static_cast<int32_t>(mine.code);
  std::memcpy(slot.data(), &code, 4);
  std::snprintf(reinterpret_cast<char*>(slot.data() + 4), kMessage, "%s", mine.message.c_str());
  if (bytes > 0) std::memcpy(slot.data() + 4 + kMessage, payload, bytes);
  std::vector<uint8_t> all(kSlot * static_cast<size_t>(world_));
  transport_(slot.data(), all.data(), kSlot);
  if (!mine.ok()) throw AgreedError(mine);
  for (int r = 0; r < world_; ++r) {
    const uint8_t* s = all.data() + kSlot * static_cast<size_t>(r);
    int32_t theirs = 0;
    std::memcpy(&theirs, s, 4);
    if (theirs != 0) {
      std::string message(reinterpret_cast<const char*>(s + 4), strnlen(reinterpret_cast<const char*>(s + 4), kMessage));
      throw AgreedError(ErrorCode::kPeerFailure,
                        strfmt("rank %d failed, so rank %d stops too (at %s): %s %s", r, rank_, what,
                               std::string(to_string(static_cast<ErrorCode>(theirs))).c_str(), message.c_str()));
    }
  }
  std::vector<std::vector<uint8_t>> out(static_cast<size_t>(world_));
  for (int r = 0; r < world_; ++r) {
    const uint8_t* p = all.data() + kSlot * static_cast<size_t>(r) + 4 + kMessage;
    out[r].assign(p, p + bytes);
  }
  return out;
}

std::vector<std::vector<uint8_t>> Agreement::allgather(const void* mine, size_t bytes, const char* what) {
  return exchange(Status::Ok(), mine, bytes, what);
}

void Agreement::agree(const Status& mine, const std::string& descriptor, const char* what) {
  char d[kMaxPayload] = {};
  std::snprintf(d, sizeof(d), "%s", descriptor.c_str());
  const auto all = exchange(mine, d, sizeof(d), what);
  for (int r = 1; r < world_; ++r)
    if (std::strcmp(reinterpret_cast<const char*>(all[r].data()), reinterpret_cast<const char*>(all[0].data())) != 0)
      throw AgreedError(ErrorCode::kInvalidArgument,
                        strfmt("ranks disagree on %s: rank 0 asks for '%s', rank %d for '%s'", what,
                               reinterpret_cast<const char*>(all[0].data()), r,
                               reinterpret_cast<const char*>(all[r].data())));
}

void Agreement::agree_local(const char* what, const std::function<void()>& work) {
  Status mine;
  try {
    work();
  } catch (const AgreedError&) {
    throw;  // every rank has it already
  } catch (const Error& e) {
    mine = e.status();
  } catch (const std::exception& e) {
    mine = {ErrorCode::kInternal, strfmt("rank %d, %s: %s", rank_, what, e.what())};
  }
  agree(mine, "", what);
}

void Agreement::barrier(const char* what) { exchange(Status::Ok(), nullptr, 0, what); }

}  // namespace tpgemm::comm
