// On a GPU: the candidate a library baseline runs (cuBLASLt's algorithm,
// cuDNN's attention engine configuration, cuDNN's convolution algorithm) is
// the fastest of those it timed, on inputs like the judge's, measured again
// here independently of the choice (docs/evaluation.md, "The library's best
// algorithm, not the one timed first"). A baseline slower than the library
// can be makes every speedup against it look better than it is. cuBLASLt's
// choice once timed the candidates one after the other, right after the GPU
// had idled: at linear's prefill shape on the H200 it kept, in some
// evaluations, an algorithm 3% slower under the judge (6% in this test), the
// early candidates having run at the clock of a cool GPU. Then it kept the
// GPU busy for a tenth of a second: at linear's square shape it kept, in
// some evaluations, an algorithm 6% slower under the judge, the one that
// slowed least under sustained load. The candidates are timed here as the
// judge times the baseline: after an L2 flush, alone between two events, the
// host waiting for each run, on a GPU that has rested (the inputs are
// generated on the host after the choice).
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "baselines/fastest.h"
#include "baselines/library_baseline.h"
#include "cuda/objects.h"
#include "ksearch/problem.h"
#include "problems/bf16_host.h"
#include "test_util.h"

namespace ksearch {
namespace {

// `count` elements of `type` drawn from normal(0, 1) (as the judge's
// "normal" input set), 4 Mi of them generated on the host and copied over
// the rest.
void FillNormal(const internal::DriverApi& api, CUdeviceptr buffer, uint64_t count, DType type,
                CUstream stream, uint32_t seed) {
  std::mt19937 generator(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  const uint64_t bytes = type == DType::kF32 ? 4 : 2;
  const uint64_t block = std::min<uint64_t>(count, uint64_t{1} << 22);
  std::vector<unsigned char> host(block * bytes);
  for (uint64_t i = 0; i < block; ++i) {
    const float x = normal(generator);
    if (type == DType::kF32) {
      std::memcpy(&host[i * 4], &x, 4);
    } else {
      ASSERT_EQ(type, DType::kBF16) << "this test fills bf16 and f32 tensors only";
      const uint16_t v = testing::ToBf16(x);
      std::memcpy(&host[i * 2], &v, 2);
    }
  }
  ASSERT_EQ(api.cuMemcpyHtoD(buffer, host.data(), host.size()), CUDA_SUCCESS);
  for (uint64_t done = block; done < count;) {
    const uint64_t copy = std::min(done, count - done);
    ASSERT_EQ(api.cuMemcpyDtoDAsync(buffer + done * bytes, buffer, copy * bytes, stream),
              CUDA_SUCCESS);
    done += copy;
  }
}

struct ChoiceCase {
  const char* problem;
  const char* shape;  // a case of the problem's Cases()
};

class LibraryChoiceOnGpu : public ::testing::TestWithParam<ChoiceCase> {};

TEST_P(LibraryChoiceOnGpu, TheChosenCandidateIsTheFastestOnNormalInputs) {
  KSEARCH_REQUIRE_GPU();
  auto ctx = internal::CudaContext::Create(0);
  ASSERT_TRUE(ctx.ok()) << ctx.status().ToString();
  ASSERT_TRUE((*ctx)->MakeCurrent().ok());
  const internal::DriverApi& api = (*ctx)->api();
  auto loaded = LoadProblem(GetParam().problem);
  ASSERT_TRUE(loaded.ok()) << loaded.status().ToString();
  const std::vector<ShapeCase> cases = loaded->Cases();
  size_t index = cases.size();
  for (size_t i = 0; i < cases.size(); ++i)
    if (cases[i].name == GetParam().shape) index = i;
  ASSERT_LT(index, cases.size()) << "no case " << GetParam().shape;
  auto problem = loaded->AtCase(index);
  ASSERT_TRUE(problem.ok()) << problem.status().ToString();

  auto baseline = internal::CreateLibraryBaseline(*problem);
  if (!baseline.ok() && baseline.status().code() == StatusCode::kNotFound)
    GTEST_SKIP() << baseline.status().ToString();
  ASSERT_TRUE(baseline.ok()) << baseline.status().ToString();
  std::printf("%s\n", (*baseline)->version().c_str());
  const std::vector<internal::LibraryBaseline::Candidate> timed = (*baseline)->candidates();
  if (timed.size() < 2)
    GTEST_SKIP() << "the library offers one candidate that runs here: nothing was chosen";

  auto stream = internal::Stream::Create(api);
  auto start = internal::Event::Create(api);
  auto end = internal::Event::Create(api);
  ASSERT_TRUE(stream.ok() && start.ok() && end.ok());
  std::vector<internal::DeviceBuffer> buffers;
  std::vector<CUdeviceptr> tensors;
  for (size_t t = 0; t < problem->tensors.size(); ++t) {
    const TensorSpec& spec = problem->tensors[t];
    auto elements = problem->Elements(spec);
    ASSERT_TRUE(elements.ok()) << elements.status().ToString();
    auto buffer = internal::DeviceBuffer::Allocate(api, *elements * SizeOf(spec.dtype));
    ASSERT_TRUE(buffer.ok()) << buffer.status().ToString();
    if (spec.role == TensorRole::kInput) {
      FillNormal(api, buffer->ptr(), static_cast<uint64_t>(*elements), spec.dtype, stream->get(),
                 static_cast<uint32_t>(t + 1));
    }
    tensors.push_back(buffer->ptr());
    buffers.push_back(std::move(*buffer));
  }

  // Seven rounds; in each, every candidate in turn (the order rotated each
  // round) runs once untimed, then three times timed as the judge times a
  // run: after a memset of twice the L2 size, alone between two events.
  auto flush = internal::AllocateL2Flush(api);
  ASSERT_TRUE(flush.ok()) << flush.status().ToString();
  std::vector<std::vector<float>> turns(timed.size());
  unsigned flush_value = 1;
  for (int round = 0; round < 7; ++round) {
    for (size_t turn = 0; turn < timed.size(); ++turn) {
      const size_t j = (turn + round) % timed.size();
      const int id = timed[j].id;
      Status ran = (*baseline)->RunCandidate(id, stream->get(), tensors);
      ASSERT_TRUE(ran.ok()) << ran.ToString();
      for (int r = 0; r < 3; ++r) {
        ASSERT_EQ(api.cuMemsetD32Async(flush->ptr(), flush_value++,
                                       static_cast<size_t>(flush->bytes() / 4), stream->get()),
                  CUDA_SUCCESS);
        ASSERT_EQ(api.cuEventRecord(start->get(), stream->get()), CUDA_SUCCESS);
        ASSERT_TRUE((*baseline)->RunCandidate(id, stream->get(), tensors).ok());
        ASSERT_EQ(api.cuEventRecord(end->get(), stream->get()), CUDA_SUCCESS);
        ASSERT_EQ(api.cuEventSynchronize(end->get()), CUDA_SUCCESS);
        float ms = 0;
        ASSERT_EQ(api.cuEventElapsedTime(&ms, start->get(), end->get()), CUDA_SUCCESS);
        turns[j].push_back(ms);
      }
    }
  }
  size_t fastest = 0, chosen = timed.size();
  std::vector<float> median(timed.size());
  for (size_t j = 0; j < timed.size(); ++j) {
    std::sort(turns[j].begin(), turns[j].end());
    median[j] = turns[j][turns[j].size() / 2];
    if (median[j] < median[fastest]) fastest = j;
    if (timed[j].id == (*baseline)->chosen()) chosen = j;
    std::printf("candidate %d: %.4f ms a run when chosen, %.4f ms on normal inputs\n", timed[j].id,
                timed[j].median_ms, median[j]);
  }
  ASSERT_LT(chosen, timed.size()) << "the chosen candidate " << (*baseline)->chosen()
                                  << " is not among those timed";
  // Candidates within 2% of each other, or half a microsecond, may change
  // places from one choice to the next: the runs of one turn vary by a few
  // tenths of a percent, and a 0.04 ms GEMM's median by up to 0.001 ms
  // from one timing to the next (linear decode_16 on the H200, 2026-12-03:
  // candidates 0 and 1 read 0.0402 and 0.0413 ms in the choice, 0.0410 and
  // 0.0400 here).
  EXPECT_LE(median[chosen], 1.02f * median[fastest] + 0.0005f)
      << "chose candidate " << timed[chosen].id << " (" << median[chosen]
      << " ms a run on normal inputs), candidate " << timed[fastest].id << " takes "
      << median[fastest] << " ms";
}

INSTANTIATE_TEST_SUITE_P(
    Baselines, LibraryChoiceOnGpu,
    ::testing::Values(ChoiceCase{"linear", "prefill"}, ChoiceCase{"linear", "square"},
                      ChoiceCase{"linear", "decode_1"}, ChoiceCase{"linear", "decode_16"},
                      ChoiceCase{"attention_engine", "prefill"},
                      ChoiceCase{"attention_engine", "long"},
                      ChoiceCase{"attention_engine", "decode"}, ChoiceCase{"conv2d", "default"},
                      ChoiceCase{"conv2d_relu_maxpool", "default"}),
    [](const ::testing::TestParamInfo<ChoiceCase>& param) {
      return std::string(param.param.problem) + "_" + param.param.shape;
    });

// A candidate the baseline did not time is refused, naming it.
TEST(LibraryChoiceOnGpu, RefusesACandidateItDidNotTime) {
  KSEARCH_REQUIRE_GPU();
  auto ctx = internal::CudaContext::Create(0);
  ASSERT_TRUE(ctx.ok()) << ctx.status().ToString();
  ASSERT_TRUE((*ctx)->MakeCurrent().ok());
  auto loaded = LoadProblem("linear");
  ASSERT_TRUE(loaded.ok());
  auto problem = loaded->AtCase(0);
  ASSERT_TRUE(problem.ok());
  auto baseline = internal::CreateLibraryBaseline(*problem);
  if (!baseline.ok() && baseline.status().code() == StatusCode::kNotFound)
    GTEST_SKIP() << baseline.status().ToString();
  ASSERT_TRUE(baseline.ok()) << baseline.status().ToString();
  std::vector<CUdeviceptr> none(problem->tensors.size(), 0);
  Status refused = (*baseline)->RunCandidate(99, nullptr, none);
  EXPECT_EQ(refused.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(refused.message().find("99"), std::string::npos) << refused.ToString();
}

}  // namespace
}  // namespace ksearch
