// On a GPU: each built-in problem's trusted reference kernel agrees with an
// independent CPU computation of the same op (written here from the op's
// definition, in double) on small, odd shapes — so a reference that indexes,
// pads, strides or normalizes wrongly is caught, not trusted.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "cached_runner.h"
#include "cuda/objects.h"
#include "ksearch/problem.h"
#include "test_util.h"

namespace ksearch {
namespace {

using internal::CudaContext;
using internal::DeviceBuffer;
using internal::Stream;
using testing::LoadAsCached;
using testing::TempDir;

using Tensors = std::map<std::string, std::vector<float>>;
using Dims = std::map<std::string, int64_t>;

// --- The ops, from their definitions (TARGETS.md, each problem's prompt) ---

std::vector<float> Softmax(const Tensors& in, const Dims& d) {
  const int64_t rows = d.at("rows"), cols = d.at("cols");
  const std::vector<float>& x = in.at("x");
  std::vector<float> y(x.size());
  for (int64_t r = 0; r < rows; ++r) {
    const float* xr = &x[r * cols];
    double m = xr[0];
    for (int64_t c = 1; c < cols; ++c) m = std::max(m, static_cast<double>(xr[c]));
    double sum = 0;
    for (int64_t c = 0; c < cols; ++c) sum += std::exp(xr[c] - m);
    for (int64_t c = 0; c < cols; ++c) y[r * cols + c] = static_cast<float>(std::exp(xr[c] - m) / sum);
  }
  return y;
}

std::vector<float> LayerNorm(const Tensors& in, const Dims& d) {
  const int64_t n = d.at("N"), size = d.at("C") * d.at("H") * d.at("W");
  const std::vector<float>& x = in.at("x");
  const std::vector<float>& w = in.at("weight");
  const std::vector<float>& b = in.at("bias");
  std::vector<float> y(x.size());
  for (int64_t s = 0; s < n; ++s) {
    const float* xs = &x[s * size];
    double mean = 0;
    for (int64_t i = 0; i < size; ++i) mean += xs[i];
    mean /= static_cast<double>(size);
    double var = 0;
    for (int64_t i = 0; i < size; ++i) var += (xs[i] - mean) * (xs[i] - mean);
    var /= static_cast<double>(size);  // biased, as PyTorch's layer_norm
    const double inv = 1.0 / std::sqrt(var + 1e-5);
    for (int64_t i = 0; i < size; ++i) {
      y[s * size + i] = static_cast<float>((xs[i] - mean) * inv * w[i] + b[i]);
    }
  }
  return y;
}

std::vector<float> Matmul(const Tensors& in, const Dims& d) {
  const int64_t m = d.at("M"), n = d.at("N"), k = d.at("K");
  const std::vector<float>& a = in.at("A");
  const std::vector<float>& b = in.at("B");
  std::vector<float> c(static_cast<size_t>(m * n));
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t j = 0; j < n; ++j) {
      double acc = 0;
      for (int64_t p = 0; p < k; ++p) acc += static_cast<double>(a[i * k + p]) * b[p * n + j];
      c[i * n + j] = static_cast<float>(acc);
    }
  }
  return c;
}

// Conv2d with bias, zero padding, in double; out[n][oc][oh][ow].
std::vector<double> Conv(const Tensors& in, const Dims& d) {
  const int64_t n = d.at("N"), c = d.at("C"), h = d.at("H"), w = d.at("W"), oc = d.at("OC");
  const int64_t kh = d.at("KH"), kw = d.at("KW"), stride = d.at("STRIDE"), pad = d.at("PAD");
  const int64_t oh = (h + 2 * pad - kh) / stride + 1, ow = (w + 2 * pad - kw) / stride + 1;
  EXPECT_EQ(oh, d.at("OH"));
  EXPECT_EQ(ow, d.at("OW"));
  const std::vector<float>& x = in.at("x");
  const std::vector<float>& wt = in.at("weight");
  const std::vector<float>& bias = in.at("bias");
  std::vector<double> y(static_cast<size_t>(n * oc * oh * ow));
  for (int64_t s = 0; s < n; ++s)
    for (int64_t o = 0; o < oc; ++o)
      for (int64_t r = 0; r < oh; ++r)
        for (int64_t q = 0; q < ow; ++q) {
          double acc = bias[o];
          for (int64_t ci = 0; ci < c; ++ci)
            for (int64_t i = 0; i < kh; ++i)
              for (int64_t j = 0; j < kw; ++j) {
                const int64_t yy = r * stride - pad + i, xx = q * stride - pad + j;
                if (yy < 0 || yy >= h || xx < 0 || xx >= w) continue;
                acc += static_cast<double>(x[((s * c + ci) * h + yy) * w + xx]) *
                       wt[((o * c + ci) * kh + i) * kw + j];
              }
          y[((s * oc + o) * oh + r) * ow + q] = acc;
        }
  return y;
}

