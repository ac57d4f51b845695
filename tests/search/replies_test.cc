// A corpus of replies as models really write them (tests/llm/replies/): C++
// fences, JSON plans with comments and trailing commas, kernels without
// extern "C", PyTorch extensions and test drivers around the kernel, helpers
// split across blocks, a corrected second version, a reply cut short. Each is
// salvaged into a candidate that NVRTC compiles (the compile-only evaluator),
// or refused with the reason.
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#include "search_test_util.h"

namespace ksearch {
namespace {

std::string Reply(const std::string& name) {
  std::ifstream in(testing::SourcePath("tests/llm/replies/" + name));
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

std::string Joined(const std::vector<std::string>& lines) {
  std::string out;
  for (const std::string& l : lines) out += l + "\n";
  return out;
}

class ReplyCorpus : public ::testing::TestWithParam<const char*> {};

INSTANTIATE_TEST_SUITE_P(Salvaged, ReplyCorpus,
                         ::testing::Values("cpp_fence_no_extern_c.md", "torch_extension.md",
                                           "split_blocks_with_main.md", "corrected_version.md"),
                         [](const ::testing::TestParamInfo<const char*>& param) {
                           std::string name = param.param;
                           return name.substr(0, name.find('.'));
                         });

TEST_P(ReplyCorpus, BecomesACandidateThatCompiles) {
  const std::string reply = Reply(GetParam());
  ASSERT_FALSE(reply.empty()) << GetParam();
  auto blocks = ExtractKernelBlocks(reply);
  ASSERT_TRUE(blocks.ok()) << blocks.status().ToString();
  auto plan = LaunchPlan::FromJson(blocks->launch_plan_json, GetParam());
  ASSERT_TRUE(plan.ok()) << plan.status().ToString() << "\n" << blocks->launch_plan_json;
  for (const char* host : {"torch", "main(", "<<<", "PYBIND11", "iostream", "cudaMalloc"}) {
    EXPECT_EQ(blocks->cuda_source.find(host), std::string::npos)
        << host << " left in:\n" << blocks->cuda_source;
  }
  Problem problem = testing::RowSoftmaxProblem(64, 1024);
  auto evaluator = testing::CompileOnlyEvaluator(problem);
  ASSERT_NE(evaluator, nullptr);
  Candidate c = problem.start.ToCandidate("r0.s0.i0.b0", "llm");
  c.source = blocks->cuda_source;
  c.plan = *plan;
  std::vector<Evaluation> results = evaluator->Evaluate(std::vector<Candidate>{c}, nullptr);
  ASSERT_EQ(results.size(), 1u);
  EXPECT_TRUE(results[0].ok()) << results[0].message << "\n"
                               << results[0].details << "\nsource:\n"
                               << blocks->cuda_source << "\nrepairs:\n"
                               << Joined(blocks->repairs);
}

TEST(ReplyCorpusNotes, EachSalvageIsNamed) {
  auto cpp = ExtractKernelBlocks(Reply("cpp_fence_no_extern_c.md"));
  ASSERT_TRUE(cpp.ok());
  EXPECT_NE(Joined(cpp->repairs).find("added extern \"C\" to kernel row_softmax()"),
            std::string::npos)
      << Joined(cpp->repairs);
  auto torch = ExtractKernelBlocks(Reply("torch_extension.md"));
  ASSERT_TRUE(torch.ok());
  EXPECT_NE(Joined(torch->repairs).find("dropped host function softmax_forward()"),
            std::string::npos)
      << Joined(torch->repairs);
  EXPECT_NE(Joined(torch->repairs).find("torch/extension.h"), std::string::npos);
  auto split = ExtractKernelBlocks(Reply("split_blocks_with_main.md"));
  ASSERT_TRUE(split.ok());
  EXPECT_NE(Joined(split->repairs).find("joined 2 source blocks, at lines 3 and 23"),
            std::string::npos)
      << Joined(split->repairs);
  EXPECT_NE(Joined(split->repairs).find("dropped host function main()"), std::string::npos);
  auto corrected = ExtractKernelBlocks(Reply("corrected_version.md"));
  ASSERT_TRUE(corrected.ok());
  EXPECT_EQ(corrected->cuda_source.find("first attempt"), std::string::npos);
}

TEST(ReplyCorpusNotes, ACutReplyIsRefusedAsCut) {
  auto cut = ExtractKernelBlocks(Reply("truncated.md"));
  ASSERT_FALSE(cut.ok());
  EXPECT_EQ(cut.status().code(), StatusCode::kOutOfRange) << cut.status().ToString();
  EXPECT_NE(cut.status().message().find("never closed"), std::string::npos);
}

}  // namespace
}  // namespace ksearch
