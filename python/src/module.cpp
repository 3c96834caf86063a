// tpgemm._C: the C++ library as Python sees it. Tensors cross as device addresses and streams as
// cudaStream_t values (Python ints), so nothing here depends on torch: the torch layer
// (tpgemm/_torch.py) checks each tensor's dtype, device, shape and layout before it calls in.
// Every call that may block (team and plan creation, which are collective) or enqueue work
// releases the GIL. tpgemm::Error becomes the Python class registered for its code
// (tpgemm/_errors.py), carrying the code's name in `.code`.
#include <nanobind/nanobind.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/tuple.h>

#include <array>
#include <cstring>
#include <optional>
#include <string>
#include <tuple>

#include "tpgemm/tpgemm.h"

namespace nb = nanobind;

namespace tpgemm {
namespace {

// Indexed by ErrorCode; filled by tpgemm/_errors.py through _set_error_classes().
std::array<PyObject*, 8> g_error_classes{};

template <typename T>
T parsed(std::optional<T> v, const char* arg, const std::string& s, const char* expected) {
  if (!v) throw Error(ErrorCode::kInvalidArgument, std::string(arg) + "='" + s + "': expected " + expected);
  return *v;
}

DType dtype_arg(const std::string& s) {
  const DType d = parsed(parse_dtype(s), "dtype", s, "bf16, fp16, e4m3 or e5m2");
  if (d == DType::kFP32)
    throw Error(ErrorCode::kInvalidArgument,
                "dtype='fp32': expected bf16, fp16, e4m3 or e5m2 (fp32 is an output type: out_dtype)");
  return d;
}

TeamOptions team_options(int64_t timeout_ms, int64_t host_timeout_ms, const std::string& call_check) {
  TeamOptions o;
  o.timeout_ms = timeout_ms;
  o.host_timeout_ms = host_timeout_ms;
  if (call_check == "local") o.call_check = TeamOptions::CallCheck::kLocal;
  else if (call_check == "collective") o.call_check = TeamOptions::CallCheck::kCollective;
  else if (call_check != "default")
    throw Error(ErrorCode::kInvalidArgument,
                "call_check='" + call_check + "': expected 'default', 'local' or 'collective'");
  return o;
}

constexpr const char* kImplNames =
    "auto, baseline, pipelined_ce, fused, allgather_gemm, gemm_reducescatter, gemm_oneshot, gemm_twoshot, "
    "gather_then_gemm, threadload_gather or naive_remote";

PlanOptions::Tune tune_arg(std::optional<bool> tune) {
  if (!tune) return PlanOptions::Tune::kDefault;
  return *tune ? PlanOptions::Tune::kOn : PlanOptions::Tune::kOff;
}

struct ProblemArgs {
  GemmProblem p;
  PlanOptions o;
};

ProblemArgs problem_args(const std::string& op, int64_t m, int64_t n, int64_t k, int64_t l, const std::string& dtype,
                         const std::string& b_layout, float alpha, float beta, bool has_c, const std::string& shard_dim,
                         const std::string& impl, int chunks_per_rank, int comm_sms, bool return_gathered_a,
                         const std::string& out_dtype, const std::string& scale, const std::string& a_layout,
                         int64_t lda, int64_t ldb, int64_t ldc, int64_t ldd, const std::string& b_dtype,
                         bool deterministic = false, const std::string& matmul = "auto") {
  ProblemArgs a;
  a.p.op = parsed(parse_op(op), "op", op, "ag_gemm, gemm_rs or gemm_ar");
  a.p.m = m;
  a.p.n = n;
  a.p.k = k;
  a.p.l = l;
  a.p.dtype = dtype_arg(dtype);
  if (!out_dtype.empty()) a.p.out_dtype = parsed(parse_dtype(out_dtype), "out_dtype", out_dtype, "bf16, fp16 or fp32");
  if (!b_dtype.empty()) a.p.b_dtype = parsed(parse_dtype(b_dtype), "b_dtype", b_dtype, "e4m3 or e5m2");
  a.p.scale_mode = parsed(parse_scale_mode(scale), "scale", scale, "tensor, row or block");
  a.p.a_layout = parsed(parse_a_layout(a_layout), "a_layout", a_layout, "mk ([M, K]) or km ([K, M])");
  a.p.lda = lda;
  a.p.ldb = ldb;
  a.p.ldc = ldc;
  a.p.ldd = ldd;
  a.p.b_layout = parsed(parse_b_layout(b_layout), "b_layout", b_layout, "nk ([N, K]) or kn ([K, N])");
  a.p.alpha = alpha;
  a.p.beta = beta;
  a.p.has_c = has_c;
  a.p.shard_dim = parsed(parse_shard_dim(shard_dim), "shard_dim", shard_dim, "m or n");
  a.o.impl = parsed(parse_impl(impl), "impl", impl, kImplNames);
  a.o.chunks_per_rank = chunks_per_rank;
  a.o.comm_sms = comm_sms;
  a.o.matmul = parsed(parse_matmul(matmul), "matmul", matmul, "auto, cublaslt or sm90");
  a.o.return_gathered_a = return_gathered_a;
  a.o.deterministic = deterministic;
  return a;
}

// A plan's selection() for Python: (source, detail, tuning_ms).
std::tuple<std::string, std::string, double> selection_tuple(const PlanSelection& s) {
  return {std::string(to_string(s.source)), s.detail, s.tuning_ms};
}

nb::dict options_dict(const PlanOptions& o) {
  nb::dict d;
  d["impl"] = std::string(to_string(o.impl));
  d["chunks_per_rank"] = o.chunks_per_rank;
  d["comm_sms"] = o.comm_sms;
  d["matmul"] = std::string(to_string(o.matmul));
  d["return_gathered_a"] = o.return_gathered_a;
  d["deterministic"] = o.deterministic;
  return d;
}

void* ptr(uintptr_t v) { return reinterpret_cast<void*>(v); }
cudaStream_t stream_of(uintptr_t v) { return reinterpret_cast<cudaStream_t>(v); }

}  // namespace
}  // namespace tpgemm

