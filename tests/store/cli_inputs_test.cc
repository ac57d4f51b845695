// The CLI's contract for every input a user can give (docs/cli.md): numeric
// flags of every subcommand, input files of any size, databases that cannot
// be used, signals during shutdown, flags that contradict each other. Each
// case checks the exit code and the message. All without a GPU.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "cli_test_util.h"
#include "test_util.h"

namespace ksearch {
namespace {

using testing::Shell;
using testing::TempDir;

const std::string kCli = KSEARCH_CLI_PATH;
constexpr int kUsage = 2;

struct BadValue {
  std::string command;  // the subcommand and what it needs besides the flag
  std::string flag;
  std::string value;
  std::string says;  // in the message, after "FLAG: VALUE"
};

// Every subcommand's numeric flags go through one check (numeric_flags.h):
// no NaN or infinity, no fraction for an integer, no value its type cannot
// hold, no value outside the flag's bounds; the message names the flag and
// the value, and prints bounds as short numbers.
TEST(CliInputs, EveryNumericFlagOfEverySubcommandIsCheckedBeforeAnythingRuns) {
  const std::string run = "run softmax --compile-only --arch sm_90 --no-db";
  const std::string worker = "worker --queue redis://127.0.0.1:9 --arch sm_90 --fake";
  const std::vector<BadValue> bad = {
      {run, "--temperature", "nan", "expected a finite number"},
      {run, "--temperature", "2.5", "expected a number from 0 to 2"},
      {run, "--llm-timeout", "nan", "expected a finite number"},
      {run, "--llm-timeout", "1e30", "at most 86400"},
      {run, "--llm-timeout", "0", "above 0"},
      {run, "--progress-every", "1e10", "from 0 to 86400"},
      {run, "--progress-every", "inf", "expected a finite number"},
      {run, "--budget-minutes", "1e400", "out of range"},
      {run, "--batch", "1.5", "is not an integer"},
      {run, "--batch", "1e3", "is not an integer"},
      {run, "--rounds", "99999999999999999999",
       "is too large (the most this flag holds is 2147483647)"},
      {run, "--max-candidates", "99999999999999999999", "is too large"},
      {run, "--seed", "-1", "at least 0"},
      {run, "--device", "0x10", "is not a number"},
      {run, "--max-in-flight", "0", "from 1 to 4096"},
      {"run", "--resume", "99999999999999999999",
       "is too large (the most this flag holds is 9223372036854775807)"},
      {"run", "--resume", "0", "at least 1"},
      {"resume 1", "--rounds", "1.5", "is not an integer"},
      {"resume 1", "--rounds", "inf", "is not a number"},
      {"resume 1", "--max-candidates", "1.5", "is not an integer"},
      {"resume 1", "--budget-minutes", "nan", "expected a finite number"},
      {"resume", "RUN", "abc", "is not a number"},
      {worker, "--batch", "-1", "from 0 to 4096"},
      {worker, "--visibility-timeout", "nan", "expected a finite number"},
      {worker, "--max-attempts", "0", "from 1 to 100"},
      {worker, "--gpus", "-1", "from 0 to 1023"},
      {"mock-llm --problem softmax", "--latency-ms", "-5", "from 0 to 3600000"},
      {"mock-llm --problem softmax", "--fault-rate", "nan", "expected a finite number"},
      {"mock-llm --problem softmax", "--port", "70000", "from 0 to 65535"},
      {"eval softmax --compile-only --arch sm_90", "--seed", "1.5", "is not an integer"},
      {"eval softmax --compile-only --arch sm_90", "--max-timing-seconds", "-inf", "finite"},
      {"list", "--limit", "-1", "at least 0"},
      {"best softmax", "--limit", "nan", "is not a number"},
  };
  for (const BadValue& b : bad) {
    std::string out;
    // A positional RUN is given bare, a flag with its value.
    std::string argument = b.flag == "RUN" ? b.value : b.flag + " " + b.value;
    std::string command = kCli + " " + b.command + " " + argument;
    EXPECT_EQ(Shell(command, &out), kUsage) << command << "\n" << out;
    const std::string named = (b.flag == "RUN" ? "RUN" : b.flag) + ": " +
                              (b.value.size() > 32 ? b.value.substr(0, 29) : b.value);
    EXPECT_NE(out.find(named), std::string::npos) << command << "\n" << out;
    EXPECT_NE(out.find(b.says), std::string::npos) << command << "\n" << out;
    EXPECT_LT(out.size(), 400u) << command << "\n" << out;
  }
  // A 400-digit value is quoted cut, not whole.
  std::string out;
  EXPECT_EQ(Shell(kCli + " " + run + " --budget-usd " + std::string(400, '9'), &out), kUsage);
  EXPECT_NE(out.find("(400 characters)"), std::string::npos) << out;
  EXPECT_LT(out.size(), 400u) << out;
  // "010" is ten, not octal eight: the value reaches the run as written.
  TempDir dir;
  const std::string db = dir.path() + "/k.db";
  out.clear();
  ASSERT_EQ(Shell(kCli +
                      " run softmax --compile-only --arch sm_90 --cache-dir off --rounds 1 "
                      "--batch 1 --seed 010 --db " +
                      db,
                  &out),
            5)
      << out;
  out.clear();
  ASSERT_EQ(Shell(kCli + " show 1 --json --db " + db, &out), 0) << out;
  EXPECT_NE(out.find("\"seed\":10,"), std::string::npos) << out;
}

}  // namespace
}  // namespace ksearch
