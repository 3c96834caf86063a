// The Hopper GEMM core (gemm::Sm90Gemm): every configuration, dtype, B layout, with and without
// C, on shapes that are not multiples of any tile, against a plain CUDA reference; two runs must
// give bitwise identical D (stream-K included: its partial sums are reduced in a fixed order).
#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "core/check.h"
#include "core/cuda_raii.h"
#include "gemm/sm90_config.h"
#include "gemm/sm90_gemm.h"
#include "support/gpu_env.h"
#include "support/dist_harness.h"
#include "testing/testing.h"

namespace tpgemm {
namespace {

struct Shape {
  int64_t m, n, k, l;
};
constexpr Shape kShapes[] = {{77, 136, 72, 1}, {300, 264, 520, 3}, {1024, 1024, 1024, 1}, {129, 4096, 4096, 1}};
constexpr float kAlpha = 0.75f, kBeta = 1.5f;

// Operands of one case, filled, and the fp32 reference D.
struct Case {
  Case(const Shape& s, DType dt, BLayout layout, bool with_c, cudaStream_t st)
      : shape(gemm::packed_shape(s.m, s.n, s.k, s.l, dt, layout)), es(dtype_size(dt)), count(s.l * s.m * s.n),
        a(s.l * s.m * s.k * es), b(s.l * s.k * s.n * es), c(count * es), d(count * es), ref(count * sizeof(float)) {
    shape.has_c = with_c;
    const int64_t b_rows = layout == BLayout::kKN ? s.k : s.n, b_cols = layout == BLayout::kKN ? s.n : s.k;
    testing::fill_random(a.get(), dt, s.l, s.m, s.k, 0, s.m, 21, st);
    testing::fill_random(b.get(), dt, s.l, b_rows, b_cols, 0, b_rows, 22, st);
    testing::fill_random(c.get(), dt, s.l, s.m, s.n, 0, s.m, 23, st);
    TPGEMM_CUDA_CHECK(cudaMemsetAsync(ref.get(), 0, ref.bytes(), st));
    testing::reference_gemm(a.get(), b.get(), with_c ? c.get() : nullptr, ref.as<float>(), s.m, s.n, s.k, s.l, dt, layout,
                            kAlpha, kBeta, testing::RefEngine::kNaive, nullptr, st);
  }
  const void* c_arg() const { return shape.has_c ? c.get() : nullptr; }