NB_MODULE(_C, m) {
  using namespace tpgemm;
  m.doc() = "tpgemm's C++ core (tensor-parallel GEMMs over NVLink). Use the tpgemm package, not this module.";
  // Plans cached by tpgemm's ops and modules live until the interpreter exits, and are left to the
  // process's end there rather than destroyed: a plan's teardown deregisters symmetric memory
  // with its team, and at exit neither the order nor the peers' presence is known. nanobind
  // would report each of them as leaked.
  nb::set_leak_warnings(false);

  m.def("_set_error_classes", [](nb::dict classes) {
    for (auto [key, cls] : classes) {
      const int code = nb::cast<int>(key);
      if (code < 0 || code >= static_cast<int>(g_error_classes.size())) throw nb::value_error("error code out of range");
      Py_XDECREF(g_error_classes[code]);
      g_error_classes[code] = cls.ptr();
      Py_INCREF(cls.ptr());
    }
  });
  nb::register_exception_translator([](const std::exception_ptr& p, void*) {
    try {
      std::rethrow_exception(p);
    } catch (const Error& e) {
      PyObject* cls = g_error_classes[static_cast<size_t>(e.code())];
      if (cls == nullptr) cls = PyExc_RuntimeError;
      PyObject* exc = PyObject_CallFunction(cls, "s", e.what());
      if (exc == nullptr) return;  // the constructor's own error stands
      const std::string code(to_string(e.code()));
      PyObject* code_str = PyUnicode_FromStringAndSize(code.data(), static_cast<Py_ssize_t>(code.size()));
      if (code_str != nullptr) {
        PyObject_SetAttrString(exc, "code", code_str);
        Py_DECREF(code_str);
      }
      PyErr_SetObject(cls, exc);
      Py_DECREF(exc);
    }
  });

  m.def("error_codes", [] {
    nb::dict d;
    for (int c = 0; c <= static_cast<int>(ErrorCode::kInternal); ++c)
      d[nb::int_(c)] = std::string(to_string(static_cast<ErrorCode>(c)));
    return d;
  }, "ErrorCode value -> name.");

  m.def("unique_id", [] {
    ncclUniqueId id;
    const ncclResult_t r = ncclGetUniqueId(&id);
    if (r != ncclSuccess)
      throw Error(ErrorCode::kNcclError, std::string("ncclGetUniqueId: ") + ncclGetErrorString(r));
    return nb::bytes(id.internal, sizeof(id.internal));
  }, "A new NCCL unique id (bytes) for Team.from_unique_id; made on one rank and sent to the others.");

  m.def("nccl_version", [] {
    int v = 0;
    const ncclResult_t r = ncclGetVersion(&v);
    if (r != ncclSuccess) throw Error(ErrorCode::kNcclError, std::string("ncclGetVersion: ") + ncclGetErrorString(r));
    return v;
  }, "The version code of the libnccl this process loaded (e.g. 22809).");
  m.attr("NCCL_BUILD_VERSION") = NCCL_VERSION_CODE;

  m.def("stream_capturing", [](uintptr_t stream) {
    cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
    if (cudaStreamIsCapturing(stream_of(stream), &status) != cudaSuccess) {
      cudaGetLastError();  // (not sticky)
      return true;  // unknown: a stream the caller should leave alone, as a capturing one
    }
    return status != cudaStreamCaptureStatusNone;
  }, nb::arg("stream"), "Whether the stream (a cudaStream_t as an int) is capturing, or cannot be asked.");

  m.def("impl_name", [](const std::string& op, const std::string& impl) {
    if (op == "all_reduce")
      return std::string(to_string(parsed(parse_allreduce_impl(impl), "impl", impl, "auto, nccl, oneshot or twoshot")));
    (void)parsed(parse_op(op), "op", op, "ag_gemm, gemm_rs, gemm_ar or all_reduce");
    return std::string(to_string(parsed(parse_impl(impl), "impl", impl, kImplNames)));
  }, nb::arg("op"), nb::arg("impl"),
        "The implementation's canonical name for `op` (an InvalidArgument naming the choices where there is none).");

  nb::class_<Team>(m, "Team")
      .def_static(
          "from_unique_id",
          [](nb::bytes uid, int rank, int world_size, int device, int64_t timeout_ms, int64_t host_timeout_ms,
             const std::string& call_check) {
            ncclUniqueId id;
            if (uid.size() != sizeof(id.internal))
              throw Error(ErrorCode::kInvalidArgument, "unique_id: expected " + std::to_string(sizeof(id.internal)) +
                                                           " bytes (from tpgemm._C.unique_id()), got " +
                                                           std::to_string(uid.size()));
            std::memcpy(id.internal, uid.c_str(), sizeof(id.internal));
            const TeamOptions o = team_options(timeout_ms, host_timeout_ms, call_check);
            nb::gil_scoped_release release;
            return Team::from_unique_id(id, rank, world_size, device, o);
          },
          nb::arg("unique_id"), nb::arg("rank"), nb::arg("world_size"), nb::arg("device"), nb::arg("timeout_ms") = 0,
          nb::arg("host_timeout_ms") = 0, nb::arg("call_check") = "default",
          "Collective: every rank of the group, with the same unique id.")
      .def_static(
          "from_env",
          [](int64_t timeout_ms, int64_t host_timeout_ms, const std::string& call_check) {
            const TeamOptions o = team_options(timeout_ms, host_timeout_ms, call_check);
            nb::gil_scoped_release release;
            return Team::from_env(o);
          },
          nb::arg("timeout_ms") = 0, nb::arg("host_timeout_ms") = 0, nb::arg("call_check") = "default",
          "Collective: RANK / WORLD_SIZE / LOCAL_RANK as torchrun sets them (see the README, Launching).")
      .def_prop_ro("rank", &Team::rank)
      .def_prop_ro("world_size", &Team::world_size)
      .def_prop_ro("device", &Team::device)
      .def_prop_ro("lsa_size", &Team::lsa_size)
      .def_prop_ro("all_lsa_peers", &Team::all_lsa_peers)
      .def("check", &Team::check, "Raises the error a bounded device wait recorded (after synchronising).")
      .def("barrier", &Team::barrier, nb::call_guard<nb::gil_scoped_release>());

  nb::class_<Plan>(m, "Plan")
      .def(
          "__init__",
          [](Plan* self, const Team& team, const std::string& op, int64_t m_, int64_t n, int64_t k, int64_t l,
             const std::string& dtype, const std::string& b_layout, float alpha, float beta, bool has_c,
             const std::string& shard_dim, const std::string& impl, int chunks_per_rank, int comm_sms,
             bool return_gathered_a, const std::string& out_dtype, const std::string& scale, const std::string& a_layout,
             int64_t lda, int64_t ldb, int64_t ldc, int64_t ldd, const std::string& b_dtype, bool deterministic,
             const std::string& matmul, std::optional<bool> tune) {
            ProblemArgs a = problem_args(op, m_, n, k, l, dtype, b_layout, alpha, beta, has_c, shard_dim, impl,
                                         chunks_per_rank, comm_sms, return_gathered_a, out_dtype, scale, a_layout, lda,
                                         ldb, ldc, ldd, b_dtype, deterministic, matmul);
            a.o.tune = tune_arg(tune);
            nb::gil_scoped_release release;
            new (self) Plan(team, a.p, a.o);
          },
          nb::arg("team"), nb::arg("op"), nb::arg("m"), nb::arg("n"), nb::arg("k"), nb::arg("l") = 1,
          nb::arg("dtype") = "bf16", nb::arg("b_layout") = "nk", nb::arg("alpha") = 1.0f, nb::arg("beta") = 0.0f,
          nb::arg("has_c") = false, nb::arg("shard_dim") = "m", nb::arg("impl") = "auto",
          nb::arg("chunks_per_rank") = 0, nb::arg("comm_sms") = -1, nb::arg("return_gathered_a") = false,
          nb::arg("out_dtype") = "", nb::arg("scale") = "tensor", nb::arg("a_layout") = "mk", nb::arg("lda") = 0,
          nb::arg("ldb") = 0, nb::arg("ldc") = 0, nb::arg("ldd") = 0, nb::arg("b_dtype") = "",
          nb::arg("deterministic") = false, nb::arg("matmul") = "auto", nb::arg("tune") = nb::none(),
          "Collective: every rank makes the same plan at the same point (see tpgemm/plan.h). `tune` "
          "(PlanOptions::tune): None: auto times its candidates unless TPGEMM_TUNE=0; True: it times them; False: "
          "the rules choose (the same choice in every process). `deterministic`: "
          "sums in a fixed order only (PlanOptions::deterministic: no gemm_rs / gemm_ar baseline). `out_dtype`: D's "
          "and C's type ('fp32' for bf16 / fp16 inputs; 'bf16', 'fp16' or 'fp32' for FP8; '': dtype). `b_dtype`: "
          "B's type where it differs from A's ('e4m3' or 'e5m2' beside an FP8 A; '': dtype). `scale`: "
          "FP8 scales, 'tensor' (one per operand), 'row' (per row of A and per column of D) or 'block' (per "
          "1 x 128 block of A and 128 x 128 block of B, tpgemm/types.h's layout). `a_layout` "
          "('mk' or 'km': A stored [K, M]), `lda`, `ldb`, `ldc`, `ldd`: row strides in elements (0: packed). "
          "`matmul`: pipelined_ce's matmuls, 'cublaslt', 'sm90' (tpgemm's Hopper GEMM core) or 'auto'.")
      .def(
          "run",
          [](Plan& self, uintptr_t a, uintptr_t b, uintptr_t c, uintptr_t d, uintptr_t a_gathered, uintptr_t stream,
             int64_t m_, uintptr_t a_scale, uintptr_t b_scale) {
            Operands o;
            o.a = ptr(a);
            o.b = ptr(b);
            o.c = ptr(c);
            o.d = ptr(d);
            o.a_gathered = ptr(a_gathered);
            o.m = m_;
            o.a_scale = static_cast<const float*>(ptr(a_scale));
            o.b_scale = static_cast<const float*>(ptr(b_scale));
            self.run(o, stream_of(stream));
          },
          nb::arg("a"), nb::arg("b"), nb::arg("c"), nb::arg("d"), nb::arg("a_gathered"), nb::arg("stream"),
          nb::arg("m") = 0, nb::arg("a_scale") = 0, nb::arg("b_scale") = 0, nb::call_guard<nb::gil_scoped_release>(),
          "Enqueues the op on `stream` (device addresses as ints; 0 for an absent C or A_gathered); `m`: this "
          "call's M, at most the plan's (0: the plan's); `a_scale`, `b_scale`: FP8 A and B's fp32 scales "
          "(16-byte aligned; row-wise: a vector each).")
      .def("prepare", &Plan::prepare, nb::arg("m"), nb::call_guard<nb::gil_scoped_release>(),
           "Collective: makes the implementation the calls of `m` rows run, outside any CUDA-graph capture.")
      .def_prop_ro("selection", [](const Plan& p) { return selection_tuple(p.selection()); },
                   "(source, detail, tuning_ms): how auto chose (asked, tuned, cached or fallback).")
      .def_prop_ro("impl", [](const Plan& p) { return std::string(to_string(p.impl())); })
      .def_prop_ro("options", [](const Plan& p) { return options_dict(p.options()); })
      .def_prop_ro("description", [](const Plan& p) { return describe(p.problem()); })
      .def_static(
          "can_implement",
          [](const Team& team, const std::string& op, int64_t m_, int64_t n, int64_t k, int64_t l,
             const std::string& dtype, const std::string& b_layout, bool has_c, const std::string& shard_dim,
             const std::string& impl, bool return_gathered_a, const std::string& out_dtype, const std::string& scale,
             const std::string& a_layout, int64_t lda, int64_t ldb, int64_t ldc, int64_t ldd,
             const std::string& b_dtype, bool deterministic) {
            const ProblemArgs a =
                problem_args(op, m_, n, k, l, dtype, b_layout, 1.0f, has_c ? 1.0f : 0.0f, has_c, shard_dim, impl, 0,
                             -1, return_gathered_a, out_dtype, scale, a_layout, lda, ldb, ldc, ldd, b_dtype, deterministic);
            const Status s = Plan::can_implement(team, a.p, a.o);
            return std::make_tuple(std::string(to_string(s.code)), s.message);
          },
          nb::arg("team"), nb::arg("op"), nb::arg("m"), nb::arg("n"), nb::arg("k"), nb::arg("l") = 1,
          nb::arg("dtype") = "bf16", nb::arg("b_layout") = "nk", nb::arg("has_c") = false, nb::arg("shard_dim") = "m",
          nb::arg("impl") = "auto", nb::arg("return_gathered_a") = false, nb::arg("out_dtype") = "",
          nb::arg("scale") = "tensor", nb::arg("a_layout") = "mk", nb::arg("lda") = 0, nb::arg("ldb") = 0,
          nb::arg("ldc") = 0, nb::arg("ldd") = 0, nb::arg("b_dtype") = "", nb::arg("deterministic") = false,
          "(code, message): would this rank accept the problem? Local; 'Ok' if so.");

  nb::class_<AllReducePlan>(m, "AllReducePlan")
      .def(
          "__init__",
          [](AllReducePlan* self, const Team& team, int64_t count, const std::string& dtype, const std::string& impl,
             bool tune) {
            const DType dt = dtype_arg(dtype);
            const AllReduceImpl ai = parsed(parse_allreduce_impl(impl), "impl", impl, "auto, nccl, oneshot or twoshot");
            nb::gil_scoped_release release;
            new (self) AllReducePlan(team, count, dt, ai, tune ? PlanOptions::Tune::kDefault : PlanOptions::Tune::kOff);
          },
          nb::arg("team"), nb::arg("count"), nb::arg("dtype") = "bf16", nb::arg("impl") = "auto", nb::arg("tune") = true,
          "Collective: `count` elements per rank (see tpgemm/allreduce.h). tune=False: auto takes the rules "
          "(the same choice in every process); True: it times the algorithms unless TPGEMM_TUNE=0.")
      .def(
          "run",
          [](AllReducePlan& self, uintptr_t in, uintptr_t out, uintptr_t stream, std::optional<int64_t> count) {
            self.run(ptr(in), ptr(out), count.value_or(self.count()), stream_of(stream));
          },
          nb::arg("input"), nb::arg("output"), nb::arg("stream"), nb::arg("count") = nb::none(),
          nb::call_guard<nb::gil_scoped_release>(),
          "`count`: this call's elements, 1 to the plan's (None: the plan's).")
      .def("prepare", &AllReducePlan::prepare, nb::arg("count"), nb::call_guard<nb::gil_scoped_release>(),
           "Collective: makes the algorithm that calls of `count` elements run, now (outside capture).")
      .def("impl_for", [](const AllReducePlan& p, int64_t count) { return std::string(to_string(p.impl(count))); },
           nb::arg("count"), "The algorithm a call of `count` elements runs.")
      .def_prop_ro("impl", [](const AllReducePlan& p) { return std::string(to_string(p.impl())); })
      .def_prop_ro("count", &AllReducePlan::count)
      .def_prop_ro("selection", [](const AllReducePlan& p) { return selection_tuple(p.selection()); },
                   "(source, detail, tuning_ms): how auto routes calls by size (asked, tuned or fallback), "
                   "with the times of every size timed on this team.");
}