std::vector<float> Conv2d(const Tensors& in, const Dims& d) {
  std::vector<double> y = Conv(in, d);
  return std::vector<float>(y.begin(), y.end());
}

std::vector<float> ConvReluMaxPool(const Tensors& in, const Dims& d) {
  std::vector<double> conv = Conv(in, d);
  const int64_t n = d.at("N"), oc = d.at("OC"), oh = d.at("OH"), ow = d.at("OW");
  const int64_t pool = d.at("POOL"), ps = d.at("POOL_STRIDE");
  const int64_t ph = (oh - pool) / ps + 1, pw = (ow - pool) / ps + 1;
  EXPECT_EQ(ph, d.at("PH"));
  EXPECT_EQ(pw, d.at("PW"));
  std::vector<float> y(static_cast<size_t>(n * oc * ph * pw));
  for (int64_t s = 0; s < n * oc; ++s)
    for (int64_t r = 0; r < ph; ++r)
      for (int64_t q = 0; q < pw; ++q) {
        double best = 0.0;  // ReLU: max(0, every element of the window)
        for (int64_t i = 0; i < pool; ++i)
          for (int64_t j = 0; j < pool; ++j) {
            best = std::max(best, conv[(s * oh + r * ps + i) * ow + q * ps + j]);
          }
        y[(s * ph + r) * pw + q] = static_cast<float>(best);
      }
  return y;
}

struct Case {
  const char* problem;
  std::vector<std::pair<std::string, int64_t>> dims;
  std::function<std::vector<float>(const Tensors&, const Dims&)> cpu;
  // Mean of the inputs named here (others: 0); spread 1.
  std::map<std::string, double> means;
};

std::vector<Case> Cases() {
  return {
      {"softmax", {{"rows", 5}, {"cols", 3001}}, Softmax, {}},
      {"softmax", {{"rows", 3}, {"cols", 777}}, Softmax, {{"x", 100.0}}},
      {"layernorm", {{"N", 3}, {"C", 4}, {"H", 9}, {"W", 23}}, LayerNorm, {{"weight", 1.0}}},
      {"layernorm", {{"N", 2}, {"C", 3}, {"H", 7}, {"W", 17}}, LayerNorm, {{"x", 100.0}}},
      {"matmul", {{"M", 70}, {"N", 50}, {"K", 90}}, Matmul, {}},
      {"conv2d",
       {{"N", 2}, {"C", 3}, {"H", 39}, {"W", 35}, {"OC", 5}, {"OH", 9}, {"OW", 8}},
       Conv2d,
       {}},
      {"conv2d_relu_maxpool",
       {{"N", 2}, {"C", 3}, {"H", 39}, {"W", 43}, {"OC", 5}, {"OH", 9}, {"OW", 10}, {"PH", 4},
        {"PW", 4}},
       ConvReluMaxPool,
       {}},
  };
}

// Elements where got and want differ by more than what rounding a double
// result to fp32 (and a different summation order in double) explains.
int64_t Mismatches(const std::vector<float>& got, const std::vector<float>& want, std::string* first) {
  double rms = 0;
  for (float v : want) rms += static_cast<double>(v) * v;
  rms = std::sqrt(rms / std::max<size_t>(1, want.size()));
  int64_t bad = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    const double err = std::fabs(static_cast<double>(got[i]) - want[i]);
    if (!(err <= 1e-5 * rms + 2e-6 * std::fabs(want[i]))) {
      if (bad++ == 0) {
        *first = "element " + std::to_string(i) + ": GPU " + std::to_string(got[i]) + ", CPU " +
                 std::to_string(want[i]);
      }
    }
  }
  return bad;
}