  gemm::MatmulShape shape;
  size_t es;
  int64_t count;
  DeviceBuffer a, b, c, d, ref;
};

std::string describe(const gemm::MatmulShape& s, const char* config) {
  return strfmt("%s: %lldx%lldx%lld L=%lld %s B=%s%s", config, (long long)s.m, (long long)s.n, (long long)s.k,
                (long long)s.batch, std::string(to_string(s.dtype)).c_str(), std::string(to_string(s.b_layout)).c_str(),
                s.has_c ? " +C" : "");
}

// D's bits once the work on `st` that writes it is done. (A plain cudaMemcpy would not wait for
// it: it runs on the legacy default stream, which does not synchronise with non-blocking streams
// such as `st`; read early, D is C or half-written wherever the kernel runs slower, as under a
// sanitizer.)
std::vector<uint16_t> d_bits(const Case& x, cudaStream_t st) {
  std::vector<uint16_t> bits(x.count);
  TPGEMM_CUDA_CHECK(cudaMemcpyAsync(bits.data(), x.d.get(), bits.size() * 2, cudaMemcpyDeviceToHost, st));
  TPGEMM_CUDA_CHECK(cudaStreamSynchronize(st));
  return bits;
}

// Poisons D, runs once, returns D's error against the reference and D's bits.
std::vector<uint16_t> run_checked(const gemm::Sm90Gemm& mm, const Case& x, const void* c, const DeviceBuffer& ws,
                                  cudaStream_t st, testing::Diff* diff) {
  testing::poison(x.d.get(), x.count, x.shape.dtype, st);
  mm.run(x.a.get(), x.b.get(), c, x.d.get(), kAlpha, kBeta, ws.get(), st);
  *diff = testing::compare(x.d.get(), x.shape.dtype, x.ref.as<float>(), 1, x.count, 0, 0, 0, st);
  return d_bits(x, st);
}

// Where two bf16 results of an L x M x N D differ: how many elements, and the first few as
// (batch, row, column) = value against value.
std::string where_bits_differ(const std::vector<uint16_t>& x, const std::vector<uint16_t>& y, int64_t m, int64_t n) {
  const auto value = [](uint16_t bits) {
    const uint32_t u = static_cast<uint32_t>(bits) << 16;
    float f;
    std::memcpy(&f, &u, sizeof(f));
    return f;
  };
  int64_t count = 0;
  std::string first;
  for (size_t i = 0; i < x.size() && i < y.size(); ++i) {
    if (x[i] == y[i]) continue;
    if (++count <= 6) {
      const int64_t e = static_cast<int64_t>(i);
      first += strfmt(" (%lld,%lld,%lld)=%g vs %g", (long long)(e / (m * n)), (long long)(e / n % m), (long long)(e % n),
                      value(x[i]), value(y[i]));
    }
  }
  return strfmt("%lld of %zu elements differ:", (long long)count, x.size()) + first;
}

class Sm90GemmConfig : public ::testing::TestWithParam<std::string> {};

TEST_P(Sm90GemmConfig, MatchesAPlainKernelAndRepeatsBitwise) {
  TPGEMM_REQUIRE_GPUS(1);
  TPGEMM_CUDA_CHECK(cudaSetDevice(0));
  Stream stream = Stream::create();
  const cudaStream_t st = stream.get();
  for (const Shape& s : kShapes)
    for (DType dt : {DType::kBF16, DType::kFP16})
      for (BLayout layout : {BLayout::kNK, BLayout::kKN})
        for (bool with_c : {false, true}) {
          const Case x(s, dt, layout, with_c, st);
          const gemm::Sm90Gemm mm(x.shape, GetParam());
          ASSERT_STREQ(mm.config(), GetParam().c_str());
          const DeviceBuffer ws(mm.workspace_bytes());
          testing::Diff d1, d2;
          const auto bits1 = run_checked(mm, x, x.c_arg(), ws, st, &d1);
          const auto bits2 = run_checked(mm, x, x.c_arg(), ws, st, &d2);
          const std::string what = describe(x.shape, mm.config());
          EXPECT_TRUE(d1.passes(testing::default_eps(dt)))
              << what << ": rel_err " << d1.rel_err << ", " << d1.nonfinite << " non-finite";
          EXPECT_TRUE(bits1 == bits2) << what << ": two runs gave different D";
        }
}

TEST_P(Sm90GemmConfig, CMayBeDAndFewerSmsGiveTheSameD) {
  TPGEMM_REQUIRE_GPUS(1);
  TPGEMM_CUDA_CHECK(cudaSetDevice(0));
  Stream stream = Stream::create();
  const cudaStream_t st = stream.get();
  const Case x({300, 264, 520, 3}, DType::kBF16, BLayout::kNK, true, st);
  const gemm::Sm90Gemm mm(x.shape, GetParam());
  const DeviceBuffer ws(mm.workspace_bytes());
  testing::Diff diff;
  const auto expected = run_checked(mm, x, x.c.get(), ws, st, &diff);
  ASSERT_TRUE(diff.passes(testing::default_eps(DType::kBF16))) << diff.rel_err;
  // In place: D starts as C (as ag_gemm allows).
  TPGEMM_CUDA_CHECK(cudaMemcpyAsync(x.d.get(), x.c.get(), x.count * x.es, cudaMemcpyDeviceToDevice, st));
  mm.run(x.a.get(), x.b.get(), x.d.get(), x.d.get(), kAlpha, kBeta, ws.get(), st);
  const testing::Diff in_place_diff = testing::compare(x.d.get(), x.shape.dtype, x.ref.as<float>(), 1, x.count, 0, 0, 0, st);
  const std::vector<uint16_t> in_place = d_bits(x, st);
  EXPECT_TRUE(in_place == expected) << GetParam() << ": C == D differs from C != D (in place: rel_err "
                                    << in_place_diff.rel_err << " against the reference); "
                                    << where_bits_differ(in_place, expected, x.shape.m, x.shape.n);
  // A persistent grid on fewer SMs (the rest left to communication) computes the same tiles.
  gemm::MatmulShape fewer = x.shape;
  fewer.sm_count = 50;
  const gemm::Sm90Gemm mm50(fewer, GetParam());
  const DeviceBuffer ws50(mm50.workspace_bytes());
  const auto bits50 = run_checked(mm50, x, x.c.get(), ws50, st, &diff);
  EXPECT_TRUE(diff.passes(testing::default_eps(DType::kBF16))) << GetParam() << " on 50 SMs: rel_err " << diff.rel_err;
}

std::vector<std::string> config_names() {
  std::vector<std::string> out;
  for (const auto& c : gemm::sm90::configs()) out.emplace_back(c.name);
  return out;
}
INSTANTIATE_TEST_SUITE_P(Configs, Sm90GemmConfig, ::testing::ValuesIn(config_names()),
                         [](const ::testing::TestParamInfo<std::string>& i) { return i.param; });

TEST(Sm90Gemm, MeasuredRuleAndEnvironmentPickAConfigAndBadInputIsRefused) {
  TPGEMM_REQUIRE_GPUS(1);
  TPGEMM_CUDA_CHECK(cudaSetDevice(0));
  const gemm::MatmulShape s = gemm::packed_shape(2048, 3584, 8192, 1, DType::kBF16, BLayout::kNK);
  unsetenv("TPGEMM_SM90_CONFIG");
  int sms = 0;
  TPGEMM_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
  const std::string rule = gemm::sm90::configs()[gemm::sm90::choose_config(2048, 3584, 8192, 1, sms)].name;
  EXPECT_EQ(gemm::Sm90Gemm(s, "rule").config(), rule);
  // Measured (NOTE [measured core config]): one of the configurations, the same for the shape's
  // next plan; the rule's with tuning off.
  const std::string measured = gemm::Sm90Gemm(s).config();
  EXPECT_TRUE(gemm::sm90::find_config(measured).has_value()) << measured;
  EXPECT_EQ(gemm::Sm90Gemm(s).config(), measured);
  const gemm::MatmulShape other = gemm::packed_shape(1024, 3584, 2048, 1, DType::kBF16, BLayout::kNK);
  const std::string other_rule = gemm::sm90::configs()[gemm::sm90::choose_config(1024, 3584, 2048, 1, sms)].name;
  EXPECT_EQ(gemm::Sm90Gemm(other, {}, /*measure=*/false).config(), other_rule);
  setenv("TPGEMM_TUNE", "0", 1);
  EXPECT_EQ(gemm::Sm90Gemm(other).config(), other_rule);
  unsetenv("TPGEMM_TUNE");
  // Measured on every case shape (batched and cut ones among them): the configuration it picks
  // computes D.
  Stream stream = Stream::create();
  for (const Shape& sh : kShapes)
    for (bool with_c : {false, true}) {
      const Case x(sh, DType::kBF16, BLayout::kKN, with_c, stream.get());
      const gemm::Sm90Gemm mm(x.shape);
      const DeviceBuffer ws(mm.workspace_bytes());
      testing::Diff diff;
      run_checked(mm, x, x.c_arg(), ws, stream.get(), &diff);
      EXPECT_TRUE(diff.passes(testing::default_eps(DType::kBF16))) << describe(x.shape, mm.config()) << ": rel_err "
                                                                   << diff.rel_err;
    }
  setenv("TPGEMM_SM90_CONFIG", "pingpong_128x128_c1x2", 1);
  EXPECT_STREQ(gemm::Sm90Gemm(s).config(), "pingpong_128x128_c1x2");
  setenv("TPGEMM_SM90_CONFIG", "fastest", 1);
  const Status bad_name = testsupport::caught([&] { gemm::Sm90Gemm mm(s); });
  unsetenv("TPGEMM_SM90_CONFIG");
  EXPECT_EQ(bad_name.code, ErrorCode::kInvalidArgument);
  EXPECT_NE(bad_name.message.find("coop_128x256_c2x1"), std::string::npos) << bad_name.message;

  const Status odd_k = testsupport::caught([] { gemm::Sm90Gemm mm(gemm::packed_shape(64, 64, 100, 1, DType::kBF16, BLayout::kNK)); });
  EXPECT_EQ(odd_k.code, ErrorCode::kUnsupported);
  EXPECT_NE(odd_k.message.find("K=100"), std::string::npos) << odd_k.message;
  std::string why;
  EXPECT_FALSE(gemm::Sm90Gemm::supports(gemm::packed_shape(64, 100, 64, 1, DType::kFP16, BLayout::kKN), &why));
  EXPECT_NE(why.find("N=100"), std::string::npos) << why;

  const gemm::Sm90Gemm mm(gemm::packed_shape(64, 64, 64, 1, DType::kBF16, BLayout::kNK));
  DeviceBuffer buf(64 * 64 * 2 + 16), ws(mm.workspace_bytes());
  const Status misaligned = testsupport::caught(
      [&] { mm.run(buf.as<char>() + 8, buf.get(), nullptr, buf.get(), 1.0f, 0.0f, ws.get(), nullptr); });
  EXPECT_EQ(misaligned.code, ErrorCode::kInvalidArgument);
  EXPECT_NE(misaligned.message.find("A="), std::string::npos) << misaligned.message;
}

}  // namespace
}  // namespace tpgemm
