// On a GPU: the rope problem's kernels agree with an independent CPU
// rotate-half (written here from the op's definition, in double) on a small
// GQA shape, launched the way an engine launches them: through KernelRunner
// on the engine's own q and k, which they overwrite in place. A reference
// that pairs the wrong elements, takes the wrong cos/sin row or maps k's
// heads wrongly is caught here, not trusted.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <random>
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
using testing::Bf16Mismatches;
using testing::FromBf16;
using testing::LoadAsCached;
using testing::TempDir;
using testing::ToBf16;

// x [rows_per_token * tokens, d] rotated in place with the token's cos/sin row.
void CpuRope(std::vector<uint16_t>* x, int tokens, int rows_per_token, int d, const std::vector<float>& cos_t,
             const std::vector<float>& sin_t) {
  const int half = d / 2;
  for (int t = 0; t < tokens; ++t) {
    for (int h = 0; h < rows_per_token; ++h) {
      uint16_t* row = x->data() + (static_cast<size_t>(t) * rows_per_token + h) * d;
      for (int i = 0; i < half; ++i) {
        const double x1 = FromBf16(row[i]), x2 = FromBf16(row[i + half]);
        const double c = cos_t[static_cast<size_t>(t) * half + i], s = sin_t[static_cast<size_t>(t) * half + i];
        row[i] = ToBf16(static_cast<float>(x1 * c - x2 * s));
        row[i + half] = ToBf16(static_cast<float>(x2 * c + x1 * s));
      }
    }
  }
}

class RopeOnGpu : public ::testing::TestWithParam<const char*> {};

TEST_P(RopeOnGpu, KernelRunnerRotatesTheEnginesBuffersInPlace) {
  KSEARCH_REQUIRE_GPU();
  auto full = LoadProblem("rope");
  ASSERT_TRUE(full.ok()) << full.status().ToString();
  const int tokens = 7, heads = 4, kv_heads = 2, d = 32;
  auto problem = full->WithDims({{"tokens", tokens}, {"heads", heads}, {"kv_heads", kv_heads}, {"head_dim", d}});
  ASSERT_TRUE(problem.ok()) << problem.status().ToString();
  problem->shapes.clear();  // one shape: these dims
  const std::string which = GetParam();
  KernelSpec kernel = which == "reference" ? problem->reference : which == "start" ? problem->start
                                                                                    : problem->templates.at(0).kernel;

  auto ctx = CudaContext::Create(0);
  ASSERT_TRUE(ctx.ok()) << ctx.status().ToString();
  TempDir dir;
  auto runner = LoadAsCached(*problem, kernel, which, (*ctx)->info(), dir.path() + "/k.db");
  ASSERT_TRUE(runner.ok()) << runner.status().ToString();

  std::mt19937 rng(3);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::uniform_real_distribution<float> unit(-1.0f, 1.0f);
  std::vector<uint16_t> q(static_cast<size_t>(tokens) * heads * d), k(static_cast<size_t>(tokens) * kv_heads * d);
  for (uint16_t& v : q) v = ToBf16(normal(rng));
  for (uint16_t& v : k) v = ToBf16(normal(rng));
  std::vector<float> cos_t(static_cast<size_t>(tokens) * d / 2), sin_t(cos_t.size());
  for (float& v : cos_t) v = unit(rng);
  for (float& v : sin_t) v = unit(rng);

  const internal::DriverApi& api = (*ctx)->api();
  ASSERT_TRUE((*ctx)->MakeCurrent().ok());
  auto upload = [&](const void* host, size_t bytes) {
    auto b = DeviceBuffer::Allocate(api, static_cast<int64_t>(bytes));
    EXPECT_TRUE(b.ok());
    EXPECT_EQ(api.cuMemcpyHtoD(b->ptr(), host, bytes), CUDA_SUCCESS);
    return std::move(*b);
  };
  DeviceBuffer dq = upload(q.data(), q.size() * 2), dk = upload(k.data(), k.size() * 2);
  DeviceBuffer dc = upload(cos_t.data(), cos_t.size() * 4), ds = upload(sin_t.data(), sin_t.size() * 4);
  std::vector<TensorPointer> pointers = {{"q", reinterpret_cast<void*>(dq.ptr())},
                                         {"k", reinterpret_cast<void*>(dk.ptr())},
                                         {"cos", reinterpret_cast<void*>(dc.ptr())},
                                         {"sin", reinterpret_cast<void*>(ds.ptr())}};
  auto stream = Stream::Create(api);
  ASSERT_TRUE(stream.ok());
  // Twice: each launch rotates what the buffers hold, as an engine's would.
  for (int launch = 1; launch <= 2; ++launch) {
    Status launched = (*runner)->Launch(stream->get(), pointers);
    ASSERT_TRUE(launched.ok()) << launched.ToString();
    ASSERT_EQ(api.cuStreamSynchronize(stream->get()), CUDA_SUCCESS);
    CpuRope(&q, tokens, heads, d, cos_t, sin_t);
    CpuRope(&k, tokens, kv_heads, d, cos_t, sin_t);
    std::vector<uint16_t> got_q(q.size()), got_k(k.size());
    ASSERT_EQ(api.cuMemcpyDtoH(got_q.data(), dq.ptr(), got_q.size() * 2), CUDA_SUCCESS);
    ASSERT_EQ(api.cuMemcpyDtoH(got_k.data(), dk.ptr(), got_k.size() * 2), CUDA_SUCCESS);
    std::string first;
    EXPECT_EQ(Bf16Mismatches(got_q, q, &first), 0) << which << " q, launch " << launch << ": " << first;
    EXPECT_EQ(Bf16Mismatches(got_k, k, &first), 0) << which << " k, launch " << launch << ": " << first;
    // Resynchronise on the GPU's values so that a one-step difference in
    // the first launch does not compound in the second.
    q = got_q;
    k = got_k;
  }
  // The comparison can fail: the buffer rotated once more is told apart.
  std::vector<uint16_t> again = k;
  CpuRope(&again, tokens, kv_heads, d, cos_t, sin_t);
  std::string first;
  EXPECT_GT(Bf16Mismatches(again, k, &first), 0);
}

INSTANTIATE_TEST_SUITE_P(Kernels, RopeOnGpu, ::testing::Values("reference", "start", "template"));

}  // namespace
}  // namespace ksearch
