// NOTE [ladder protocol]: the host side every rung shares.
#include "ops/ag_gemm/ladder.h"

#include "comm/timeout.h"
#include "core/check.h"
#include "gemm/sm90_gemm.h"
#include "ops/common/copy_batched.h"

namespace tpgemm::detail {

LadderRung::LadderRung(const ImplContext& ctx, bool gemm_core) : team_(ctx.team), p_(ctx.problem), choice_(ctx.choice) {
  TeamState& t = *team_;
  const size_t es = dtype_size(p_.dtype);
  // NOTE [collective construction]: what can fail locally first, agreed on; then the collective
  // allocations, in the same order on every rank. The rungs agree on their own local work after.
  t.agree_local("checking the device", [&] {
    if (gemm_core) throw_if_error(gemm::Sm90Gemm::device_supported(t.device));
  });
  g_ = comm::SymmetricBuffer(team_, static_cast<size_t>(p_.l * p_.m * p_.k) * es, "ladder gathered A");
  if (t.world > 1) pad_ = comm::SignalPad(team_, 1, 1, 1, "ladder flags");
  drop_signals_ = comm::test_drops_signals(t.rank);
}

LadderArgs LadderRung::publish_shard(const Operands& o, cudaStream_t stream) const {
  const TeamState& t = *team_;
  const int64_t mw = p_.m / t.world, row_bytes = p_.k * static_cast<int64_t>(dtype_size(p_.dtype));
  if (t.world > 1 && !drop_signals_) pad_.barrier(0, stream);
  ops::copy_rows(g_.local(), p_.m, t.rank * mw, o.a, mw, 0, mw, row_bytes, p_.l, stream);
  if (t.world > 1 && !drop_signals_)
    for (int q = 0; q < t.world; ++q)
      if (q != t.rank) pad_.signal(0, q, 0, stream);
  LadderArgs a;
  a.g_peers = g_.device_peers();
  a.g = g_.local();
  a.b = o.b;
  a.c = p_.has_c ? o.c : nullptr;
  a.d = o.d;
  a.m = p_.m, a.n = p_.n, a.k = p_.k, a.l = p_.l;
  a.rows_per_rank = mw;
  a.rank = t.rank, a.world = t.world;
  a.alpha = p_.alpha, a.beta = p_.beta;
  a.b_kn = p_.b_layout == BLayout::kKN;
  if (t.world > 1) {
    a.ready = pad_.family_slots(0);
    a.seq = pad_.seq();
  }
  a.env = t.wait_env();
  return a;
}

}  // namespace tpgemm::detail