class ReferenceAgreesWithCpu : public ::testing::TestWithParam<size_t> {};

TEST_P(ReferenceAgreesWithCpu, OnSmallShapes) {
  KSEARCH_REQUIRE_GPU();
  const Case c = Cases()[GetParam()];
  auto full = LoadProblem(c.problem);
  ASSERT_TRUE(full.ok()) << full.status().ToString();
  auto problem = full->WithDims(c.dims);
  ASSERT_TRUE(problem.ok()) << problem.status().ToString();
  Dims dims(problem->dims.begin(), problem->dims.end());

  auto ctx = CudaContext::Create(0);
  ASSERT_TRUE(ctx.ok()) << ctx.status().ToString();
  TempDir dir;
  auto runner = LoadAsCached(*problem, problem->reference, "reference", (*ctx)->info(), dir.path() + "/k.db");
  ASSERT_TRUE(runner.ok()) << runner.status().ToString();

  const internal::DriverApi& api = (*ctx)->api();
  ASSERT_TRUE((*ctx)->MakeCurrent().ok());
  std::mt19937 rng(static_cast<unsigned>(GetParam()) + 7);
  Tensors inputs;
  std::vector<DeviceBuffer> buffers;
  std::vector<TensorPointer> pointers;
  std::string output_name;
  for (const TensorSpec& t : problem->tensors) {
    auto elements = problem->Elements(t);
    ASSERT_TRUE(elements.ok()) << elements.status().ToString();
    auto buffer = DeviceBuffer::Allocate(api, *elements * 4);
    ASSERT_TRUE(buffer.ok());
    if (t.role == TensorRole::kInput) {
      auto mean = c.means.find(t.name);
      std::normal_distribution<float> normal(mean == c.means.end() ? 0.0f : static_cast<float>(mean->second), 1.0f);
      std::vector<float>& host = inputs[t.name];
      host.resize(static_cast<size_t>(*elements));
      for (float& v : host) v = normal(rng);
      ASSERT_EQ(api.cuMemcpyHtoD(buffer->ptr(), host.data(), host.size() * 4), CUDA_SUCCESS);
    } else {
      output_name = t.name;
      ASSERT_EQ(api.cuMemsetD32Async(buffer->ptr(), 0x7fc00000u, static_cast<size_t>(*elements), nullptr),
                CUDA_SUCCESS);
    }
    buffers.push_back(std::move(*buffer));
    pointers.push_back({t.name, reinterpret_cast<void*>(buffers.back().ptr())});
  }
  auto stream = Stream::Create(api);
  ASSERT_TRUE(stream.ok());
  Status launched = (*runner)->Launch(stream->get(), pointers);
  ASSERT_TRUE(launched.ok()) << launched.ToString();
  ASSERT_EQ(api.cuStreamSynchronize(stream->get()), CUDA_SUCCESS);

  std::vector<float> want = c.cpu(inputs, dims);
  std::vector<float> got(want.size());
  for (size_t i = 0; i < problem->tensors.size(); ++i) {
    if (problem->tensors[i].name == output_name) {
      ASSERT_EQ(api.cuMemcpyDtoH(got.data(), buffers[i].ptr(), got.size() * 4), CUDA_SUCCESS);
    }
  }
  std::string first;
  EXPECT_EQ(Mismatches(got, want, &first), 0) << c.problem << ": " << first;

  // The comparison can fail: the same output against a CPU result with one
  // row shifted by one element is caught.
  std::vector<float> shifted = want;
  std::rotate(shifted.begin(), shifted.begin() + 1, shifted.begin() + std::min<size_t>(shifted.size(), 64));
  EXPECT_GT(Mismatches(got, shifted, &first), 0) << c.problem;
}

INSTANTIATE_TEST_SUITE_P(Builtin, ReferenceAgreesWithCpu, ::testing::Range<size_t>(0, 7),
                         [](const ::testing::TestParamInfo<size_t>& param) {
                           std::string name = Cases()[param.param].problem;
                           return name + "_" + std::to_string(param.param);
                         });

}  // namespace
}  // namespace ksearch
