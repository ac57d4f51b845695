#include "cuda/compiler.h"

#include <gtest/gtest.h>

#include "cuda/driver.h"
#include "cuda/sandbox.h"
#include "test_util.h"

namespace ksearch::internal {
namespace {

const char kGood[] = R"(
extern "C" __global__ void scale(const float* x, float* y, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = 2.0f * x[i];
})";

CompilerOptions NoDiskCache() {
  CompilerOptions o;
  o.cache_dir = "";
  return o;
}

TEST(Compiler, CompilesToCubinForAnExplicitArchWithoutAGpu) {
  Compiler compiler(NoDiskCache());
  auto r = compiler.Compile({kGood, {}, "sm_90", "good.cu"});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_TRUE(r->ok) << r->log;
  EXPECT_GT(r->cubin.size(), 100u);
  EXPECT_EQ(r->cubin.substr(1, 3), "ELF");
  ASSERT_EQ(r->resources.size(), 1u);
  EXPECT_EQ(r->resources[0].kernel, "scale");
  EXPECT_GT(r->resources[0].registers, 0);
  EXPECT_EQ(r->resources[0].spill_store_bytes, 0);
}

TEST(Compiler, ReportsCompileErrorsWithTheLog) {
  Compiler compiler(NoDiskCache());
  auto r = compiler.Compile({"extern \"C\" __global__ void k() { undefined_thing(); }", {}, "sm_90", "bad.cu"});
  ASSERT_TRUE(r.ok());
  EXPECT_FALSE(r->ok);
  EXPECT_TRUE(r->cubin.empty());
  EXPECT_NE(r->log.find("undefined_thing"), std::string::npos) << r->log;
  EXPECT_NE(r->log.find("bad.cu"), std::string::npos) << r->log;
}

TEST(Compiler, PassesDefinesAndOptions) {
  Compiler compiler(NoDiskCache());
  const char* source = R"(
#if BLOCK != 128
#error BLOCK must be 128
#endif
extern "C" __global__ void k(float* y) { y[threadIdx.x] = BLOCK; })";
  EXPECT_TRUE(compiler.Compile({source, {"-DBLOCK=128"}, "sm_90"})->ok);
  auto bad = compiler.Compile({source, {"-DBLOCK=64"}, "sm_90"});
  EXPECT_FALSE(bad->ok);
  EXPECT_NE(bad->log.find("BLOCK must be 128"), std::string::npos);
}

TEST(Compiler, SuppliesHostHeaderStandIns) {
  Compiler compiler(NoDiskCache());
  const char* source = R"(
#include <cstdint>
#include <cfloat>
#include <cmath>
#include <cstdio>
#include <cassert>
#include <climits>
#include <cuda_fp16.h>
extern "C" __global__ void k(float* y, int64_t n) {
  uint32_t i = threadIdx.x;
  float v = std::exp(std::fmax(y[i], -FLT_MAX)) + sqrtf(2.0f) + (INT_MAX > 0);
  assert(n > 0);
  y[i] = __half2float(__float2half(v));
})";
  auto r = compiler.Compile({source, {}, "sm_90"});
  EXPECT_TRUE(r->ok) << r->log;
}

TEST(Compiler, DeviceHeadersFromTheToolkitCompile) {
  Compiler compiler(NoDiskCache());
  const char* source = R"(
#include <cooperative_groups.h>
#include <cuda/std/cstdint>
namespace cg = cooperative_groups;
extern "C" __global__ void k(float* y) {
  cg::thread_block block = cg::this_thread_block();
  cuda::std::int32_t i = block.thread_rank();
  y[i] = 1.0f;
  block.sync();
})";
  auto r = compiler.Compile({source, {}, "sm_90"});
  EXPECT_TRUE(r->ok) << r->log;
}

TEST(Compiler, TrustedSourcesCompileInProcess) {
  Compiler compiler(NoDiskCache());
  CompileRequest request{kGood, {}, "sm_90", "trusted.cu"};
  request.trusted = true;
  auto r = compiler.Compile(request);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_TRUE(r->ok) << r->log;
  EXPECT_FALSE(r->unsandboxed);
}

