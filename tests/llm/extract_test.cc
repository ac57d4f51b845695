#include <gtest/gtest.h>

#include <chrono>
#include <string>

#include "ksearch/kernel_blocks.h"

namespace ksearch {
namespace {

constexpr char kGoodReply[] =
    "Here is the kernel.\n"
    "```cuda\n"
    "extern \"C\" __global__ void k(float* y) { y[threadIdx.x] = 1.f; }\n"
    "```\n"
    "And its plan:\n"
    "```json\n"
    "{\"launches\": []}\n"
    "```\n";

TEST(ExtractKernelBlocks, TakesTheSourceAndThePlan) {
  StatusOr<KernelBlocks> blocks = ExtractKernelBlocks(kGoodReply);
  ASSERT_TRUE(blocks.ok()) << blocks.status().ToString();
  EXPECT_EQ(blocks->cuda_source,
            "extern \"C\" __global__ void k(float* y) { y[threadIdx.x] = 1.f; }\n");
  EXPECT_EQ(blocks->launch_plan_json, "{\"launches\": []}\n");
}

TEST(ExtractKernelBlocks, MissingSourceSaysSoAndPointsAtAnUntaggedBlock) {
  StatusOr<KernelBlocks> blocks =
      ExtractKernelBlocks("```\nvoid k() {}\n```\n```json\n{}\n```\n");
  ASSERT_EQ(blocks.status().code(), StatusCode::kNotFound);
  EXPECT_NE(blocks.status().message().find("no ```cuda block"), std::string::npos);
  EXPECT_NE(blocks.status().message().find("untagged block at line 1"), std::string::npos)
      << blocks.status().message();
}

TEST(ExtractKernelBlocks, AnUntaggedBlockWithAKernelIsTheSource) {
  StatusOr<KernelBlocks> blocks = ExtractKernelBlocks(
      "```\nextern \"C\" __global__ void k() {}\n```\n```json\n{\"launches\": []}\n```\n");
  ASSERT_TRUE(blocks.ok()) << blocks.status().ToString();
  EXPECT_EQ(blocks->cuda_source, "extern \"C\" __global__ void k() {}\n");
}

TEST(StripJsonComments, KeepsStringsAndDropsCommentsAndTrailingCommas) {
  EXPECT_EQ(StripJsonComments("{\"a\": \"// not a comment, }\", // one\n \"b\": [1, 2,],}"),
            "{\"a\": \"// not a comment, }\", \n \"b\": [1, 2]}");
  EXPECT_EQ(StripJsonComments("/* lead */{\"x\": 1 /* mid */}"), " {\"x\": 1  }");
}

TEST(SanitizeKernelSource, KeepsDeviceCodeAndTemplatesAsTheyAre) {
  std::vector<std::string> changes;
  const std::string source =
      "#include <cuda_fp16.h>\n#define N 4\ntemplate <int B>\n__global__ void t(float* y) {}\n"
      "struct S { __device__ int f() const { return 1; } };\n__constant__ float c[2] = {1, 2};\n"
      "extern \"C\" __global__ void k(float* y) { y[0] = \"}\"[0]; }\n";
  EXPECT_EQ(SanitizeKernelSource(source, &changes), source);
  EXPECT_TRUE(changes.empty()) << changes.front();
}

// The salvage note names the kernel, not an attribute written before it.
TEST(SanitizeKernelSource, NamesTheKernelPastItsAttributes) {
  std::vector<std::string> changes;
  const std::string out = SanitizeKernelSource(
      "__global__ void __launch_bounds__(256, 2) softmax_rows(float* y) { y[0] = 1.f; }\n"
      "__global__ void __cluster_dims__(2, 1, 1) __launch_bounds__((128)) reduce(float* y) {}\n"
      "void __attribute__((noinline)) launch(float* y) { softmax_rows<<<1, 1>>>(y); }\n",
      &changes);
  ASSERT_EQ(changes.size(), 3u);
  EXPECT_EQ(changes[0], "added extern \"C\" to kernel softmax_rows()");
  EXPECT_EQ(changes[1], "added extern \"C\" to kernel reduce()");
  EXPECT_EQ(changes[2], "dropped host function launch()");
  EXPECT_NE(out.find("extern \"C\" __global__ void __launch_bounds__(256, 2) softmax_rows"), std::string::npos)
      << out;
}

// A real model's source (tests/llm/real-replies/attention_engine-h200-2026-12-02,
// r1.s0.i1.b1) opened with comments, then its includes, defines and a struct
// whose attribute has parentheses: all of that was once read as one host
// function and dropped, and the kernel failed to compile without them.
TEST(SanitizeKernelSource, KeepsWhatFollowsLeadingComments) {
  std::vector<std::string> changes;
  const std::string source =
      "// attention: causal softmax(q k^T) v (bf16)\n"
      "/* block order (heaviest first) */\n"
      "#include <cuda_bf16.h>\n#define HALFB 8192\n#ifndef CHUNK\n#define CHUNK 32\n#endif\n\n"
      "struct __align__(64) TensorMap { unsigned long long opaque[16]; };\n"
      "// packs two floats (round to nearest)\n"
      "__device__ unsigned pack(float a, float b) { return 0u; }\n"
      "extern \"C\" __global__ void k(const __grid_constant__ TensorMap m, float* y) {\n"
      "#pragma unroll\n  for (int i = 0; i < 2; ++i) y[i] = HALFB;\n}\n";
  EXPECT_EQ(SanitizeKernelSource(source, &changes), source);
  EXPECT_TRUE(changes.empty()) << changes.front();
  // A kernel after a comment gets extern "C" before its code, not inside the
  // comment; a host function after a comment is still dropped.
  changes.clear();
  const std::string out = SanitizeKernelSource(
      "// the kernel (one block per row)\n__global__ void rows(float* y) {}\n"
      "// the launcher (host)\nvoid launch(float* y) { rows<<<1, 1>>>(y); }\n",
      &changes);
  ASSERT_EQ(changes.size(), 2u);
  EXPECT_NE(out.find("// the kernel (one block per row)\nextern \"C\" __global__ void rows"),
            std::string::npos)
      << out;
  EXPECT_EQ(changes[1], "dropped host function launch()");
  EXPECT_EQ(out.find("launch("), std::string::npos) << out;
}

// A reply is the model's to write: one megabyte-long line full of '#' (not a
// directive: never first on its line) is read in linear time.
TEST(SanitizeKernelSource, ALongLineOfHashesIsReadInLinearTime) {
  std::string source;
  for (int i = 0; i < (1 << 19); ++i) source += "x#";
  std::vector<std::string> changes;
  const auto start = std::chrono::steady_clock::now();
  const std::string out = SanitizeKernelSource(source, &changes);
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_EQ(out.size(), source.size());
  // Quadratic work here is about 10^11 steps: minutes, not this bound.
  EXPECT_LT(seconds, 30.0);
}

TEST(ExtractKernelBlocks, MissingPlanSaysSo) {
  StatusOr<KernelBlocks> blocks = ExtractKernelBlocks("```cuda\nx\n```\n");
  ASSERT_EQ(blocks.status().code(), StatusCode::kNotFound);
  EXPECT_NE(blocks.status().message().find("no ```json block"), std::string::npos);
  EXPECT_NE(blocks.status().message().find("launch plan"), std::string::npos);
}

TEST(ExtractKernelBlocks, DoubledBlocksNameTheirLines) {
  StatusOr<KernelBlocks> blocks =
      ExtractKernelBlocks("```cuda\na\n```\ntext\n```cu\nb\n```\n```json\n{}\n```\n");
  ASSERT_EQ(blocks.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(blocks.status().message().find("2 ```cuda blocks, at lines 1 and 5"),
            std::string::npos)
      << blocks.status().message();
  blocks = ExtractKernelBlocks("```cuda\na\n```\n```json\n{}\n```\n```json\n{}\n```\n");
  ASSERT_EQ(blocks.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(blocks.status().message().find("```json"), std::string::npos);
}

TEST(ExtractKernelBlocks, UnclosedBlockMeansTheReplyWasCut) {
  StatusOr<KernelBlocks> blocks = ExtractKernelBlocks("```json\n{}\n```\n```cuda\n__global__");
  ASSERT_EQ(blocks.status().code(), StatusCode::kOutOfRange);
  EXPECT_NE(blocks.status().message().find("line 4"), std::string::npos)
      << blocks.status().message();
}

TEST(ExtractFencedBlocks, FollowsCommonMarkFences) {
  std::vector<FencedBlock> blocks = ExtractFencedBlocks(
      "  ````CUDA extra words\r\n"
      "  inner ``` is not a close\r\n"
      "  ````\r\n"
      "~~~json\n"
      "[1]\n"
      "~~~\n"
      "```\n"
      "plain\n"
      "```\n");
  ASSERT_EQ(blocks.size(), 3u);
  EXPECT_EQ(blocks[0].language, "cuda");
  EXPECT_EQ(blocks[0].text, "inner ``` is not a close\n");
  EXPECT_EQ(blocks[0].first_line, 1);
  EXPECT_TRUE(blocks[0].closed);
  EXPECT_EQ(blocks[1].language, "json");
  EXPECT_EQ(blocks[1].text, "[1]\n");
  EXPECT_EQ(blocks[2].language, "");
  EXPECT_EQ(blocks[2].first_line, 7);
}

TEST(ExtractFencedBlocks, InlineBackticksAreNotFences) {
  EXPECT_TRUE(ExtractFencedBlocks("use ```cuda``` blocks\n``` a`b\n").empty());
}

}  // namespace
}  // namespace ksearch
