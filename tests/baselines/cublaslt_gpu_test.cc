// On a GPU: the algorithm the cuBLASLt baseline runs is the fastest of the
// heuristic's candidates on inputs like the judge's, measured again here
// independently of the choice (docs/evaluation.md, "The library's best
// algorithm, not the one timed first"). A baseline slower than the library
// can be makes every speedup against it look better than it is. The choice
// once timed the candidates one after the other, right after the GPU had
// idled: at linear's prefill shape on the H200 it kept, in some evaluations,
// an algorithm 3% slower under the judge (6% in this test), the early
// candidates having run at the clock of a cool GPU.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <random>
#include <vector>

#include "baselines/cublaslt_matmul.h"
#include "cuda/objects.h"
#include "problems/bf16_host.h"
#include "test_util.h"

namespace ksearch {
namespace {

// `count` bf16 values drawn from normal(0, 1) (as the judge's "normal"
// input set), 4 Mi of them generated on the host and copied over the rest.
void FillNormal(const internal::DriverApi& api, CUdeviceptr buffer, uint64_t count, CUstream stream,
                uint32_t seed) {
  std::mt19937 generator(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<uint16_t> host(std::min<uint64_t>(count, uint64_t{1} << 22));
  for (uint16_t& v : host) v = testing::ToBf16(normal(generator));
  ASSERT_EQ(api.cuMemcpyHtoD(buffer, host.data(), host.size() * 2), CUDA_SUCCESS);
  for (uint64_t done = host.size(); done < count;) {
    const uint64_t copy = std::min(done, count - done);
    ASSERT_EQ(api.cuMemcpyDtoDAsync(buffer + done * 2, buffer, copy * 2, stream), CUDA_SUCCESS);
    done += copy;
  }
}

TEST(CublasLtChoiceOnGpu, TheChosenAlgorithmIsTheFastestOnNormalInputs) {
  KSEARCH_REQUIRE_GPU();
  auto ctx = internal::CudaContext::Create(0);
  ASSERT_TRUE(ctx.ok()) << ctx.status().ToString();
  ASSERT_TRUE((*ctx)->MakeCurrent().ok());
  const internal::DriverApi& api = (*ctx)->api();
  // linear's prefill case: Y (8192 × 14336) = X (8192 × 4096) · Wᵀ.
  internal::MatmulShape shape;
  shape.m = 8192;
  shape.n = 14336;
  shape.k = 4096;
  shape.b_nk = true;
  auto matmul = internal::CublasLtMatmul::Create(shape);
  if (!matmul.ok() && matmul.status().code() == StatusCode::kNotFound)
    GTEST_SKIP() << matmul.status().ToString();
  ASSERT_TRUE(matmul.ok()) << matmul.status().ToString();
  const std::vector<internal::CublasLtMatmul::Timed> timed = (*matmul)->timed();
  ASSERT_FALSE(timed.empty());
  std::printf("%s\n", (*matmul)->version().c_str());

  auto x = internal::DeviceBuffer::Allocate(api, shape.m * shape.k * 2);
  auto w = internal::DeviceBuffer::Allocate(api, shape.n * shape.k * 2);
  auto y = internal::DeviceBuffer::Allocate(api, shape.m * shape.n * 2);
  auto stream = internal::Stream::Create(api);
  auto start = internal::Event::Create(api);
  auto end = internal::Event::Create(api);
  ASSERT_TRUE(x.ok() && w.ok() && y.ok() && stream.ok() && start.ok() && end.ok());
  FillNormal(api, x->ptr(), shape.m * shape.k, stream->get(), 1);
  FillNormal(api, w->ptr(), shape.n * shape.k, stream->get(), 2);

  // Seven rounds; in each, every candidate in turn (the order rotated each
  // round) runs three times back to back after a warm-up run.
  std::vector<std::vector<float>> turns(timed.size());
  for (int round = 0; round < 7; ++round) {
    for (size_t turn = 0; turn < timed.size(); ++turn) {
      const size_t j = (turn + round) % timed.size();
      const int index = timed[j].index;
      ASSERT_TRUE((*matmul)->RunCandidate(index, stream->get(), x->ptr(), w->ptr(), y->ptr()).ok());
      ASSERT_EQ(api.cuEventRecord(start->get(), stream->get()), CUDA_SUCCESS);
      for (int r = 0; r < 3; ++r)
        ASSERT_TRUE(
            (*matmul)->RunCandidate(index, stream->get(), x->ptr(), w->ptr(), y->ptr()).ok());
      ASSERT_EQ(api.cuEventRecord(end->get(), stream->get()), CUDA_SUCCESS);
      ASSERT_EQ(api.cuEventSynchronize(end->get()), CUDA_SUCCESS);
      float ms = 0;
      ASSERT_EQ(api.cuEventElapsedTime(&ms, start->get(), end->get()), CUDA_SUCCESS);
      turns[j].push_back(ms / 3);
    }
  }
  size_t fastest = 0, chosen = timed.size();
  std::vector<float> median(timed.size());
  for (size_t j = 0; j < timed.size(); ++j) {
    std::sort(turns[j].begin(), turns[j].end());
    median[j] = turns[j][turns[j].size() / 2];
    if (median[j] < median[fastest]) fastest = j;
    if (timed[j].index == (*matmul)->chosen()) chosen = j;
    std::printf("candidate %d: %.4f ms a run when chosen, %.4f ms on normal inputs\n",
                timed[j].index, timed[j].median_ms, median[j]);
  }
  ASSERT_LT(chosen, timed.size()) << "the chosen candidate " << (*matmul)->chosen()
                                  << " is not among those timed";
  // Candidates within 2% of each other may change places from one choice to
  // the next (the runs of one turn vary by a few tenths of a percent).
  EXPECT_LE(median[chosen], 1.02f * median[fastest])
      << "chose candidate " << timed[chosen].index << " (" << median[chosen]
      << " ms a run on normal inputs), candidate " << timed[fastest].index << " takes "
      << median[fastest] << " ms";
}

}  // namespace
}  // namespace ksearch