TEST(Compiler, RefusesUntrustedSourcesWithoutConfinementUnlessAllowed) {
  if (ConfinementAvailable().ok()) GTEST_SKIP() << "this machine can confine compiles";
  Compiler refusing(NoDiskCache());
  auto refused = refusing.Compile({kGood, {}, "sm_90"});
  EXPECT_EQ(refused.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(refused.status().message().find("--unsandboxed-compile"), std::string::npos);
  EXPECT_EQ(refused.status().message().find('\n'), std::string::npos);
  CompilerOptions options = NoDiskCache();
  options.allow_unsandboxed = true;
  Compiler allowing(options);
  auto r = allowing.Compile({kGood, {}, "sm_90"});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_TRUE(r->ok);
  EXPECT_TRUE(r->unsandboxed);
}

TEST(Compiler, UntrustedSourcesCompileConfinedWhereConfinementIsAvailable) {
  if (Status s = ConfinementAvailable(); !s.ok()) GTEST_SKIP() << s.message();
  EXPECT_TRUE(CheckUntrustedCompiles(NoDiskCache()).ok());
  Compiler compiler(NoDiskCache());
  auto r = compiler.Compile({kGood, {}, "sm_90"});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_TRUE(r->ok) << r->log;
  EXPECT_FALSE(r->unsandboxed);
  CompilerOptions missing = NoDiskCache();
  missing.helper_binary = "/nonexistent/ksearch-compile";
  EXPECT_EQ(CheckUntrustedCompiles(missing).code(), StatusCode::kNotFound);
  EXPECT_EQ(Compiler(missing).Compile({kGood, {}, "sm_90"}).status().code(),
            StatusCode::kNotFound);
}

TEST(EscapeLog, MakesControlCharactersAndBadUtf8Visible) {
  EXPECT_EQ(EscapeLog("a\tb\nc"), "a\tb\nc");
  EXPECT_EQ(EscapeLog("\x1b[2J\r\x07\x7f"), "\\x1b[2J\\x0d\\x07\\x7f");
  EXPECT_EQ(EscapeLog("caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80"), "caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80");
  EXPECT_EQ(EscapeLog("\xff\xc3"), "\\xff\\xc3");
  EXPECT_EQ(EscapeLog("\xc0\xaf"), "\\xc0\\xaf");          // overlong '/'
  EXPECT_EQ(EscapeLog("\xed\xa0\x80"), "\\xed\\xa0\\x80");  // a surrogate
  EXPECT_EQ(EscapeLog("\xc2\x9b"), "\\u009b");               // C1 CSI
  EXPECT_EQ(EscapeLog(std::string("a\0b", 3)), "a\\x00b");
  std::string once = EscapeLog("\x1b\xff\xc2\x9b");
  EXPECT_EQ(EscapeLog(once), once);
}

TEST(Compiler, CachesInMemoryAndOnDisk) {
  testing::TempDir dir;
  CompilerOptions options;
  options.cache_dir = dir.path() + "/cache";
  {
    Compiler compiler(options);
    auto first = compiler.Compile({kGood, {}, "sm_90"});
    EXPECT_FALSE(first->cached);
    auto second = compiler.Compile({kGood, {}, "sm_90"});
    EXPECT_TRUE(second->cached);
    EXPECT_EQ(second->cubin, first->cubin);
    EXPECT_EQ(compiler.hits(), 1);
    EXPECT_EQ(compiler.misses(), 1);
    // Options are part of the key.
    EXPECT_FALSE(compiler.Compile({kGood, {"-DX=1"}, "sm_90"})->cached);
  }
  Compiler fresh(options);
  auto from_disk = fresh.Compile({kGood, {}, "sm_90"});
  EXPECT_TRUE(from_disk->cached);
  EXPECT_TRUE(from_disk->ok);
  EXPECT_EQ(from_disk->resources.size(), 1u);
  EXPECT_NE(Compiler::CacheKey({kGood, {}, "sm_90"}), Compiler::CacheKey({kGood, {}, "sm_80"}));
}

TEST(Compiler, TruncatesHugeLogsWithANote) {
  CompilerOptions options = NoDiskCache();
  options.max_log_bytes = 300;
  Compiler compiler(options);
  std::string source;
  for (int i = 0; i < 200; ++i) source += "#warning this line makes the log long\n";
  source += "extern \"C\" __global__ void k() {}\n";
  auto r = compiler.Compile({source, {}, "sm_90"});
  EXPECT_NE(r->log.find("log truncated"), std::string::npos) << r->log;
  EXPECT_LT(r->log.size(), 500u);
}

TEST(Compiler, AnArchNvrtcDoesNotKnowIsACompileErrorWithTheLog) {
  auto r = Compiler(NoDiskCache()).Compile({kGood, {}, "sm_999"});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_FALSE(r->ok);
  EXPECT_NE(r->log.find("--gpu-architecture"), std::string::npos) << r->log;
}

TEST(Compiler, RejectsVirtualArchs) {
  Compiler compiler(NoDiskCache());
  EXPECT_EQ(compiler.Compile({kGood, {}, "compute_90"}).status().code(), StatusCode::kInvalidArgument);
}

TEST(PtxasLog, ParsesRegistersSharedMemoryAndSpills) {
  auto r = ParsePtxasLog(
      "ptxas info    : Compiling entry function 'a' for 'sm_90'\n"
      "ptxas info    : Function properties for a\n"
      "    16 bytes stack frame, 8 bytes spill stores, 12 bytes spill loads\n"
      "ptxas info    : Used 40 registers, used 1 barriers, 2048 bytes smem, 380 bytes cmem[0]\n"
      "ptxas info    : Compiling entry function 'b' for 'sm_90'\n"
      "ptxas info    : Used 8 registers, used 0 barriers, 380 bytes cmem[0]\n");
  ASSERT_EQ(r.size(), 2u);
  EXPECT_EQ(r[0].kernel, "a");
  EXPECT_EQ(r[0].registers, 40);
  EXPECT_EQ(r[0].static_shared_bytes, 2048);
  EXPECT_EQ(r[0].local_bytes, 16);
  EXPECT_EQ(r[0].spill_store_bytes, 8);
  EXPECT_EQ(r[0].spill_load_bytes, 12);
  EXPECT_EQ(r[1].registers, 8);
  EXPECT_EQ(r[1].static_shared_bytes, 0);
}

TEST(Driver, MissingDriverIsAOneLineFailedPrecondition) {
  std::string why;
  if (CudaDriverAvailable(&why)) GTEST_SKIP() << "a CUDA driver is present on this machine";
  auto driver = Driver();
  ASSERT_FALSE(driver.ok());
  EXPECT_EQ(driver.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(why.find('\n'), std::string::npos);
  EXPECT_FALSE(why.empty());
}

}  // namespace
}  // namespace ksearch::internal
