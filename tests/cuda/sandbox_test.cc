// The confined compile helper: what it refuses, the include tricks that once
// reached files outside the toolkit, the kill at the time limit, the memory
// limit. Skipped (with the reason) where this kernel offers no Landlock.
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <atomic>
#include <cstddef>
#include <iostream>
#include <string>

#include "cuda/compile_helper.h"
#include "cuda/compiler.h"
#include "cuda/sandbox.h"
#include "ksearch/evaluator.h"
#include "ksearch/problem.h"
#include "test_util.h"

namespace ksearch::internal {
namespace {

constexpr char kMarker[] = "KSEARCH_SECRET_MARKER_4f1c";
// The first line of /etc/passwd on any Linux.
constexpr char kPasswdLine[] = "root:x:0:0";

class Sandbox : public ::testing::Test {
 protected:
  void SetUp() override {
    Status available = ConfinementAvailable();
    if (!available.ok()) GTEST_SKIP() << "no confinement on this machine: " << available.message();
    secret_ = dir_.Write("secret.h", std::string(kMarker) + "\nint leaked = 1;\n");
  }

  static CompilerOptions Options() {
    CompilerOptions o;
    o.cache_dir = "";
    o.timeout_seconds = 120.0;
    return o;
  }

  // Compiles an untrusted source; the test fails if it compiles or if the
  // log shows the secret or /etc/passwd.
  void ExpectNoLeak(const std::string& source, std::vector<std::string> options = {}) {
    Compiler compiler(Options());
    auto r = compiler.Compile({source, std::move(options), "sm_90", "trick.cu"});
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    EXPECT_FALSE(r->ok) << "compiled:\n" << source;
    EXPECT_EQ(r->log.find(kMarker), std::string::npos) << r->log;
    EXPECT_EQ(r->log.find(kPasswdLine), std::string::npos) << r->log;
    EXPECT_EQ(r->log.find("leaked"), std::string::npos) << r->log;
  }

