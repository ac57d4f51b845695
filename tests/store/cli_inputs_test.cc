// The CLI's contract for every input a user can give (docs/cli.md): numeric
// flags of every subcommand, input files of any size, databases that cannot
// be used, signals during shutdown, flags that contradict each other. Each
// case checks the exit code and the message. All without a GPU.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include "cli_test_util.h"
#include "test_util.h"

namespace ksearch {
namespace {

using testing::ReadFile;
using testing::Shell;
using testing::Spawn;
using testing::TempDir;
using testing::Wait;

const std::string kCli = KSEARCH_CLI_PATH;
constexpr int kOk = 0, kUsage = 2, kFailure = 4, kCompiledOnly = 5, kInterrupted = 130;

// A compile-only tune of softmax recorded in `db` (no db: --no-db).
std::string CompileOnlyTune(const std::string& db, const std::string& extra = "") {
  return kCli + " run softmax --dims rows=64,cols=1024 --compile-only --arch sm_90 " +
         "--cache-dir off " + extra + (db.empty() ? " --no-db" : " --db " + db);
}

bool Contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

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
      {"eval softmax --compile-only --arch sm_90", "--replay-input-seed", "1.5",
       "is not an integer"},
      {run, "--replay-input-seed", "-1", "at least 0"},
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

// No input makes ksearch read without bound: a file a flag names is at most
// 16 MiB (an LLM recording 1 GiB), a device or a pipe is read up to that
// bound, and a file a library call would open itself must be a regular one.
TEST(CliInputs, InputFilesAreReadUpToABound) {
  TempDir dir;
  const std::string source = dir.Write("k.cu", "extern \"C\" __global__ void k() {}\n");
  const std::string branch = " run softmax --strategy branch --compile-only --arch sm_90 --no-db ";
  const std::vector<std::pair<std::string, std::string>> cases = {
      {" eval softmax --compile-only --arch sm_90 --source /dev/zero --plan /dev/zero",
       "--source: /dev/zero: larger than the limit of 16777216"},
      {" eval softmax --compile-only --arch sm_90 --plan /dev/zero --source " + source,
       "--plan: /dev/zero: larger than the limit of 16777216"},
      {branch + "--llm mock --mock-script /dev/zero", "--mock-script: /dev/zero: larger than"},
      {branch + "--llm openai:m --prices /dev/zero", "--prices: /dev/zero: larger than"},
      {branch + "--llm replay:/dev/zero", "replay:FILE: /dev/zero: not a regular file"},
      {branch + "--llm replay:" + dir.path(), "a folder without requests/ in it"},
      {" mock-llm --script /dev/zero", "--script: /dev/zero: larger than"},
      {" answer " + dir.path() + " --llm openai:m --prices /dev/zero",
       "--prices: /dev/zero: larger than"},
  };
  for (const auto& [args, says] : cases) {
    std::string out;
    EXPECT_EQ(Shell(kCli + args, &out), kUsage) << args << "\n" << out;
    EXPECT_TRUE(Contains(out, says)) << args << "\n" << out;
  }
}

// A resume opens only a ksearch database: an empty file stays empty.
TEST(CliInputs, AResumeNeverTurnsAFileIntoADatabase) {
  TempDir dir;
  const std::string empty = dir.Write("empty.db", "");
  std::string out;
  EXPECT_EQ(Shell(kCli + " resume 1 --db " + empty, &out), kUsage) << out;
  EXPECT_TRUE(Contains(out, "an empty file, not yet a ksearch database")) << out;
  EXPECT_EQ(std::filesystem::file_size(empty), 0u);
  EXPECT_FALSE(std::filesystem::exists(empty + "-wal"));
}

// Flags that would be ignored, or that contradict each other, are refused
// before anything runs, naming them.
TEST(CliInputs, FlagsThatWouldBeIgnoredAreRefused) {
  TempDir dir;
  const std::string plan = dir.Write("p.json", "{}");
  const std::vector<std::pair<std::string, std::string>> cases = {
      {kCli + " run softmax --no-db --resume 1", "--no-db excludes --resume"},
      {kCli + " eval softmax --kernel reference --source k.cu --plan " + plan,
       "--source excludes --kernel"},
      {CompileOnlyTune("", "--cache-dir /proc/ksearch-cache"),
       "--cache-dir: /proc/ksearch-cache: the compile cache cannot be kept there"},
      {"KSEARCH_CACHE_DIR=/proc/ksearch-cache " + CompileOnlyTune(""),
       "/proc/ksearch-cache: the compile cache cannot be kept there"},
      {kCli + " eval softmax --compile-only --arch sm_90 --cache-dir /proc/x", "/proc/x"},
      {kCli + " worker --queue redis://127.0.0.1:9 --arch sm_90 --fake --cache-dir /proc/x",
       "/proc/x"},
      {kCli + " export 1 --db x.db --cache-dir /proc/x", "/proc/x"},
      {kCli + " export 1 --db x.db --arch garbage", "--arch: garbage is not a GPU architecture"},
      {kCli + " run softmax --compile-only --arch sm90", "--arch: sm90 is not a GPU architecture"},
      {kCli + " worker --queue redis://127.0.0.1:9 --arch 90 --fake", "--arch: 90 is not"},
  };
  for (const auto& [command, says] : cases) {
    std::string out;
    EXPECT_EQ(Shell(command, &out), kUsage) << command << "\n" << out;
    EXPECT_TRUE(Contains(out, says)) << command << "\n" << out;
  }
}

// How a session prints is its own choice: a run started with --json resumes
// as text unless the resume asks for JSON too.
TEST(CliInputs, AResumePrintsJsonOnlyWhenAskedTo) {
  TempDir dir;
  const std::string db = dir.path() + "/k.db";
  std::string out;
  ASSERT_EQ(Shell(CompileOnlyTune(db, "--rounds 1 --batch 1 --json"), &out), kCompiledOnly) << out;
  ASSERT_TRUE(Contains(out, "{\"run\":1,")) << out;
  out.clear();
  EXPECT_EQ(Shell(kCli + " resume 1 --reopen --rounds 2 --db " + db, &out), kCompiledOnly) << out;
  EXPECT_FALSE(Contains(out, "{\"run\":")) << out;
  EXPECT_TRUE(Contains(out, "tune: ")) << out;
  out.clear();
  EXPECT_EQ(Shell(kCli + " resume 1 --reopen --rounds 3 --json --db " + db, &out), kCompiledOnly)
      << out;
  EXPECT_TRUE(Contains(out, "{\"run\":1,")) << out;
}

// A compile-only run's kernel was never run: export says so (stderr, and
// "never_run" in --json), and a bad --arch is named as such.
TEST(CliInputs, ExportSaysACompileOnlyKernelNeverRan) {
  TempDir dir;
  const std::string db = dir.path() + "/k.db";
  std::string out;
  ASSERT_EQ(Shell(CompileOnlyTune(db, "--rounds 1 --batch 2"), &out), kCompiledOnly) << out;
  out.clear();
  EXPECT_EQ(Shell(kCli + " export 1 --out " + dir.path() + "/k --db " + db, &out), kOk) << out;
  EXPECT_TRUE(Contains(out, "was only compiled (a compile-only run): it was never run")) << out;
  out.clear();
  EXPECT_EQ(Shell("{ " + kCli + " export 1 --json --out " + dir.path() + "/k --db " + db +
                      " 2>/dev/null; }",
                  &out),
            kOk)
      << out;
  EXPECT_TRUE(out.starts_with("{\"candidate_id\":")) << out;  // stdout: the document alone
  EXPECT_TRUE(Contains(out, "\"never_run\":true")) << out;
}

// The first of SIGINT and SIGTERM decides the exit code: a second signal
// during the shutdown (while work in flight is cancelled, the run recorded
// and the summary printed) changes nothing.
TEST(CliSignals, ASecondSignalDuringShutdownChangesNothing) {
  TempDir dir;
  const std::string db = dir.path() + "/k.db";
  const std::string log = dir.path() + "/log";
  pid_t pid = Spawn({kCli,         "run",         "softmax",  "--dims", "rows=64,cols=1024",
                     "--strategy", "branch",      "--llm",    "mock",   "--compile-only",
                     "--arch",     "sm_90",       "--rounds", "0",      "--budget-minutes",
                     "10",         "--cache-dir", "off",      "--db",   db},
                    log);
  ASSERT_GT(pid, 0);
  // The handlers are installed once the first round has begun.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(120);
  while (!Contains(ReadFile(log), "round 1") && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  ASSERT_TRUE(Contains(ReadFile(log), "round 1")) << ReadFile(log);
  ASSERT_EQ(::kill(pid, SIGINT), 0);
  // Once the first signal is taken (it says so), the others follow.
  while (!Contains(ReadFile(log), "ksearch: stopping") &&
         std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  ::kill(pid, SIGTERM);
  ::kill(pid, SIGTERM);
  EXPECT_EQ(Wait(pid), kInterrupted) << ReadFile(log);
  EXPECT_TRUE(Contains(ReadFile(log), "continue with 'ksearch resume 1'")) << ReadFile(log);
}

// Commands run as an unprivileged user (root ignores file permissions):
// "setpriv … COMMAND" under root, COMMAND otherwise; empty where that is not
// possible.
std::string Unprivileged(const std::string& command) {
  if (::geteuid() != 0) return command;
  if (::access("/usr/bin/setpriv", X_OK) != 0) return "";
  return "/usr/bin/setpriv --reuid=65534 --regid=65534 --clear-groups " + command;
}

// A database that cannot be written, or a new one in a folder that cannot
// be written, stops a run before it starts, as an environment failure (4),
// with a message that says which and why.
TEST(CliStore, ADatabaseThatCannotBeWrittenIsAnEnvironmentFailure) {
  TempDir dir;
  ASSERT_EQ(::chmod(dir.path().c_str(), 0755), 0);
  const std::string db = dir.path() + "/k.db";
  std::string out;
  ASSERT_EQ(Shell(CompileOnlyTune(db, "--rounds 1 --batch 1"), &out), kCompiledOnly) << out;
  ASSERT_EQ(::chmod(db.c_str(), 0444), 0);
  const std::string run = Unprivileged(CompileOnlyTune(db, "--rounds 1 --batch 1"));
  if (run.empty()) GTEST_SKIP() << "running as root without setpriv";
  out.clear();
  EXPECT_EQ(Shell(run, &out), kFailure) << out;
  EXPECT_TRUE(Contains(out, "the database cannot be written")) << out;
  EXPECT_FALSE(Contains(out, "open it read-only")) << out;
  out.clear();
  EXPECT_EQ(Shell(Unprivileged(kCli + " resume 1 --reopen --rounds 2 --db " + db), &out), kFailure)
      << out;
  EXPECT_TRUE(Contains(out, "the database cannot be written")) << out;
  // A new database in a folder that cannot be written.
  const std::string locked = dir.path() + "/locked";
  ASSERT_TRUE(std::filesystem::create_directory(locked));
  ASSERT_EQ(::chmod(locked.c_str(), 0555), 0);
  out.clear();
  EXPECT_EQ(Shell(Unprivileged(CompileOnlyTune(locked + "/new.db")), &out), kFailure) << out;
  EXPECT_TRUE(Contains(out, "cannot create the database: the folder " + locked +
                                " cannot be written (Permission denied)"))
      << out;
  EXPECT_FALSE(Contains(out, "No such file or directory")) << out;
  // A folder that does not exist is a mistyped --db: bad input.
  out.clear();
  EXPECT_EQ(Shell(CompileOnlyTune(dir.path() + "/none/new.db"), &out), kUsage) << out;
  EXPECT_TRUE(Contains(out, "/none does not exist")) << out;
}

// The disk fills up during a search (a file size limit stands in for a full
// disk): the search stops, the summary says it failed and why (not "stopped
// by an observer"), no "run recorded" line claims otherwise, and the exit
// code is the environment failure's.
TEST(CliStore, AFullDiskFailsTheRunAndSaysWhy) {
  TempDir dir;
  const std::string db = dir.path() + "/k.db";
  std::string out;
  ASSERT_EQ(Shell(CompileOnlyTune(db, "--rounds 1 --batch 1"), &out), kCompiledOnly) << out;
  // 512-byte blocks (POSIX sh): the database as it is and 64 KiB more, which
  // a three-round branch search outgrows in its write-ahead log.
  const auto blocks = (std::filesystem::file_size(db) + 65536) / 512;
  const std::string search = kCli +
                             " run softmax --dims rows=64,cols=1024 --strategy branch --llm mock "
                             "--compile-only --arch sm_90 --cache-dir off --rounds 3 --seeds 1 "
                             "--ideas 2 --branches 2 --db " +
                             db;
  out.clear();
  EXPECT_EQ(Shell("trap '' XFSZ; ulimit -f " + std::to_string(blocks) + "; exec " + search, &out),
            kFailure)
      << out;
  EXPECT_TRUE(Contains(out, "branch: failed")) << out;
  EXPECT_TRUE(Contains(out, "ksearch: recording run 2: ")) << out;
  EXPECT_FALSE(Contains(out, "stopped by an observer")) << out;
  EXPECT_FALSE(Contains(out, "run 2 recorded")) << out;
}

}  // namespace
}  // namespace ksearch
