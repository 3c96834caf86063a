#include "plan/allreduce_timings.h"

#include <algorithm>

#include "core/format.h"

namespace tpgemm::plan {

int candidate_index(AllReduceImpl impl) {
  for (int i = 0; i < kNumAllReduceCandidates; ++i)
    if (kAllReduceCandidates[i] == impl) return i;
  return -1;
}

std::vector<int64_t> sizes_to_time(const AllReduceTimings& t, int64_t message_bytes) {
  std::vector<int64_t> sizes;
  for (int64_t s = kSmallestTimedBytes; s <= kLargestTimedBytes; s *= 2) {
    if (t.rows.count(s) == 0) sizes.push_back(s);
    if (s >= message_bytes) break;
  }
  return sizes;
}

namespace {
// Not timed at `bytes`, or slower than NCCL there (a loss to the other symmetric algorithm does not
// count: one-shot wins the smallest sizes, two-shot the ones after).
bool behind_nccl(const AllReduceTimings& t, int i, int64_t bytes) {
  const auto it = t.rows.find(bytes);
  if (it == t.rows.end() || it->second.ms[i] < 0) return true;
  const float nccl = it->second.ms[candidate_index(AllReduceImpl::kNccl)];
  return nccl >= 0 && it->second.ms[i] >= nccl;
}
}  // namespace

bool worth_timing(const AllReduceTimings& t, AllReduceImpl impl, int64_t bytes) {
  const int i = candidate_index(impl);
  if (impl == AllReduceImpl::kNccl || i < 0) return i >= 0;
  if (bytes / 4 < kSmallestTimedBytes) return true;  // not two sizes below yet
  return !(behind_nccl(t, i, bytes / 2) && behind_nccl(t, i, bytes / 4));
}

AllReduceImpl winner_of(const float (&ms)[kNumAllReduceCandidates]) {
  // Each later candidate must beat the one kept by its margin: NCCL's 2%, the others' 1%.
  int best = -1;
  for (int i = 0; i < kNumAllReduceCandidates; ++i) {
    if (ms[i] < 0) continue;
    if (best < 0) {
      best = i;
      continue;
    }
    const double margin = kAllReduceCandidates[best] == AllReduceImpl::kNccl ? 0.98 : 0.99;
    if (ms[i] < ms[best] * margin) best = i;
  }
  return best < 0 ? AllReduceImpl::kNccl : kAllReduceCandidates[best];
}

AllReduceImpl route(const AllReduceTimings& t, int64_t bytes) {
  const auto it = t.rows.lower_bound(bytes);
  return it != t.rows.end() ? it->second.winner : AllReduceImpl::kNccl;
}

int64_t largest_routed(const AllReduceTimings& t, AllReduceImpl impl, int64_t up_to_bytes) {
  // Calls in (previous size, size] run the size's winner; past the last size, NCCL.
  int64_t largest = 0, below = 0;
  for (auto it = t.rows.begin(); it != t.rows.end() && below < up_to_bytes; below = it->first, ++it)
    if (it->second.winner == impl) largest = std::min(it->first, up_to_bytes);
  if (impl == AllReduceImpl::kNccl && (t.rows.empty() || t.rows.rbegin()->first < up_to_bytes)) largest = up_to_bytes;
  return largest;
}

std::string describe(const AllReduceTimings& t, int64_t up_to_bytes) {
  std::string out;
  for (const auto& [bytes, row] : t.rows) {
    out += strfmt("%s%lld B:", out.empty() ? "" : "; ", (long long)bytes);
    for (int i = 0; i < kNumAllReduceCandidates; ++i)
      out += row.ms[i] < 0 ? strfmt(" %s -", std::string(to_string(kAllReduceCandidates[i])).c_str())
                           : strfmt(" %s %.4f", std::string(to_string(kAllReduceCandidates[i])).c_str(), row.ms[i]);
    out += strfmt(" -> %s", std::string(to_string(row.winner)).c_str());
    if (bytes >= up_to_bytes) break;
  }
  return out;
}

}  // namespace tpgemm::plan
