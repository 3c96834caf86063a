#include "bench/report.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <sstream>

#include "core/format.h"

namespace tpgemm::bench {

double ResultRow::tflops_per_gpu() const {
  return ms > 0 && op != "allreduce" ? 2.0 * m * n * k * l / (ms * 1e-3) / 1e12 : 0.0;
}
double ResultRow::speedup() const { return ms > 0 && baseline_ms > 0 ? baseline_ms / ms : 0.0; }
double ResultRow::ideal_speedup() const {
  const double floor = std::max(gemm_ms, comm_ms);
  return floor > 0 && baseline_ms > 0 ? baseline_ms / floor : 0.0;
}
double ResultRow::busbw_gbs() const {
  return ms > 0 ? static_cast<double>(bytes) / (ms * 1e-3) * 2.0 * (world - 1) / world / 1e9 : 0.0;
}

std::string table_header(const std::string& op) {
  if (op == "gemm")
    return strfmt("%-8s %2s %6s %6s %6s %-22s %-22s %9s %9s %11s %10s", "op", "W", "M", "N", "K", "impl", "ran", "ms",
                  "TFLOP/s", "vs cuBLASLt", "check");
  if (op == "allreduce")
    return strfmt("%-10s %2s %12s %-12s %-12s %10s %10s %9s %10s %10s %10s", "op", "W", "bytes", "impl", "ran", "us",
                  "busbw GB/s", "vs nccl", "call us", "graph us", "check");
  return strfmt("%-8s %2s %6s %6s %6s %-13s %-18s %9s %9s %8s %7s %8s %10s", "op", "W", "M", "N", "K", "impl", "ran", "ms",
                "TFLOP/s", "speedup", "ideal", "of ideal", "check");
}

std::string table_row(const ResultRow& r) {
  const std::string check = r.rel_err < 0 ? "-" : strfmt("%s %.1e", r.check_ok ? "ok" : "FAIL", r.rel_err);
  if (!r.note.empty())
    return strfmt("%-8s %2d %6lld %6lld %6lld %-13s %s", r.op.c_str(), r.world, r.op == "allreduce" ? r.bytes : r.m, r.n, r.k,
                  r.impl.c_str(), r.note.c_str());
  if (r.op == "gemm")
    return strfmt("%-8s %2d %6lld %6lld %6lld %-22s %-22s %9.3f %9.1f %10.3fx %10s", r.op.c_str(), r.world, r.m, r.n, r.k,
                  r.impl.c_str(), r.chosen.c_str(), r.ms, r.tflops_per_gpu(), r.speedup(), check.c_str());
  if (r.op == "allreduce")
    return strfmt("%-10s %2d %12lld %-12s %-12s %10.1f %10.1f %8.2fx %10.1f %10.1f %10s", r.op.c_str(), r.world, r.bytes,
                  r.impl.c_str(), r.chosen.c_str(), r.ms * 1e3, r.busbw_gbs(), r.speedup(), r.call_ms * 1e3,
                  r.graph_ms * 1e3, check.c_str());
  // "ran": the implementation, and pipelined_ce's matmuls where they are the Hopper core's.
  const std::string ran = r.chosen + (r.matmul == "sm90" ? "/sm90" : "");
  return strfmt("%-8s %2d %6lld %6lld %6lld %-13s %-18s %9.3f %9.1f %7.2fx %6.2fx %7.0f%% %10s", r.op.c_str(), r.world, r.m,
                r.n, r.k, r.impl.c_str(), ran.c_str(), r.ms, r.tflops_per_gpu(), r.speedup(), r.ideal_speedup(),
                r.ideal_speedup() > 0 ? 100.0 * r.speedup() / r.ideal_speedup() : 0.0, check.c_str());
}

std::string summary(const std::vector<ResultRow>& rows) {
  struct Acc {
    double log_sum = 0;
    int n = 0;
    double worst = 1e30;
  };
  std::map<std::string, Acc> acc;
  for (const auto& r : rows) {
    if (r.ms <= 0 || r.speedup() <= 0) continue;
    Acc& a = acc[strfmt("%-9s W=%d %-13s", r.op.c_str(), r.world, r.impl.c_str())];
    a.log_sum += std::log(r.speedup());
    a.n += 1;
    a.worst = std::min(a.worst, r.speedup());
  }
  std::ostringstream out;
  out << "geomean speedup over the baseline (shapes, worst shape):\n";
  for (const auto& [key, a] : acc)
    out << strfmt("  %s %6.3fx over %2d shapes, worst %.3fx\n", key.c_str(), std::exp(a.log_sum / a.n), a.n, a.worst);
  // auto against the fastest implementation of its shape (auto itself aside), per (op, W).
  struct Shape {
    double best = 0, auto_ms = 0, tuning_ms = -1;
  };
  std::map<std::string, std::map<std::string, Shape>> shapes;  // (op, W) -> shape -> times
  for (const auto& r : rows) {
    if (r.ms <= 0 || r.op == "allreduce" || r.op == "gemm") continue;
    Shape& sh = shapes[strfmt("%-9s W=%d", r.op.c_str(), r.world)][strfmt("%lld %lld %lld %lld", r.m, r.n, r.k, r.l)];
    if (r.impl == "auto") {
      sh.auto_ms = r.ms;
      sh.tuning_ms = r.tuning_ms;
    } else if (sh.best <= 0 || r.ms < sh.best) {
      sh.best = r.ms;
    }
  }
  bool header = false;
  for (const auto& [key, by_shape] : shapes) {
    Acc a;
    double tuning = 0, tuning_max = 0;
    int tuned = 0;
    for (const auto& [name, sh] : by_shape) {
      if (sh.auto_ms <= 0 || sh.best <= 0) continue;
      const double r = sh.best / sh.auto_ms;
      a.log_sum += std::log(r), a.n += 1, a.worst = std::min(a.worst, r);
      if (sh.tuning_ms >= 0) tuning += sh.tuning_ms, tuning_max = std::max(tuning_max, sh.tuning_ms), tuned += 1;
    }
    if (a.n == 0) continue;
    if (!header) out << "auto against the fastest implementation of each shape (geomean, worst; tuning time per plan):\n";
    header = true;
    out << strfmt("  %s %6.3fx over %2d shapes, worst %.3fx", key.c_str(), std::exp(a.log_sum / a.n), a.n, a.worst);
    if (tuned > 0) out << strfmt("; tuned %d, %.0f ms mean, %.0f ms max", tuned, tuning / tuned, tuning_max);
    out << "\n";
  }
  return out.str();
}

namespace {
std::string esc(const std::string& s) {
  std::string o;
  for (char c : s) {
    if (c == '"' || c == '\\') o += '\\';
    if (c == '\n') {
      o += "\\n";
      continue;
    }
    o += c;
  }
  return o;
}
}  // namespace

std::string to_json(const std::vector<ResultRow>& rows, const std::string& device, const std::string& command,
                    const std::string& date) {
  std::ostringstream o;
  o << "{\n \"device\": \"" << esc(device) << "\",\n \"command\": \"" << esc(command) << "\",\n \"date\": \"" << esc(date)
    << "\",\n \"rows\": [\n";
  for (size_t i = 0; i < rows.size(); ++i) {
    const ResultRow& r = rows[i];
    o << strfmt("  {\"op\": \"%s\", \"W\": %d, \"M\": %lld, \"N\": %lld, \"K\": %lld, \"L\": %lld, \"bytes\": %lld, "
                "\"dtype\": \"%s\", \"b_dtype\": \"%s\", \"out_dtype\": \"%s\", \"scale\": \"%s\", \"layout\": \"%s\", \"impl\": \"%s\", \"ran\": \"%s\", \"chunks\": %d, \"comm_sms\": %d, \"matmul\": \"%s\", \"ms\": %.6f, \"call_ms\": %.6f, \"graph_ms\": %.6f, \"tflops_per_gpu\": %.2f, "
                "\"baseline_ms\": %.6f, \"gemm_only_ms\": %.6f, \"comm_only_ms\": %.6f, \"speedup\": %.4f, "
                "\"ideal_speedup\": %.4f, \"busbw_gbs\": %.2f, \"rel_err\": %.3e, \"check\": \"%s\", \"note\": \"%s\", "
                "\"selection\": \"%s\", \"tuning_ms\": %.3f}",
                r.op.c_str(), r.world, r.m, r.n, r.k, r.l, r.bytes, r.dtype.c_str(), (r.b_dtype.empty() ? r.dtype : r.b_dtype).c_str(), r.out_dtype.c_str(), r.scale.c_str(), r.layout.c_str(), r.impl.c_str(), r.chosen.c_str(), r.chunks,
                r.comm_sms, r.matmul.c_str(), r.ms, r.call_ms, r.graph_ms, r.tflops_per_gpu(), r.baseline_ms, r.gemm_ms, r.comm_ms, r.speedup(), r.ideal_speedup(), r.busbw_gbs(),
                r.rel_err, r.rel_err < 0 ? "not run" : (r.check_ok ? "pass" : "fail"), esc(r.note).c_str(),
                esc(r.selection).c_str(), r.tuning_ms)
      << (i + 1 < rows.size() ? ",\n" : "\n");
  }
  o << " ]\n}\n";
  return o.str();
}

}  // namespace tpgemm::bench
