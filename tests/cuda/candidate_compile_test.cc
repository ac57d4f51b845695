#include "cuda/candidate_compile.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <mutex>
#include <optional>

#include "cuda/sandbox.h"
#include "test_util.h"

namespace ksearch::internal {
namespace {

// Sets an environment variable for one scope and puts the old value back.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const char* value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old;
    if (value) {
      ::setenv(name, value, 1);
    } else {
      ::unsetenv(name);
    }
  }
  ~ScopedEnv() {
    if (old_) {
      ::setenv(name_, old_->c_str(), 1);
    } else {
      ::unsetenv(name_);
    }
  }

 private:
  const char* name_;
  std::optional<std::string> old_;
};

Candidate Scale(const std::string& id, int block) {
  Candidate c;
  c.id = id;
  c.source = R"(
extern "C" __global__ void scale(const float* x, float* y, int n) {
  int i = blockIdx.x * BLOCK + threadIdx.x;
  if (i < n) y[i] = 2.0f * x[i];
})";
  c.plan.params = {{"BLOCK", block}};
  c.compile_options = {"--use_fast_math"};
  return c;
}

TEST(CubinCacheFolder, FollowsTheOptionThenTheEnvironment) {
  EXPECT_EQ(CubinCacheFolder("off"), "");
  EXPECT_EQ(CubinCacheFolder("/tmp/k"), "/tmp/k/cubin");
  ScopedEnv home("HOME", "/home/u");
  ScopedEnv xdg("XDG_CACHE_HOME", nullptr);
  {
    ScopedEnv dir("KSEARCH_CACHE_DIR", "/cache/ks");
    EXPECT_EQ(CubinCacheFolder(""), "/cache/ks/cubin");
  }
  {
    // As for the option: "off" is no cache, not a folder named off.
    ScopedEnv dir("KSEARCH_CACHE_DIR", "off");
    EXPECT_EQ(CubinCacheFolder(""), "");
    EXPECT_EQ(CubinCacheFolder("/tmp/k"), "/tmp/k/cubin");
  }
  ScopedEnv dir("KSEARCH_CACHE_DIR", nullptr);
  EXPECT_EQ(CubinCacheFolder(""), "/home/u/.cache/ksearch/cubin");
  {
    ScopedEnv set_xdg("XDG_CACHE_HOME", "/xdg");
    EXPECT_EQ(CubinCacheFolder(""), "/xdg/ksearch/cubin");
  }
  ScopedEnv no_home("HOME", nullptr);
  EXPECT_EQ(CubinCacheFolder(""), "");
}

TEST(CompilerOptionsFor, TakesEveryCompileSettingOfTheEvaluator) {
  EvaluatorOptions e;
  e.compile_cache_dir = "/c";
  e.max_log_bytes = 123;
  e.compile_timeout_seconds = 7.5;
  e.allow_unsandboxed_compile = true;
  e.compile_memory_limit_bytes = 1 << 20;
  CompilerOptions c = CompilerOptionsFor(e);
  EXPECT_EQ(c.cache_dir, "/c/cubin");
  EXPECT_EQ(c.max_log_bytes, 123);
  EXPECT_EQ(c.timeout_seconds, 7.5);
  EXPECT_TRUE(c.allow_unsandboxed);
  EXPECT_EQ(c.memory_limit_bytes, 1 << 20);
}

TEST(RequestFor, AppendsThePlansParamsAsDefinesAndNamesTheFileAfterTheCandidate) {
  CompileRequest r = RequestFor(Scale("c7", 128), "sm_90");
  EXPECT_EQ(r.arch, "sm_90");
  EXPECT_EQ(r.name, "c7.cu");
  ASSERT_EQ(r.options.size(), 2u);
  EXPECT_EQ(r.options[0], "--use_fast_math");
  EXPECT_EQ(r.options[1], "-DBLOCK=128");
  EXPECT_FALSE(r.trusted);
  EXPECT_EQ(RequestFor(Scale("", 1), "sm_80").name, "candidate.cu");
}

TEST(FillCompileFailure, GivesOneVerdictPerKindOfFailure) {
  Evaluation unusable;
  EXPECT_TRUE(FillCompileFailure(StatusOr<CompileResult>(InternalError("no nvrtc")), &unusable));
  EXPECT_EQ(unusable.status, EvalStatus::kCompileError);
  EXPECT_EQ(unusable.message, "NVRTC could not be used: no nvrtc");

  CompileResult rejected;
  rejected.log = "error: x";
  rejected.resources.push_back(KernelResources{"k", 10});
  Evaluation e;
  EXPECT_TRUE(FillCompileFailure(rejected, &e));
  EXPECT_EQ(e.status, EvalStatus::kCompileError);
  EXPECT_EQ(e.message, "NVRTC rejected the source");
  EXPECT_EQ(e.details, "error: x");
  ASSERT_EQ(e.resources.size(), 1u);

  CompileResult late;
  late.timed_out = true;
  late.unsandboxed = true;
  Evaluation t;
  EXPECT_TRUE(FillCompileFailure(late, &t));
  EXPECT_EQ(t.status, EvalStatus::kTimeout);
  EXPECT_NE(t.message.find(kUnsandboxedNote), std::string::npos);

  CompileResult fine;
  fine.ok = true;
  Evaluation untouched;
  EXPECT_FALSE(FillCompileFailure(fine, &untouched));
  EXPECT_EQ(untouched.status, EvalStatus::kCancelled);
  EXPECT_TRUE(untouched.message.empty());
}

TEST(CompileEach, CompilesTheChosenCandidatesAndReportsEachOnce) {
  CompilerOptions options;
  options.allow_unsandboxed = true;  // confined where this machine can
  Compiler compiler(options);
  std::vector<Candidate> candidates = {Scale("a", 64), Scale("b", 128), Scale("c", 256)};
  ThreadPool pool(2);
  std::mutex mutex;
  std::vector<int> calls(candidates.size(), 0);
  std::vector<bool> ok(candidates.size(), false);
  {
    TaskGroup group(pool);
    const std::vector<size_t> chosen = {0, 2};
    CompileEach(compiler, group, candidates, chosen, "sm_90", nullptr,
                [&](size_t i, StatusOr<CompileResult> compiled, double wall_ms) {
                  std::lock_guard<std::mutex> lock(mutex);
                  ++calls[i];
                  ok[i] = compiled.ok() && compiled->ok && wall_ms >= 0;
                });
    group.Wait();
  }
  EXPECT_EQ(calls, (std::vector<int>{1, 0, 1}));
  EXPECT_TRUE(ok[0]);
  EXPECT_TRUE(ok[2]);
}

TEST(CompileEach, ACandidateReachedAfterStopIsCancelledUncompiled) {
  Compiler compiler(CompilerOptions{});
  std::vector<Candidate> candidates = {Scale("a", 64), Scale("b", 128)};
  std::atomic<bool> stop{true};
  ThreadPool pool(2);
  std::mutex mutex;
  std::vector<StatusCode> codes;
  {
    TaskGroup group(pool);
    CompileEach(compiler, group, candidates, "sm_90", &stop,
                [&](size_t, StatusOr<CompileResult> compiled, double) {
                  std::lock_guard<std::mutex> lock(mutex);
                  codes.push_back(compiled.status().code());
                });
  }
  EXPECT_EQ(codes, (std::vector<StatusCode>{StatusCode::kCancelled, StatusCode::kCancelled}));
  EXPECT_EQ(compiler.misses(), 0);
}

}  // namespace
}  // namespace ksearch::internal
