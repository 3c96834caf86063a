// AllGather + GEMM for small M: tpgemm's all-gather kernel (NVLink stores, the data its own
// flag; ops/allreduce/allgather.cu) gathers the A shards into a local [L, M, K] buffer, then one
// cuBLASLt matmul. No overlap: where each rank's rows are too few to cut into chunks (pipelined_ce's
// chunk matmuls would be mostly empty waves), a shorter collective than NCCL's is what is left
// to gain.
#include "core/cuda_raii.h"
#include "gemm/lt_matmul.h"
#include "ops/allreduce/symm_collective.h"
#include "ops/op_impl.h"

namespace tpgemm::detail {
namespace {

class AllGatherGemm final : public OpImpl {
 public:
  explicit AllGatherGemm(const ImplContext& ctx)
      : team_(ctx.team),
        p_(ctx.problem),
        gather_(team_, p_.l * (p_.m / team_->world) * p_.k, p_.dtype, ops::SymmAlgo::kAllGather, p_.l) {
    // Local work after the symmetric allocation, so agreed on separately (NOTE [collective construction]).
    team_->agree_local("allocating the gathered A and the matmul's workspace", [&] {
      gathered_ = DeviceBuffer(static_cast<size_t>(p_.l * p_.m * p_.k) * dtype_size(p_.dtype));
      workspace_ = DeviceBuffer(gemm::LtMatmul::kWorkspaceBytes);
      matmuls_ = gemm::LtMatmulCache(team_->lt);
      matmuls_.get(shape(p_));
    });
  }

  void run(const Operands& o, cudaStream_t stream) override {
    // [L][W][M/W rows]: A as [L, M, K], straight into the caller's A_gathered when it wants one.
    const GemmProblem p = call_problem(p_, o);
    void* g = o.a_gathered != nullptr ? o.a_gathered : gathered_.get();
    gather_.run(o.a, g, nullptr, 0.0f, stream, p.l * (p.m / team_->world) * p.k);
    matmuls_.get(shape(p)).run(g, o.b, p.has_c ? o.c : nullptr, o.d, p.alpha, p.beta, workspace_.get(), stream);
  }

 private:
  static gemm::MatmulShape shape(const GemmProblem& p) {
    gemm::MatmulShape s = gemm::packed_shape(p.m, p.n, p.k, p.l, p.dtype, p.b_layout);
    s.has_c = p.has_c;
    return s;
  }

  std::shared_ptr<TeamState> team_;
  GemmProblem p_;
  ops::SymmCollective gather_;
  DeviceBuffer gathered_, workspace_;
  gemm::LtMatmulCache matmuls_;
};

}  // namespace

std::unique_ptr<OpImpl> make_ag_gemm_allgather(const ImplContext& ctx) { return std::make_unique<AllGatherGemm>(ctx); }

}  // namespace tpgemm::detail
