// On a GPU: the fused projections (linear_swiglu, linear_residual,
// linear_qkv_rope) agree with an independent CPU computation of the op
// (written here from its definition, in double, each output rounded once),
// launched the way an engine launches them: through KernelRunner on the
// engine's own buffers, k and v written into a KV cache at an offset whose
// earlier rows must survive. The reference (trusted by the judge), the
// starting kernel and every template's default are checked at a
// decode-sized and a ragged prefill-sized M, so a kernel that pairs the
// wrong gate and up columns, adds the residual of another row, rotates the
// wrong halves or writes outside its rows is caught here, not trusted.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <functional>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "bf16_host.h"
#include "cached_runner.h"
#include "cuda/objects.h"
#include "ksearch/problem.h"
#include "test_util.h"

namespace ksearch {
namespace {

using internal::CudaContext;
using internal::DeviceBuffer;
using internal::Stream;
using testing::FromBf16;
using testing::LoadAsCached;
using testing::TempDir;
using testing::ToBf16;

using Dims = std::map<std::string, int64_t>;
// Host tensors by name: bf16 ones as bits, f32 ones (cos, sin) as floats.
struct Host {
  std::map<std::string, std::vector<uint16_t>> bf16;
  std::map<std::string, std::vector<float>> f32;
  double At(const std::string& name, int64_t i) const {
    return FromBf16(bf16.at(name)[static_cast<size_t>(i)]);
  }
};

uint16_t Round(double v) { return ToBf16(static_cast<float>(v)); }

// Elements of `got` off `want` by more than the judge's strict rule allows:
// one bf16 step of the expected value plus `atol_fraction` of the expected
// tensor's RMS (the problem's atol_rms_fraction). One step alone is too
// tight for a fused epilogue: an output near zero after the residual cancels
// the product, or a product rounded before the epilogue as the unfused
// sequence does, is off by more than one step of its own small value.
int64_t OutsideTheStrictRule(const std::vector<uint16_t>& got, const std::vector<uint16_t>& want,
                             double atol_fraction, std::string* first) {
  double sum = 0.0;
  for (uint16_t w : want) sum += static_cast<double>(FromBf16(w)) * FromBf16(w);
  const double atol = atol_fraction * std::sqrt(sum / static_cast<double>(want.size()));
  int64_t bad = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    const float g = FromBf16(got[i]), w = FromBf16(want[i]);
    const double step = std::ldexp(1.0, std::ilogb(std::max(std::fabs(w), 1e-30f)) - 7);
    if (!(std::fabs(static_cast<double>(g) - w) <= step + atol)) {
      if (bad++ == 0) {
        *first = "element " + std::to_string(i) + ": got " + std::to_string(g) + ", want " +
                 std::to_string(w) + " (allowed " + std::to_string(step + atol) + ")";
      }
    }
  }
  return bad;
}

// sum over k of X[m][k] * W[row][k], in double.
double Dot(const Host& in, int64_t m, int64_t row, int64_t k_dim) {
  double sum = 0.0;
  for (int64_t k = 0; k < k_dim; ++k)
    sum += in.At("X", m * k_dim + k) * in.At("W", row * k_dim + k);
  return sum;
}

void CpuSwiglu(const Host& in, const Dims& d, Host* out) {
  const int64_t M = d.at("M"), N = d.at("N"), K = d.at("K");
  std::vector<uint16_t>& y = out->bf16["Y"];
  y.resize(static_cast<size_t>(M * N));
  for (int64_t m = 0; m < M; ++m) {
    for (int64_t n = 0; n < N; ++n) {
      const double g = Dot(in, m, n, K), u = Dot(in, m, N + n, K);
      y[static_cast<size_t>(m * N + n)] = Round(g / (1.0 + std::exp(-g)) * u);
    }
  }
}

void CpuResidual(const Host& in, const Dims& d, Host* out) {
  const int64_t M = d.at("M"), N = d.at("N"), K = d.at("K");
  std::vector<uint16_t>& y = out->bf16["Y"];
  y.resize(static_cast<size_t>(M * N));
  for (int64_t m = 0; m < M; ++m) {
    for (int64_t n = 0; n < N; ++n)
      y[static_cast<size_t>(m * N + n)] = Round(Dot(in, m, n, K) + in.At("R", m * N + n));
  }
}

void CpuQkvRope(const Host& in, const Dims& d, Host* out) {
  const int64_t M = d.at("M"), K = d.at("K"), heads = d.at("heads"), kv = d.at("kv_heads"),
                hd = d.at("head_dim");
  const int64_t half = hd / 2;
  for (const char* name : {"q", "k", "v"})
    out->bf16[name].resize(static_cast<size_t>(M * (name[0] == 'q' ? heads : kv) * hd));
  for (int64_t m = 0; m < M; ++m) {
    for (int64_t h = 0; h < heads + 2 * kv; ++h) {
      const bool is_q = h < heads, is_v = h >= heads + kv;
      std::vector<uint16_t>& dst = out->bf16[is_q ? "q" : (is_v ? "v" : "k")];
      const int64_t local = is_q ? h : (is_v ? h - heads - kv : h - heads), per = is_q ? heads : kv;
      uint16_t* row = dst.data() + (m * per + local) * hd;
      for (int64_t i = 0; i < half; ++i) {
        const double x1 = Dot(in, m, h * hd + i, K), x2 = Dot(in, m, h * hd + i + half, K);
        if (is_v) {
          row[i] = Round(x1);
          row[i + half] = Round(x2);
          continue;
        }
        const double c = in.f32.at("cos")[static_cast<size_t>(m * half + i)];
        const double s = in.f32.at("sin")[static_cast<size_t>(m * half + i)];
        row[i] = Round(x1 * c - x2 * s);
        row[i + half] = Round(x2 * c + x1 * s);
      }
    }
  }
}

struct FusedCase {
  const char* problem;
  std::vector<std::pair<std::string, int64_t>> dims;  // M is set per run
  std::function<void(const Host&, const Dims&, Host*)> cpu;
  double w_scale;  // W's spread: keeps g and u of order 1 for swiglu
};

std::vector<FusedCase> Cases() {
  return {{"linear_swiglu", {{"N", 200}, {"K", 4096}}, CpuSwiglu, 0.02},
          {"linear_residual", {{"N", 200}, {"K", 4096}}, CpuResidual, 1.0},
          {"linear_qkv_rope", {{"K", 4096}, {"heads", 2}, {"kv_heads", 2}}, CpuQkvRope, 0.02}};
}

// Runs `kernel` of the problem at dims through KernelRunner; k and v of the
// qkv problem go into cache buffers `past` rows in, whose other rows hold a
// marker that must survive. Returns the outputs (and fails the test when a
// marker changed).
Host RunOnGpu(const Problem& problem, const KernelSpec& kernel, const std::string& label,
              const Host& in) {
  Host out;
  auto ctx = CudaContext::Create(0);
  EXPECT_TRUE(ctx.ok()) << ctx.status().ToString();
  if (!ctx.ok()) return out;
  TempDir dir;
  auto runner = LoadAsCached(problem, kernel, label, (*ctx)->info(), dir.path() + "/k.db");
  EXPECT_TRUE(runner.ok()) << label << ": " << runner.status().ToString();
  if (!runner.ok()) return out;

  const internal::DriverApi& api = (*ctx)->api();
  EXPECT_TRUE((*ctx)->MakeCurrent().ok());
  constexpr int64_t kPast = 3;          // cache rows before this step's
  constexpr uint16_t kMarker = 0x4049;  // 3.140625 in bf16
  std::vector<DeviceBuffer> buffers;
  std::vector<TensorPointer> pointers;
  std::vector<std::pair<std::string, int64_t>> outputs;  // name, row offset in elements
  for (const TensorSpec& t : problem.tensors) {
    const int64_t elements = *problem.Elements(t);
    const bool cache_rows = t.name == "k" || t.name == "v";
    const int64_t row = cache_rows ? elements / *problem.Dim("M") : 0;
    const int64_t total = elements + 2 * kPast * row;  // kPast rows before and after
    auto buffer = DeviceBuffer::Allocate(api, total * (t.dtype == DType::kF32 ? 4 : 2));
    EXPECT_TRUE(buffer.ok());
    if (!buffer.ok()) return out;
    if (t.role == TensorRole::kInput) {
      const void* host = t.dtype == DType::kF32
                             ? static_cast<const void*>(in.f32.at(t.name).data())
                             : static_cast<const void*>(in.bf16.at(t.name).data());
      EXPECT_EQ(api.cuMemcpyHtoD(buffer->ptr(), host,
                                 static_cast<size_t>(elements * (t.dtype == DType::kF32 ? 4 : 2))),
                CUDA_SUCCESS);
    } else {
      EXPECT_EQ(api.cuMemsetD16Async(buffer->ptr(), kMarker, static_cast<size_t>(total), nullptr),
                CUDA_SUCCESS);
      outputs.emplace_back(t.name, kPast * row);
    }
    pointers.push_back({t.name, reinterpret_cast<void*>(
                                    buffer->ptr() + static_cast<CUdeviceptr>(2 * kPast * row))});
    buffers.push_back(std::move(*buffer));
  }
  auto stream = Stream::Create(api);
  EXPECT_TRUE(stream.ok());
  Status launched = (*runner)->Launch(stream->get(), pointers);
  EXPECT_TRUE(launched.ok()) << label << ": " << launched.ToString();
  EXPECT_EQ(api.cuStreamSynchronize(stream->get()), CUDA_SUCCESS) << label;
  for (const auto& [name, offset] : outputs) {
    size_t index = 0;
    while (problem.tensors[index].name != name) ++index;
    const int64_t elements = *problem.Elements(problem.tensors[index]);
    std::vector<uint16_t> all(static_cast<size_t>(elements + 2 * offset));
    EXPECT_EQ(api.cuMemcpyDtoH(all.data(), buffers[index].ptr(), all.size() * 2), CUDA_SUCCESS);
    for (int64_t i = 0; i < offset; ++i) {
      EXPECT_EQ(all[static_cast<size_t>(i)], kMarker)
          << label << ": " << name << " written before its rows at " << i;
      EXPECT_EQ(all[static_cast<size_t>(offset + elements + i)], kMarker)
          << label << ": " << name << " written after its rows";
    }
    out.bf16[name].assign(all.begin() + offset, all.begin() + offset + elements);
  }
  return out;
}

class FusedOnGpu : public ::testing::TestWithParam<size_t> {};

TEST_P(FusedOnGpu, KernelRunnerMatchesTheCpuOpInTheEnginesBuffers) {
  KSEARCH_REQUIRE_GPU();
  const FusedCase c = Cases()[GetParam()];
  auto full = LoadProblem(c.problem);
  ASSERT_TRUE(full.ok()) << full.status().ToString();
  for (int64_t m : {5, 37}) {
    auto at = full->AtCase(0);
    ASSERT_TRUE(at.ok()) << at.status().ToString();
    std::vector<std::pair<std::string, int64_t>> dims = c.dims;
    dims.emplace_back("M", m);
    auto problem = at->WithDims(dims);
    ASSERT_TRUE(problem.ok()) << problem.status().ToString();
    Dims d(problem->dims.begin(), problem->dims.end());

    std::mt19937 rng(static_cast<unsigned>(GetParam() * 100 + m));
    std::normal_distribution<float> normal(0.0f, 1.0f);
    std::uniform_real_distribution<float> unit(-1.0f, 1.0f);
    Host in;
    for (const TensorSpec& t : problem->tensors) {
      if (t.role != TensorRole::kInput) continue;
      const size_t n = static_cast<size_t>(*problem->Elements(t));
      if (t.dtype == DType::kF32) {
        in.f32[t.name].resize(n);
        for (float& v : in.f32[t.name]) v = unit(rng);
      } else {
        const float scale =
            t.name == "W" ? static_cast<float>(c.w_scale) : (t.name == "R" ? 64.0f : 1.0f);
        in.bf16[t.name].resize(n);
        for (uint16_t& v : in.bf16[t.name]) v = ToBf16(scale * normal(rng));
      }
    }
    Host want;
    c.cpu(in, d, &want);

    std::vector<std::pair<std::string, KernelSpec>> kernels = {{"reference", problem->reference},
                                                               {"start", problem->start}};
    for (const TemplateSpec& t : problem->templates)
      kernels.emplace_back("template:" + t.name, t.kernel);
    for (const auto& [label, kernel] : kernels) {
      Host got = RunOnGpu(*problem, kernel, label, in);
      for (const auto& [name, expected] : want.bf16) {
        ASSERT_EQ(got.bf16[name].size(), expected.size()) << label << " " << name;
        std::string first;
        EXPECT_EQ(OutsideTheStrictRule(got.bf16[name], expected,
                                       problem->tolerance.atol_rms_fraction, &first),
                  0)
            << c.problem << " " << label << " at M = " << m << ", " << name << ": " << first;
      }
    }
    // The comparison can fail: a result with two rows swapped is told apart.
    std::vector<uint16_t> swapped = want.bf16.begin()->second;
    const size_t row = swapped.size() / static_cast<size_t>(m);
    std::swap_ranges(swapped.begin(), swapped.begin() + static_cast<long>(row),
                     swapped.begin() + static_cast<long>(row));
    std::string first;
    EXPECT_GT(OutsideTheStrictRule(swapped, want.bf16.begin()->second,
                                   problem->tolerance.atol_rms_fraction, &first),
              0);
  }
}

INSTANTIATE_TEST_SUITE_P(Fused, FusedOnGpu, ::testing::Range<size_t>(0, 3),
                         [](const ::testing::TestParamInfo<size_t>& param) {
                           return std::string(Cases()[param.param].problem);
                         });

}  // namespace
}  // namespace ksearch