  testing::TempDir dir_;
  std::string secret_;
};

TEST_F(Sandbox, TheHelperCannotReadOutsideTheToolkit) {
  HelperOptions options;
  auto passwd = ProbeHelper("read", "/etc/passwd", options);
  ASSERT_TRUE(passwd.ok()) << passwd.status().ToString();
  EXPECT_EQ(*passwd, "open: Permission denied");
  EXPECT_EQ(*ProbeHelper("read", secret_, options), "open: Permission denied");
  EXPECT_EQ(*ProbeHelper("list", "/", options), "open: Permission denied");
  // The toolkit's headers stay readable.
  std::string include = Compiler::CudaIncludeDirectory();
  EXPECT_EQ(*ProbeHelper("read", include + "/cuda_fp16.h", options), "ok");
  EXPECT_EQ(*ProbeHelper("list", include + "/cccl", options), "ok");
}

TEST_F(Sandbox, TheHelperCannotWriteConnectForkOrExec) {
  HelperOptions options;
  auto created = ProbeHelper("create", dir_.path() + "/new", options);
  ASSERT_TRUE(created.ok()) << created.status().ToString();
  EXPECT_NE(*created, "ok");
  EXPECT_FALSE(std::filesystem::exists(dir_.path() + "/new"));
  EXPECT_EQ(*ProbeHelper("socket", "", options), "socket: Operation not permitted");
  EXPECT_EQ(*ProbeHelper("fork", "", options), "fork: Operation not permitted");
  EXPECT_NE(*ProbeHelper("exec", "/bin/true", options), "ok");
}

TEST_F(Sandbox, TheHelperGetsNoneOfTheCallersEnvironment) {
  ::setenv("KSEARCH_TEST_API_KEY", "sk-secret", 1);
  auto seen = ProbeHelper("env", "KSEARCH_TEST_API_KEY", HelperOptions{});
  ::unsetenv("KSEARCH_TEST_API_KEY");
  ASSERT_TRUE(seen.ok()) << seen.status().ToString();
  EXPECT_EQ(*seen, "unset");
}

TEST_F(Sandbox, AbsolutePathsFail) {
  ExpectNoLeak("#include \"" + secret_ + "\"\n");
  ExpectNoLeak("#include <" + secret_ + ">\n");
  ExpectNoLeak("#include \"/etc/passwd\"\n");
  ExpectNoLeak("#include </etc/passwd>\n");
}

TEST_F(Sandbox, FilesThatExistAndThatDoNotFailAlike) {
  ExpectNoLeak("#include \"" + secret_ + "\"\n");
  std::string missing = dir_.path() + "/nosuch.h";  // as long as secret.h
  ExpectNoLeak("#include \"" + missing + "\"\n");
  // The logs differ only in the name: nothing tells that one file exists.
  Compiler compiler(Options());
  std::string present = compiler.Compile({"#include \"" + secret_ + "\"\n", {}, "sm_90"})->log;
  std::string absent = compiler.Compile({"#include \"" + missing + "\"\n", {}, "sm_90"})->log;
  for (size_t at; (at = present.find(secret_)) != std::string::npos;) present.replace(at, secret_.size(), "F");
  for (size_t at; (at = absent.find(missing)) != std::string::npos;) absent.replace(at, missing.size(), "F");
  EXPECT_EQ(present, absent);
}

TEST_F(Sandbox, MacroExpandedIncludeNamesFail) {
  ExpectNoLeak("#define F \"" + secret_ + "\"\n#include F\n");
  ExpectNoLeak("#define F \"/etc/passwd\"\n#include F\n");
}

TEST_F(Sandbox, AngleBracketMacrosFail) {
  ExpectNoLeak("#define H <" + secret_ + ">\n#include H\n");
  ExpectNoLeak("#define H </etc/passwd>\n#include H\n");
}

TEST_F(Sandbox, StringizedIncludeNamesFail) {
  ExpectNoLeak("#define STR(x) #x\n#define XSTR(x) STR(x)\n#include XSTR(" + secret_ + ")\n");
  ExpectNoLeak("#define STR(x) #x\n#define XSTR(x) STR(x)\n#include XSTR(/etc/passwd)\n");
}

TEST_F(Sandbox, LineSplicesInsideTheDirectiveFail) {
  ExpectNoLeak("#inc\\\nlude \"" + secret_ + "\"\n");
  ExpectNoLeak("#include \"/etc/pass\\\nwd\"\n");
}

TEST_F(Sandbox, CommentsInsideTheDirectiveFail) {
  ExpectNoLeak("# /* x */ include /* y */ \"" + secret_ + "\"\n");
  ExpectNoLeak("#/**/include/**/\"/etc/passwd\"\n");
}

TEST_F(Sandbox, DigraphsFail) {
  ExpectNoLeak("%:include \"" + secret_ + "\"\n");
  ExpectNoLeak("%:include </etc/passwd>\n");
}

TEST_F(Sandbox, IncludeNextFails) {
  ExpectNoLeak("#include_next <secret.h>\n", {"-I" + dir_.path()});
  ExpectNoLeak("#include_next \"" + secret_ + "\"\n");
  ExpectNoLeak("#include_next <passwd>\n", {"-I/etc"});
}

TEST_F(Sandbox, CarriageReturnLineEndingsFail) {
  // Whether or not NVRTC takes a lone CR for a line end, the include is
  // refused or the line is not C++.
  ExpectNoLeak("int a;\r#include \"" + secret_ + "\"\rint b = 0;\r");
  ExpectNoLeak("int a;\r#include </etc/passwd>\r");
  ExpectNoLeak("int a;\r\n#include \"/etc/passwd\"\r\n");
}

TEST_F(Sandbox, PathsRelativeToTheWorkingDirectoryFail) {
  std::string cwd = std::filesystem::current_path().string();
  ASSERT_EQ(::chdir(dir_.path().c_str()), 0);
  ExpectNoLeak("#include \"secret.h\"\n");
  ExpectNoLeak("#include <secret.h>\n", {"-I."});
  ASSERT_EQ(::chdir(cwd.c_str()), 0);
  // From the helper's own working directory ("/") and through "..".
  ExpectNoLeak("#include \"" + secret_.substr(1) + "\"\n");
  ExpectNoLeak("#include \"../../../../../../../../etc/passwd\"\n");
  ExpectNoLeak("#include <cuda/../../../../../../../../etc/passwd>\n");
}

TEST_F(Sandbox, HasIncludeSaysNoOutsideTheToolkit) {
  Compiler compiler(Options());
  auto probe = [&](const std::string& header) {
    std::string source = "#if __has_include(" + header +
                         ")\n#error FOUND\n#endif\nextern \"C\" __global__ void k() {}\n";
    auto r = compiler.Compile({source, {}, "sm_90", "has.cu"});
    return r.ok() && !r->ok && r->log.find("FOUND") != std::string::npos;
  };
  EXPECT_FALSE(probe("\"" + secret_ + "\""));
  EXPECT_FALSE(probe("</etc/passwd>"));
  EXPECT_TRUE(probe("<cuda_fp16.h>"));
  // And nothing of such a file reaches the log.
  ExpectNoLeak("#if __has_include(\"" + secret_ + "\")\n#include \"" + secret_ +
               "\"\n#else\n#error no\n#endif\n");
  ExpectNoLeak("#if __has_include(</etc/passwd>)\n#include </etc/passwd>\n#else\n#error no\n#endif\n");
}

TEST_F(Sandbox, IncludePathsAndPreIncludesFromOptionsFail) {
  ExpectNoLeak("#include <secret.h>\n", {"-I" + dir_.path()});
  ExpectNoLeak("#include <passwd>\n", {"--include-path=/etc"});
  ExpectNoLeak("extern \"C\" __global__ void k() {}\n", {"--pre-include=" + secret_});
  ExpectNoLeak("extern \"C\" __global__ void k() {}\n", {"-include", "/etc/passwd"});
}

TEST_F(Sandbox, ToolkitHeadersAndStandInsStillCompile) {
  Compiler compiler(Options());
  const char* source = R"(
#include <cuda_fp16.h>
#include <cuda_bf16.h>
#include <mma.h>
#include <cooperative_groups.h>
#include <cuda_pipeline.h>
#include <cuda/barrier>
#include <cuda/std/cstdint>
#include <cuda/std/limits>
#include <cstdint>
#include <cfloat>
#include <float.h>
#include <cmath>
#include <cstdio>
#include <cassert>
#include <climits>
extern "C" __global__ void k(float* y, int64_t n) {
  uint32_t i = threadIdx.x;
  float v = std::exp(std::fmax(y[i], -FLT_MAX)) + (INT_MAX > 0);
  assert(n > 0);
  y[i] = __half2float(__float2half(v)) + __bfloat162float(__float2bfloat16(v)) +
         static_cast<float>(cuda::std::numeric_limits<cuda::std::int32_t>::max());
})";
  auto r = compiler.Compile({source, {}, "sm_90", "legit.cu"});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_TRUE(r->ok) << r->log;
  EXPECT_FALSE(r->unsandboxed);
  EXPECT_EQ(r->cubin.substr(1, 3), "ELF");
}

// Preprocessing that grows exponentially: NVRTC is busy for far longer than
// any limit below.
std::string Explosion(int levels) {
  std::string source = "#define E0 x\n";
  for (int i = 1; i <= levels; ++i) {
    source += "#define E" + std::to_string(i) + " E" + std::to_string(i - 1) + " E" +
              std::to_string(i - 1) + "\n";
  }
  return source + "int y = sizeof(E" + std::to_string(levels) + ");\n";
}

bool ProcessIsGone(pid_t pid) {
  return ::kill(pid, 0) != 0 && errno == ESRCH;
}

TEST_F(Sandbox, ACompilePastTheTimeLimitIsKilled) {
  std::atomic<pid_t> child{0};
  HelperOptions options;
  options.timeout_seconds = 2.0;
  options.on_spawn = [&](pid_t pid) { child = pid; };
  auto r = CompileInHelper({Explosion(40), {}, "sm_90", "slow.cu"}, options);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_TRUE(r->timed_out) << r->log;
  EXPECT_FALSE(r->ok);
  EXPECT_NE(r->log.find("killed"), std::string::npos) << r->log;
  ASSERT_GT(child.load(), 0);
  EXPECT_TRUE(ProcessIsGone(child)) << "pid " << child << " still exists";
}

TEST_F(Sandbox, ACompileOverTheMemoryLimitFailsCleanly) {
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
  // The limit is on address space; a sanitizer's shadow memory is reserved
  // address space of its own, so the cap cannot be measured there.
  GTEST_SKIP() << "the memory cap is not measurable under a sanitizer's shadow memory";
#endif
  std::atomic<pid_t> child{0};
  HelperOptions options;
  options.timeout_seconds = 120.0;
  options.memory_limit_bytes = int64_t{768} << 20;
  options.on_spawn = [&](pid_t pid) { child = pid; };
  // An initialized 256 MiB array: NVRTC holds it several times over.
  const char* big = "__device__ char big[1 << 28] = {1, 2, 3};\n"
                    "extern \"C\" __global__ void k(char* o) { o[0] = big[threadIdx.x]; }\n";
  auto r = CompileInHelper({big, {}, "sm_90", "big.cu"}, options);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_FALSE(r->ok);
  EXPECT_FALSE(r->timed_out) << r->log;
  EXPECT_TRUE(ProcessIsGone(child));
  EXPECT_NE(r->log.find("memory limit"), std::string::npos) << r->log;
  // The same limit leaves room for an ordinary kernel.
  const char* small = "extern \"C\" __global__ void k(char* o) { o[0] = 1; }\n";
  auto fine = CompileInHelper({small, {}, "sm_90", "small.cu"}, options);
  ASSERT_TRUE(fine.ok()) << fine.status().ToString();
  EXPECT_TRUE(fine->ok) << fine->log;
}

TEST_F(Sandbox, ControlCharactersInTheLogAreEscaped) {
  Compiler compiler(Options());
  std::string source = "#error \x1b[31mred\x07 \x7f \xff\xfe \xc2\x9b done\n";
  auto r = compiler.Compile({source, {}, "sm_90", "ctl.cu"});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_FALSE(r->ok);
  for (char c : r->log) {
    unsigned char u = static_cast<unsigned char>(c);
    EXPECT_TRUE(u == '\n' || u == '\t' || (u >= 0x20 && u != 0x7f)) << "byte " << int{u};
  }
  EXPECT_NE(r->log.find("\\x1b[31mred\\x07"), std::string::npos) << r->log;
  EXPECT_EQ(r->log.find("\xc2\x9b"), std::string::npos) << r->log;
}

// Makes this process look like one on a kernel without Landlock:
// landlock_create_ruleset fails with ENOSYS.
bool HideLandlock() {
  sock_filter filter[] = {
      BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(seccomp_data, nr)),
      BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, 444 /* landlock_create_ruleset */, 0, 1),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | ENOSYS),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
  };
  sock_fprog program{sizeof(filter) / sizeof(filter[0]), filter};
  return ::prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) == 0 &&
         ::syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, 0, &program) == 0;
}

