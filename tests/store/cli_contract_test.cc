// The CLI's contract with a user and with scripts: compile-only verdicts read
// as compiled, one "best" everywhere, numeric flags validated, one exit code
// per cause, SIGTERM stops like SIGINT, --json output as docs/schemas says, and
// processes that share one database. All without a GPU (--compile-only).
#include <gtest/gtest.h>

#include <regex>
#include <signal.h>
#include <sqlite3.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include <boost/json.hpp>

#include "cli_test_util.h"
#include "ksearch/store.h"
#include "store_test_util.h"
#include "test_util.h"

namespace ksearch {
namespace {

using testing::Join;
using testing::ReadFile;
using testing::Shell;
using testing::Spawn;
using testing::TempDir;
using testing::Wait;

const std::string kCli = KSEARCH_CLI_PATH;
const std::string kSchemas = testing::SourcePath("docs/schemas/");

// The exit codes of docs/cli.md.
constexpr int kOk = 0, kRejected = 1, kUsage = 2, kCompiledOnly = 5, kNewerDatabase = 6,
              kDeviceMismatch = 7, kRunBusy = 8, kTerminated = 143;

// A compile-only tune of softmax, recorded in `db`.
std::string Tune(const std::string& db, const std::string& extra = "") {
  return kCli + " run softmax --dims rows=64,cols=1024 --compile-only --arch sm_90 --cache-dir off " +
         extra + (db.empty() ? " --no-db" : " --db " + db);
}

// A compile-only branch search with the problem-scripted mock model.
std::vector<std::string> Branch(const std::string& db, const std::string& rounds) {
  return {kCli, "run", "softmax", "--dims", "rows=64,cols=1024", "--strategy", "branch",
          "--llm", "mock", "--compile-only", "--arch", "sm_90", "--rounds", rounds, "--seeds", "1",
          "--ideas", "2", "--branches", "2", "--cache-dir", "off", "--db", db};
}

void Sql(const std::string& db, const std::string& statement) {
  sqlite3* handle = nullptr;
  ASSERT_EQ(sqlite3_open(db.c_str(), &handle), SQLITE_OK);
  char* error = nullptr;
  int rc = sqlite3_exec(handle, statement.c_str(), nullptr, nullptr, &error);
  std::string message = error ? error : "";
  sqlite3_free(error);
  sqlite3_close(handle);
  ASSERT_EQ(rc, SQLITE_OK) << statement << ": " << message;
}

RunInfo FindRun(const std::string& db, int64_t id) {
  Store::Options options;
  options.read_only = true;
  auto store = Store::Open(db, options);
  EXPECT_TRUE(store.ok()) << store.status().ToString();
  if (!store.ok()) return {};
  auto run = (*store)->FindRun(id);
  EXPECT_TRUE(run.ok()) << run.status().ToString();
  return run.ok() ? *run : RunInfo{};
}

// The JSON document on the last line of `out` that starts with '{' or '['.
boost::json::value LastJson(const std::string& out) {
  size_t end = out.size();
  while (end > 0) {
    size_t start = out.rfind('\n', end - 1);
    start = start == std::string::npos ? 0 : start + 1;
    std::string line = out.substr(start, end - start);
    if (!line.empty() && (line[0] == '{' || line[0] == '[')) {
      boost::system::error_code ec;
      boost::json::value v = boost::json::parse(line, ec);
      if (!ec) return v;
    }
    if (start == 0) break;
    end = start - 1;
  }
  return nullptr;
}

// Branch(db, rounds) with --json: its summary (null when it printed none).
boost::json::value BranchJson(const std::string& db, const std::string& rounds) {
  std::string out;
  EXPECT_EQ(Shell(Join(Branch(db, rounds)) + " --json", &out), kCompiledOnly) << out;
  boost::json::value run = LastJson(out);
  EXPECT_TRUE(run.is_object()) << out;
  return run;
}

// The parts of JSON Schema that docs/schemas uses: type, required,
// properties, items, enum, $ref into $defs. Appends one line per violation.
void Validate(const boost::json::value& v, const boost::json::value& schema,
              const boost::json::value& root, const std::string& where, std::string* errors) {
  if (!schema.is_object()) return;
  const boost::json::object& s = schema.as_object();
  if (auto* ref = s.if_contains("$ref")) {
    std::string name(ref->as_string());
    name = name.substr(name.rfind('/') + 1);
    Validate(v, root.at("$defs").at(name), root, where, errors);
  }
  if (auto* type = s.if_contains("type")) {
    auto is = [&](std::string_view t) {
      return (t == "object" && v.is_object()) || (t == "array" && v.is_array()) ||
             (t == "string" && v.is_string()) || (t == "boolean" && v.is_bool()) ||
             (t == "null" && v.is_null()) || (t == "integer" && (v.is_int64() || v.is_uint64())) ||
             (t == "number" && v.is_number());
    };
    bool matched = false;
    if (type->is_string()) matched = is(type->as_string());
    if (type->is_array()) {
      for (const auto& t : type->as_array()) matched |= is(t.as_string());
    }
    if (!matched) {
      *errors += where + ": not of type " + boost::json::serialize(*type) + "\n";
      return;
    }
  }
  if (auto* values = s.if_contains("enum")) {
    const auto& a = values->as_array();
    if (std::find(a.begin(), a.end(), v) == a.end()) {
      *errors += where + ": " + boost::json::serialize(v) + " is not one of the enum\n";
    }
  }
  if (v.is_object()) {
    if (auto* required = s.if_contains("required")) {
      for (const auto& key : required->as_array()) {
        if (!v.as_object().contains(key.as_string())) {
          *errors += where + ": no \"" + std::string(key.as_string()) + "\"\n";
        }
      }
    }
    if (auto* properties = s.if_contains("properties")) {
      for (const auto& [key, sub] : properties->as_object()) {
        if (auto* item = v.as_object().if_contains(key)) {
          Validate(*item, sub, root, where + "." + std::string(key), errors);
        }
      }
    }
  }
  if (v.is_array()) {
    if (auto* items = s.if_contains("items")) {
      for (size_t i = 0; i < v.as_array().size(); ++i) {
        Validate(v.as_array()[i], *items, root, where + "[" + std::to_string(i) + "]", errors);
      }
    }
  }
}

std::string ValidateAgainst(const std::string& schema_file, const boost::json::value& v,
                            const std::string& def = "") {
  boost::json::value schema = boost::json::parse(ReadFile(kSchemas + schema_file));
  std::string errors;
  Validate(v, def.empty() ? schema : schema.at("$defs").at(def), schema, "$", &errors);
  return errors;
}

TEST(CliContract, CompileOnlyVerdictsReadAsCompiledNeverCorrect) {
  TempDir dir;
  const std::string db = dir.path() + "/k.db";
  std::string out;
  ASSERT_EQ(Shell(Tune(db, "--rounds 2 --batch 3"), &out), kCompiledOnly) << out;
  EXPECT_NE(out.find("0 correct, 5 compiled (compile-only: not run)"), std::string::npos) << out;
  EXPECT_EQ(out.find("5 correct"), std::string::npos) << out;
  EXPECT_TRUE(std::regex_search(out, std::regex(R"(compile [0-9.]+ s \(CPU\))")))
      << "CPU compile time is 'compile': " << out;
  EXPECT_EQ(out.find("GPU 0"), std::string::npos) << out;
  out.clear();
  ASSERT_EQ(Shell(kCli + " list --json --db " + db, &out), kOk) << out;
  EXPECT_NE(out.find("\"correct\":0"), std::string::npos) << out;
  EXPECT_NE(out.find("\"compiled\":5"), std::string::npos) << out;
  // `best` counts correct kernels only.
  out.clear();
  EXPECT_EQ(Shell(kCli + " best softmax --db " + db, &out), kRejected) << out;
  out.clear();
  EXPECT_EQ(Shell(kCli + " eval softmax --kernel start --compile-only --arch sm_90 --cache-dir off"
                  " --json", &out), kCompiledOnly) << out;
  EXPECT_NE(out.find("\"status\":\"compiled\""), std::string::npos) << out;
}

TEST(CliContract, OneBestForTheSearchShowExportAndTheRecord) {
  TempDir dir;
  const std::string db = dir.path() + "/k.db";
  boost::json::value run = BranchJson(db, "2");
  ASSERT_TRUE(run.is_object());
  std::string out;
  ASSERT_TRUE(run.at("best_candidate_id").is_string()) << out;
  const std::string best(run.at("best_candidate_id").as_string());
  EXPECT_EQ(FindRun(db, 1).best_candidate_id, best);
  out.clear();
  ASSERT_EQ(Shell(kCli + " show 1 --json --db " + db, &out), kOk) << out;
  EXPECT_EQ(LastJson(out).at("best").at("candidate").at("id").as_string(), best) << out;
  out.clear();
  ASSERT_EQ(Shell(kCli + " show 1 --db " + db, &out), kOk) << out;
  EXPECT_NE(out.find("best compiled kernel " + best), std::string::npos) << out;
  out.clear();
  ASSERT_EQ(Shell(kCli + " export 1 --json --cache-dir off --out " + dir.path() + "/exp --db " + db,
                  &out), kOk) << out;
  EXPECT_EQ(LastJson(out).at("candidate_id").as_string(), best) << out;
}

TEST(CliContract, IdeaOutcomesTuneParametersAndPrettyPlansAreShown) {
  TempDir dir;
  const std::string db = dir.path() + "/k.db";
  std::string out;
  ASSERT_EQ(Shell(Join(Branch(db, "2")), &out), kCompiledOnly) << out;
  Store::Options options;
  options.read_only = true;
  auto store = Store::Open(db, options);
  ASSERT_TRUE(store.ok());
  auto history = (*store)->LoadRunHistory(1, false);
  ASSERT_TRUE(history.ok());
  ASSERT_FALSE(history->ideas.empty());
  for (const Idea& idea : history->ideas) EXPECT_FALSE(idea.outcome.empty()) << idea.id;
  out.clear();
  ASSERT_EQ(Shell(kCli + " show 1 --db " + db, &out), kOk) << out;
  EXPECT_NE(out.find("    -> " + history->ideas.front().outcome), std::string::npos) << out;
  EXPECT_NE(out.find("\n  \"launches\": ["), std::string::npos) << "the plan, indented: " << out;

  const std::string tuned = dir.path() + "/t.db";
  out.clear();
  ASSERT_EQ(Shell(Tune(tuned, "--rounds 1 --batch 2"), &out), kCompiledOnly) << out;
  out.clear();
  ASSERT_EQ(Shell(kCli + " report 1 --html " + dir.path() + "/r.html --db " + tuned, &out), kOk);
  std::string html = ReadFile(dir.path() + "/r.html");
  EXPECT_NE(html.find("<span class=\"params\">BLOCK="), std::string::npos);
}

TEST(CliContract, NumericFlagsAreValidatedNamingFlagAndValue) {
  const std::vector<std::pair<std::string, std::string>> bad = {
      {"--rounds", "-1"}, {"--batch", "0"}, {"--batch", "-5"}, {"--seed", "-1"},
      {"--budget-minutes", "-2"}, {"--budget-usd", "-1"}, {"--max-candidates", "-3"},
      {"--seeds", "0"}, {"--branches", "0"}, {"--ideas", "-1"}};
  for (const auto& [flag, value] : bad) {
    std::string out;
    EXPECT_EQ(Shell(Tune("", flag + " " + value), &out), kUsage) << flag << " " << value << out;
    EXPECT_NE(out.find(flag + ": " + value), std::string::npos) << out;
  }
  std::string out;
  EXPECT_EQ(Shell(kCli + " resume 1 --rounds -4 --db /nonexistent.db", &out), kUsage) << out;
  EXPECT_NE(out.find("--rounds: -4"), std::string::npos) << out;
}

TEST(CliContract, ABudgetGivenAloneBoundsTheRun) {
  std::string out;
  // Without the rule, --rounds 6 would end this at 7 candidates (the start
  // kernel and one a round).
  ASSERT_EQ(Shell(Tune("", "--max-candidates 9 --batch 1 --json"), &out), kCompiledOnly) << out;
  boost::json::value run = LastJson(out);
  ASSERT_TRUE(run.is_object()) << out;
  EXPECT_EQ(run.at("termination").as_string(), "candidate budget reached") << out;
  EXPECT_EQ(run.at("candidates").as_int64(), 9);
  out.clear();
  // 0.6 s of wall time: on a loaded machine it runs out before the first
  // candidate has compiled, which is then cancelled (exit 1, nothing
  // compiled); otherwise it ends compiled-only. Either way the rounds did
  // not end it.
  int code = Shell(Tune("", "--budget-minutes 0.01 --batch 1 --json"), &out);
  EXPECT_TRUE(code == kCompiledOnly || code == kRejected) << code << ": " << out;
  EXPECT_NE(LastJson(out).at("termination").as_string(), "round budget reached") << out;
}

TEST(CliContract, SigtermStopsLikeSigintAndTheRunResumes) {
  TempDir dir;
  const std::string db = dir.path() + "/k.db";
  std::vector<std::string> args = Branch(db, "0");
  args.insert(args.end(), {"--budget-minutes", "10"});
  pid_t pid = Spawn(args, dir.path() + "/log");
  ASSERT_GT(pid, 0);
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(120);
  while (std::chrono::steady_clock::now() < deadline) {
    Store::Options options;
    options.read_only = true;
    auto store = Store::Open(db, options);
    if (store.ok()) {
      auto run = (*store)->FindRun(1);
      if (run.ok() && run->candidates >= 2) break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  ASSERT_EQ(::kill(pid, SIGTERM), 0);
  EXPECT_EQ(Wait(pid), kTerminated);
  std::string log = ReadFile(dir.path() + "/log");
  EXPECT_NE(log.find("branch: interrupted"), std::string::npos) << "the summary: " << log;
  EXPECT_NE(log.find("continue with 'ksearch resume 1'"), std::string::npos) << log;
  EXPECT_EQ(FindRun(db, 1).status, RunStatus::kInterrupted);
  std::string out;
  EXPECT_EQ(Shell(kCli + " resume 1 --rounds 1 --db " + db, &out), kCompiledOnly) << out;
  EXPECT_EQ(FindRun(db, 1).status, RunStatus::kCompleted);
}

TEST(CliContract, EachCauseHasItsOwnExitCode) {
  TempDir dir;
  const std::string db = dir.path() + "/k.db";
  std::string out;
  ASSERT_EQ(Shell(Tune(db, "--rounds 1 --batch 2"), &out), kCompiledOnly) << out;

  // A resume never creates a database.
  out.clear();
  EXPECT_EQ(Shell(kCli + " resume 1 --db " + dir.path() + "/none.db", &out), kUsage) << out;
  EXPECT_NE(out.find("no such database"), std::string::npos) << out;
  EXPECT_FALSE(std::filesystem::exists(dir.path() + "/none.db"));

  // Another process runs the run: this test's own process, alive.
  Sql(db, "UPDATE runs SET status = 'running', pid = " + std::to_string(::getpid()));
  out.clear();
  EXPECT_EQ(Shell(kCli + " resume 1 --db " + db, &out), kRunBusy) << out;
  EXPECT_NE(out.find("still running"), std::string::npos) << out;

  // Measured on another GPU.
  Sql(db, "UPDATE runs SET status = 'interrupted', device_name = 'NVIDIA H200'");
  out.clear();
  EXPECT_EQ(Shell(kCli + " resume 1 --db " + db, &out), kDeviceMismatch) << out;
  EXPECT_NE(out.find("was measured on NVIDIA H200"), std::string::npos) << out;

  // Judged through a queue: the resume needs its URL, not a GPU.
  Sql(db, "UPDATE runs SET status = 'interrupted', device_name = '(compile-only)', options_json = "
          "'{\"argv\":[\"softmax\",\"--arch\",\"sm_90\",\"--queue-run\",\"ks-1\"]}'");
  const int sessions = FindRun(db, 1).sessions;
  out.clear();
  EXPECT_EQ(Shell(kCli + " resume 1 --db " + db, &out), kUsage) << out;
  EXPECT_NE(out.find("resume it with --queue URL"), std::string::npos) << out;
  EXPECT_EQ(out.find("CUDA"), std::string::npos) << out;
  // A resume that cannot start leaves the run as it was.
  EXPECT_EQ(FindRun(db, 1).status, RunStatus::kInterrupted);
  EXPECT_EQ(FindRun(db, 1).sessions, sessions);

  // Written by a newer ksearch.
  Sql(db, "PRAGMA user_version = 99");
  for (const std::string& command : {Tune(db, "--rounds 1"), kCli + " resume 1 --db " + db,
                                     kCli + " list --db " + db, kCli + " show 1 --db " + db}) {
    out.clear();
    EXPECT_EQ(Shell(command, &out), kNewerDatabase) << command << "\n" << out;
    EXPECT_NE(out.find("written by a newer ksearch"), std::string::npos) << out;
  }
}

TEST(CliContract, ReopenWithMoreRoundsExtendsACompletedRun) {
  TempDir dir;
  const std::string db = dir.path() + "/k.db";
  std::string out;
  ASSERT_EQ(Shell(Tune(db, "--rounds 1 --batch 2"), &out), kCompiledOnly) << out;
  const int64_t before = FindRun(db, 1).candidates;
  out.clear();
  EXPECT_EQ(Shell(kCli + " resume 1 --rounds 3 --db " + db, &out), kUsage) << out;
  EXPECT_NE(out.find("already completed"), std::string::npos) << out;
  out.clear();
  ASSERT_EQ(Shell(kCli + " resume 1 --reopen --rounds 3 --db " + db, &out), kCompiledOnly) << out;
  RunInfo run = FindRun(db, 1);
  EXPECT_GT(run.candidates, before);
  EXPECT_EQ(run.sessions, 2);
  EXPECT_NE(run.options_json.find("\"--rounds\",\"3\""), std::string::npos) << run.options_json;
  EXPECT_EQ(run.options_json.find("\"--rounds\",\"1\""), std::string::npos) << run.options_json;
}

TEST(CliContract, JsonOutputHasWhatTheSchemasRequire) {
  TempDir dir;
  const std::string db = dir.path() + "/k.db";
  boost::json::value run = BranchJson(db, "1");
  EXPECT_EQ(ValidateAgainst("run.json", run), "") << run;
  std::string out;
  EXPECT_EQ(ValidateAgainst("evaluation.json", run.at("best")), "");
  ASSERT_EQ(Shell(kCli + " show 1 --json --db " + db, &out), kOk) << out;
  EXPECT_EQ(ValidateAgainst("show.json", LastJson(out)), "") << out;
  out.clear();
  ASSERT_EQ(Shell(kCli + " list --json --db " + db, &out), kOk) << out;
  boost::json::value runs = LastJson(out);
  ASSERT_TRUE(runs.is_array()) << out;
  for (const auto& item : runs.as_array()) {
    EXPECT_EQ(ValidateAgainst("show.json", item, "run"), "") << out;
  }
  out.clear();
  ASSERT_EQ(Shell(kCli + " eval softmax --kernel start --compile-only --arch sm_90 --cache-dir off"
                  " --json", &out), kCompiledOnly) << out;
  EXPECT_EQ(ValidateAgainst("evaluation.json", LastJson(out)), "") << out;
  out.clear();
  ASSERT_EQ(Shell("{ " + kCli + " export 1 --json --out " + dir.path() + "/k --db " + db +
                      " 2>/dev/null; }",
                  &out),
            kOk)
      << out;
  EXPECT_EQ(ValidateAgainst("export.json", LastJson(out)), "") << out;
  for (const char* problem : {"softmax", "linear", "attention"}) {
    out.clear();
    ASSERT_EQ(Shell(kCli + " problems show " + problem + " --json", &out), kOk) << out;
    EXPECT_EQ(ValidateAgainst("problem.json", LastJson(out)), "") << problem;
  }
  const std::string judged = dir.path() + "/judged.db";
  testing::RecordACorrectKernel(judged, "");
  out.clear();
  ASSERT_EQ(Shell(kCli + " best row_softmax --json --db " + judged, &out), kOk) << out;
  ASSERT_TRUE(LastJson(out).is_array()) << out;
  EXPECT_EQ(LastJson(out).as_array().size(), 1u) << out;
  EXPECT_EQ(ValidateAgainst("best.json", LastJson(out)), "") << out;
  // The check can fail: a document without a required field.
  boost::json::object broken = run.as_object();
  broken.erase("time");
  EXPECT_NE(ValidateAgainst("run.json", broken), "");
}

TEST(CliContract, AMissingKernelIsNamedWithTheEntryPointsThatExist) {
  TempDir dir;
  const std::string source = dir.Write(
      "two.cu",
      "extern \"C\" __global__ void softmax_a(const float* x, float* y, int rows, int cols) {}\n"
      "extern \"C\" __global__ void softmax_b(const float* x, float* y, int rows, int cols) {}\n");
  const std::string plan = dir.Write(
      "plan.json",
      "{\"launches\": [{\"kernel\": \"softmax_c\", \"grid\": [\"rows\", 1, 1], \"block\": [256, 1, 1],"
      " \"args\": [\"x\", \"y\", \"rows:i32\", \"cols:i32\"]}]}");
  std::string out;
  EXPECT_EQ(Shell(kCli + " eval softmax --source " + source + " --plan " + plan +
                  " --compile-only --arch sm_90 --cache-dir off", &out), kRejected) << out;
  EXPECT_NE(out.find("invalid_plan"), std::string::npos) << out;
  EXPECT_NE(out.find("'softmax_c' is not an entry point of '" + source + "'"), std::string::npos)
      << out;
  EXPECT_NE(out.find("its entry points: softmax_a, softmax_b"), std::string::npos) << out;
}

TEST(CliContract, ProblemsShowCountsValidPointsAndLoaderErrorsSayWhere) {
  std::string out;
  ASSERT_EQ(Shell(kCli + " problems show softmax", &out), kOk) << out;
  EXPECT_NE(out.find("cluster: 36 points of 192 before constraints"), std::string::npos) << out;
  out.clear();
  ASSERT_EQ(Shell(kCli + " problems show layernorm", &out), kOk) << out;
  EXPECT_NE(out.find("normal=normal(0, 1) (weight: normal(1, 0.1), bias: normal(0, 0.1))"),
            std::string::npos) << "per-tensor input sets: " << out;
  out.clear();
  ASSERT_EQ(Shell(kCli + " problems show matmul", &out), kOk) << out;
  EXPECT_NE(out.find("baseline:  cublas_sgemm (a=A, b=B, c=C, m=M, n=N, k=K)"), std::string::npos)
      << "the baseline's binding: " << out;

  // Problems of one's own, made from the built-in one.
  TempDir dir;
  out.clear();
  ASSERT_EQ(Shell(kCli + " problems show softmax --json", &out), kOk);
  boost::json::value problem = LastJson(out);
  ASSERT_TRUE(problem.is_object()) << out;
  boost::json::value both = problem;
  both.as_object()["description_file"] = "about.md";
  dir.Write("about.md", "softmax");
  const std::string both_file = dir.Write("both.json", boost::json::serialize(both));
  out.clear();
  EXPECT_EQ(Shell(kCli + " problems show " + both_file, &out), kUsage) << out;
  EXPECT_NE(out.find("not both"), std::string::npos) << out;

  boost::json::value bad_default = problem;
  bad_default.at("templates").as_array()[0].as_object()["constraints"] = {"BLOCK > 100000"};
  const std::string bad_file = dir.Write("bad_default.json", boost::json::serialize(bad_default));
  out.clear();
  EXPECT_EQ(Shell(kCli + " problems show " + bad_file, &out), kUsage) << out;
  EXPECT_NE(out.find("(template 'online'): its default point (BLOCK=256, VEC=4) violates its own"
                     " constraints[0] 'BLOCK > 100000'"), std::string::npos) << out;

  const std::string broken = dir.Write("broken.json", "{\n  \"name\": \"x\",\n  \"dims\": ,\n}\n");
  out.clear();
  EXPECT_EQ(Shell(kCli + " problems show " + broken, &out), kUsage) << out;
  EXPECT_NE(out.find("malformed JSON at line 3, column 11"), std::string::npos) << out;
}

// Starts `args` twice at once; the exit codes, and both logs in `logs`.
std::vector<int> RunTwoAtOnce(const std::vector<std::string>& args, const std::string& log_prefix,
                              std::string* logs) {
  pid_t a = Spawn(args, log_prefix + ".a.log");
  pid_t b = Spawn(args, log_prefix + ".b.log");
  std::vector<int> codes = {a > 0 ? Wait(a) : -1, b > 0 ? Wait(b) : -1};
  *logs = ReadFile(log_prefix + ".a.log") + "\n----\n" + ReadFile(log_prefix + ".b.log");
  return codes;
}

// Two `ksearch resume 1` at once: whichever wins, the run gets exactly one
// new session and the other process says why it did not run.
TEST(CliContract, TwoResumesAtOnceRunTheRunOnce) {
  TempDir dir;
  const std::string db = dir.path() + "/k.db";
  std::string out;
  ASSERT_EQ(Shell(Join(Branch(db, "2")), &out), kCompiledOnly) << out;
  for (int trial = 0; trial < 3; ++trial) {
    Sql(db, "UPDATE runs SET status = 'interrupted'");
    const int sessions = FindRun(db, 1).sessions;
    std::string logs;
    std::vector<int> codes =
        RunTwoAtOnce({kCli, "resume", "1", "--db", db}, dir.path() + "/" + std::to_string(trial), &logs);
    std::sort(codes.begin(), codes.end());
    ASSERT_EQ(std::count(codes.begin(), codes.end(), kCompiledOnly), 1) << logs;
    const int other = codes[0] == kCompiledOnly ? codes[1] : codes[0];
    EXPECT_TRUE(other == kRunBusy || other == kUsage) << other << "\n" << logs;
    EXPECT_TRUE(logs.find("still running") != std::string::npos ||
                logs.find("already completed") != std::string::npos) << logs;
    EXPECT_EQ(FindRun(db, 1).sessions, sessions + 1) << logs;
  }
}

// Two searches started at once on a database that does not exist yet: both
// create it, both record their run.
TEST(CliContract, TwoSearchesCreateOneDatabaseTogether) {
  TempDir dir;
  for (int trial = 0; trial < 3; ++trial) {
    const std::string db = dir.path() + "/new" + std::to_string(trial) + ".db";
    std::vector<std::string> args = {kCli, "run", "softmax", "--dims", "rows=64,cols=1024",
                                     "--compile-only", "--arch", "sm_90", "--rounds", "1",
                                     "--batch", "1", "--cache-dir", "off", "--db", db};
    std::string logs;
    std::vector<int> codes = RunTwoAtOnce(args, db, &logs);
    EXPECT_EQ(codes, std::vector<int>({kCompiledOnly, kCompiledOnly})) << logs;
    Store::Options options;
    options.read_only = true;
    auto store = Store::Open(db, options);
    ASSERT_TRUE(store.ok()) << store.status().ToString();
    auto runs = (*store)->ListRuns();
    ASSERT_TRUE(runs.ok());
    EXPECT_EQ(runs->size(), 2u) << logs;
  }
}

}  // namespace
}  // namespace ksearch
