// What a newcomer meets first: an unknown command named as such, --version
// on every command with the commit, CUDA, NVRTC and the helpers it found,
// shell completion, and a command that prints the best kernel's source.
#include <gtest/gtest.h>

#include <regex>
#include <string>
#include <vector>

#include "cli_test_util.h"
#include "ksearch/store.h"
#include "store_test_util.h"
#include "test_util.h"

namespace ksearch {
namespace {

using testing::Shell;
using testing::TempDir;

const std::string kCli = KSEARCH_CLI_PATH;
constexpr int kOk = 0, kRejected = 1, kUsage = 2, kCompiledOnly = 5;

bool Contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

TEST(CliNewcomer, AnUnknownCommandIsNamedWithTheClosestOne) {
  std::string out;
  EXPECT_EQ(Shell(kCli + " bogus", &out), kUsage) << out;
  EXPECT_TRUE(Contains(out, "ksearch: unknown command 'bogus'; the commands are run, ")) << out;
  EXPECT_FALSE(Contains(out, "A subcommand is required")) << out;
  out.clear();
  EXPECT_EQ(Shell(kCli + " rnu softmax", &out), kUsage) << out;
  EXPECT_TRUE(Contains(out, "unknown command 'rnu' (did you mean 'run'?)")) << out;
}

// --version says which build this is and what it found: the program's and
// every command's (a user types it after the command as often as before).
TEST(CliNewcomer, VersionNamesTheCommitCudaNvrtcAndHelpersOnEveryCommand) {
  const std::regex expected(
      R"(^ksearch \d+\.\d+\.\d+ \(commit ([0-9a-f]{7,}(-dirty)?|unknown)\)
CUDA toolkit \d+\.\d+[.\d]* \(built against\), NVRTC \d+\.\d+ \(loaded\)
CUDA driver: [^\n]+
worker: /[^\n]*ksearch-worker
compile helper: /[^\n]*ksearch-compile
$)");
  for (const char* command :
       {"", " run", " resume", " eval", " problems show", " worker", " completion"}) {
    std::string out;
    EXPECT_EQ(Shell(kCli + command + " --version", &out), kOk) << command << "\n" << out;
    EXPECT_TRUE(std::regex_match(out, expected)) << command << "\n" << out;
  }
}

// The script completes commands, a command's flags, built-in problem names
// and, after a flag that takes a value, file names.
TEST(CliNewcomer, BashCompletionCompletesCommandsFlagsAndProblems) {
  TempDir dir;
  std::string script;
  ASSERT_EQ(Shell(kCli + " completion bash > " + dir.path() + "/ksearch.bash", &script), kOk)
      << script;
  dir.Write("runs.db", "");
  // Completes WORDS as bash would with the cursor on the last one.
  auto complete = [&](const std::string& words) {
    std::string out;
    Shell("cd " + dir.path() + " && bash -c 'source ./ksearch.bash; COMP_WORDS=(" + words +
              "); COMP_CWORD=$((${#COMP_WORDS[@]} - 1)); _ksearch; echo \"[${COMPREPLY[*]}]\"'",
          &out);
    return out;
  };
  EXPECT_EQ(complete("ksearch ru"), "[run]\n");
  EXPECT_EQ(complete("ksearch run --budget-m"), "[--budget-minutes]\n");
  EXPECT_EQ(complete("ksearch run --dims 4 --budget-g"), "[--budget-gpu-minutes]\n");
  EXPECT_EQ(complete("ksearch run softm"), "[softmax]\n");
  EXPECT_EQ(complete("ksearch problems sh"), "[show]\n");
  EXPECT_EQ(complete("ksearch problems show matm"), "[matmul]\n");
  EXPECT_EQ(complete("ksearch best --so"), "[--source]\n");
  EXPECT_EQ(complete("ksearch list --db run"), "[runs.db]\n");
  EXPECT_EQ(complete("ksearch completion --vers"), "[--version]\n");
  std::string out;
  EXPECT_EQ(Shell(kCli + " completion zsh", &out), kUsage) << out;
}

// The progress line says where the run is against its budgets: "round N of
// M", what is left of each budget given, and when the first should run out.
TEST(CliNewcomer, TheProgressLineShowsRoundsLeftBudgetAndEta) {
  std::string out;
  ASSERT_EQ(Shell(kCli + " run softmax --dims rows=64,cols=1024 --compile-only --arch sm_90 " +
                      "--cache-dir off --no-db --rounds 2 --batch 2 --max-candidates 40 " +
                      "--budget-minutes 30",
                  &out),
            kCompiledOnly)
      << out;
  const std::regex first(
      R"(round 1 of 2 \| evaluated 2 \([^)]*\) \| [^|]+ \| left: (29\.\d min|30\.0 min), 38 candidates \| ETA [0-9.]+ (s|min) \| [0-9.]+ s\n)");
  EXPECT_TRUE(std::regex_search(out, first)) << out;
  EXPECT_TRUE(Contains(out, "round 2 of 2 | evaluated 4 ")) << out;
}

// `best PROBLEM --source` and `show RUN --source` print the kernel's source
// alone, so that it can be saved or piped.
TEST(CliNewcomer, BestAndShowPrintTheBestKernelsSource) {
  TempDir dir;
  const std::string db = dir.path() + "/k.db";
  const std::string marker = "// the kernel the search kept\n";
  testing::RecordACorrectKernel(db, marker);
  std::string out;
  ASSERT_EQ(Shell("{ " + kCli + " best row_softmax --source --db " + db + " 2>/dev/null; }", &out),
            kOk)
      << out;
  EXPECT_TRUE(out.starts_with("extern \"C\" __global__ void row_softmax(")) << out;
  EXPECT_TRUE(out.ends_with(marker)) << out;
  out.clear();
  ASSERT_EQ(Shell("{ " + kCli + " show 1 --source --db " + db + " 2>/dev/null; }", &out), kOk)
      << out;
  EXPECT_TRUE(out.ends_with(marker)) << out;
  // No correct kernel: exit 1 and a line on stderr, nothing on stdout.
  out.clear();
  EXPECT_EQ(Shell("{ " + kCli + " best softmax --source --db " + db + " 2>/dev/null; }", &out),
            kRejected);
  EXPECT_EQ(out, "");
  // A compile-only run's best was never run: show prints it and says so.
  const std::string compiled = dir.path() + "/c.db";
  out.clear();
  ASSERT_EQ(Shell(kCli + " run softmax --compile-only --arch sm_90 --cache-dir off --rounds 1 " +
                      "--batch 1 --db " + compiled,
                  &out),
            kCompiledOnly)
      << out;
  out.clear();
  EXPECT_EQ(Shell(kCli + " show 1 --source --db " + compiled, &out), kOk) << out;
  EXPECT_TRUE(Contains(out, "never run")) << out;
  EXPECT_TRUE(Contains(out, "__global__")) << out;
}

}  // namespace
}  // namespace ksearch