// Returns the number of expectations that failed, each named on stderr.
int CheckBehaviourWithoutLandlock() {
  int failures = 0;
  auto expect = [&](bool ok, const std::string& what) {
    if (!ok) std::cerr << "FAILED: " << what << "\n";
    failures += ok ? 0 : 1;
  };
  if (!HideLandlock()) return 100;
  Status available = ConfinementAvailable();
  expect(!available.ok() && available.message().find("not supported by this kernel") !=
                                std::string::npos,
         "ConfinementAvailable: " + available.ToString());
  CompilerOptions options;
  options.cache_dir = "";
  const char* good = "extern \"C\" __global__ void k(float* y) { y[0] = 1.0f; }";
  auto refused = Compiler(options).Compile({good, {}, "sm_90"});
  expect(refused.status().code() == StatusCode::kFailedPrecondition,
         "refusal: " + refused.status().ToString());
  expect(refused.status().message().find("--unsandboxed-compile") != std::string::npos &&
             refused.status().message().find('\n') == std::string::npos,
         "one line naming the flag: " + refused.status().message());
  CompileRequest trusted{good, {}, "sm_90"};
  trusted.trusted = true;
  auto in_process = Compiler(options).Compile(trusted);
  expect(in_process.ok() && in_process->ok && !in_process->unsandboxed, "trusted compile");
  options.allow_unsandboxed = true;
  auto allowed = Compiler(options).Compile({good, {}, "sm_90"});
  expect(allowed.ok() && allowed->ok && allowed->unsandboxed, "allowed unconfined compile");
  // The evaluator refuses at creation, before any compile.
  auto problem = LoadProblem("softmax");
  if (!problem.ok()) return failures + 1;
  EvaluatorOptions eval;
  eval.compile_only = true;
  eval.arch = "sm_90";
  eval.compile_cache_dir = "off";
  auto evaluator = CreateLocalEvaluator(*problem, eval);
  expect(evaluator.status().code() == StatusCode::kFailedPrecondition,
         "CreateLocalEvaluator: " + evaluator.status().ToString());
  eval.allow_unsandboxed_compile = true;
  evaluator = CreateLocalEvaluator(*problem, eval);
  expect(evaluator.ok(), "CreateLocalEvaluator allowed: " + evaluator.status().ToString());
  if (evaluator.ok()) {
    Candidate candidate;
    candidate.id = "c";
    candidate.source = problem->start.source;
    candidate.plan = problem->start.plan;
    auto results = (*evaluator)->Evaluate(std::span<const Candidate>(&candidate, 1));
    expect(results.size() == 1 &&
               results[0].message.find("compiled without confinement") != std::string::npos,
           "the evaluation says it ran unconfined: " +
               (results.empty() ? std::string("none") : results[0].message));
  }
  return failures;
}

TEST(NoConfinement, UntrustedCompilesAreRefusedUnlessAllowedAndSaySo) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(std::exit(CheckBehaviourWithoutLandlock()), ::testing::ExitedWithCode(0), "");
}

}  // namespace
}  // namespace ksearch::internal
