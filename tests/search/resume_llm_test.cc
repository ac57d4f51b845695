// A real ParallelBranchSearch with the LLM generators, over HTTP against the
// mock server, recorded in a store, SIGKILLed at random moments and resumed:
// no reply that was stored is ever asked of the model again, and the resumed
// run ends with the tree of an uninterrupted one. Branches that write the
// same (broken) kernel make duplicates, whose "same kernel as …" text reaches
// later prompts: it must not depend on the order replies arrived in, or the
// resumed prompts would differ from the stored ones and be bought again.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <map>
#include <random>
#include <set>

#include "ksearch/http_llm_client.h"
#include "ksearch/mock_llm_server.h"
#include "ksearch/run_session.h"
#include "ksearch/store.h"
#include "search_test_util.h"

namespace ksearch {
namespace {

using testing::BrokenKernelReply;
using testing::KernelReply;

// The mock server in a process of its own (forked before any thread exists
// here), so that the search sessions can be forked from a parent without
// threads. Commands over a pipe: 'h' answers with the hashes of every
// request served so far (one per line, then an empty line), 'q' stops it.
class ServerProcess {
 public:
  ServerProcess() {
    int to_server[2], from_server[2];
    if (::pipe(to_server) != 0 || ::pipe(from_server) != 0) return;
    pid_ = ::fork();
    if (pid_ == 0) {
      ::close(to_server[1]);
      ::close(from_server[0]);
      ::_exit(Serve(to_server[0], from_server[1]));
    }
    ::close(to_server[0]);
    ::close(from_server[1]);
    commands_ = ::fdopen(to_server[1], "w");
    replies_ = ::fdopen(from_server[0], "r");
    char line[64] = "";
    if (std::fgets(line, sizeof line, replies_)) port_ = std::atoi(line);
  }
  ~ServerProcess() {
    if (commands_) {
      std::fputc('q', commands_);
      std::fclose(commands_);
    }
    if (replies_) std::fclose(replies_);
    if (pid_ > 0) ::waitpid(pid_, nullptr, 0);
  }
  std::string url() const { return "http://127.0.0.1:" + std::to_string(port_) + "/v1"; }
  int port() const { return port_; }

  std::vector<std::string> Hashes() {
    std::vector<std::string> out;
    std::fputc('h', commands_);
    std::fflush(commands_);
    char line[256];
    while (std::fgets(line, sizeof line, replies_)) {
      std::string hash(line);
      while (!hash.empty() && (hash.back() == '\n')) hash.pop_back();
      if (hash.empty()) break;
      out.push_back(hash);
    }
    return out;
  }

 private:
  static int Serve(int in, int out) {
    MockLlmServer::Options options;
    options.threads = 2;
    options.max_recorded_requests = 100000;
    auto mock = MockLlmServer::Start(options);
    if (!mock.ok()) return 1;
    MockLlmServer& server = **mock;
    for (int r = 0; r < 3; ++r) {
      (void)server.AddRule(MockRule{"# Round " + std::to_string(r), "",
                                    MockReply{testing::IdeasReply(2, 2 * r)}});
    }
    // Branch 1 of every idea writes the same broken kernel (a duplicate
    // across ideas and seeds); the others distinct ones, each with its own
    // latency so that arrival orders vary from session to session.
    std::mt19937 rng(7);
    (void)server.AddRule(
        MockRule{"", "implementation 1 of", MockReply{BrokenKernelReply("same")}});
    for (int i = 0; i < 6; ++i) {
      for (int b = 2; b <= 3; ++b) {
        MockReply reply{KernelReply("i" + std::to_string(i) + "b" + std::to_string(b))};
        reply.delay_ms = std::uniform_int_distribution<int>(0, 8)(rng);
        (void)server.AddRule(MockRule{"", "Scripted idea " + std::to_string(i) +
                                              "\\.[\\s\\S]*implementation " +
                                              std::to_string(b) + " of",
                                      reply});
      }
    }
    FILE* replies = ::fdopen(out, "w");
    std::fprintf(replies, "%d\n", server.port());
    std::fflush(replies);
    for (;;) {
      char command = 0;
      if (::read(in, &command, 1) != 1 || command == 'q') return 0;
      for (const MockRequest& r : server.requests()) {
        std::fprintf(replies, "%s\n", RequestHash(r.request).c_str());
      }
      std::fprintf(replies, "\n");
      std::fflush(replies);
    }
  }

  pid_t pid_ = -1;
  int port_ = 0;
  FILE* commands_ = nullptr;
  FILE* replies_ = nullptr;
};

Problem TheProblem() { return testing::RowSoftmaxProblem(64, 1024); }

// One session: begins the run in `db` or resumes it. The process exit code.
int Session(const std::string& db, const std::string& url, double evaluation_seconds) {
  Store::Options store_options;
  store_options.sync_every_commit = false;
  auto store = Store::Open(db, store_options);
  if (!store.ok()) return 20;
  Problem problem = TheProblem();
  testing::FakeEvaluator inner(
      problem,
      [](const Candidate& c) {
        if (c.source.find("this_does_not_exist") != std::string::npos) {
          return testing::Failed(EvalStatus::kCompileError, "identifier this_does_not_exist");
        }
        // Distinct, deterministic times from the marker comment.
        return testing::Timed(1.0 + static_cast<double>(c.source.size() % 97) / 100.0);
      },
      evaluation_seconds);
  auto runs = (*store)->ListRuns();
  if (!runs.ok()) return 21;
  if (!runs->empty() && runs->front().status == RunStatus::kCompleted) return 0;
  RunSettings settings;
  settings.strategy = "branch";
  settings.seed = 5;
  settings.device = inner.device();
  auto session = runs->empty() ? BeginRun(**store, problem, settings)
                               : ResumeRun(**store, runs->front().id);
  if (!session.ok()) {
    std::fprintf(stderr, "session: %s\n", session.status().ToString().c_str());
    return 22;
  }
  auto evaluator = (*session)->WrapEvaluator(inner);
  if (!evaluator.ok()) return 23;
  HttpLlmClient::Options client_options;
  client_options.base_url = url;
  client_options.default_model = "mock";
  auto http = HttpLlmClient::Create(client_options);
  if (!http.ok()) return 24;
  auto llm = (*session)->WrapLlmClient(**http);
  if (!llm.ok()) return 25;
  LlmGeneratorOptions gen;
  gen.model = "mock";
  auto ideas = MakeLlmIdeaGenerator(**llm, gen);
  auto brancher = MakeLlmBrancher(**llm, gen);
  if (!ideas.ok() || !brancher.ok()) return 26;
  SearchOptions options;
  options.seed = 5;
  options.budget.max_rounds = 3;
  options.seeds = 2;
  options.ideas = 2;
  options.branches = 3;
  SearchContext context;
  context.problem = &problem;
  context.evaluator = evaluator->get();
  context.ideas = ideas->get();
  context.brancher = brancher->get();
  context.observers.push_back((*session)->observer());
  auto summary = MakeParallelBranchSearch(options)->Run(context);
  return (*session)->Finish(summary).ok() && summary.ok() ? 0 : 27;
}

// The store of `db` read-only, and its one run's id (nullptr when there is
// none yet).
std::unique_ptr<Store> OpenRun(const std::string& db, int64_t* run_id) {
  Store::Options options;
  options.read_only = true;
  auto store = Store::Open(db, options);
  if (!store.ok()) return nullptr;
  auto runs = (*store)->ListRuns();
  if (!runs.ok() || runs->empty()) return nullptr;
  *run_id = runs->front().id;
  return std::move(*store);
}

// candidate id → (content hash, evaluation), and the ideas with outcomes.
std::map<std::string, std::string> Outcome(const std::string& db) {
  std::map<std::string, std::string> out;
  int64_t run = 0;
  auto store = OpenRun(db, &run);
  if (!store) return out;
  auto history = store->LoadRunHistory(run, false);
  if (!history.ok()) return out;
  for (const HistoryEntry& e : history->entries) {
    out[e.candidate.id] = e.candidate.ContentHash() + " " + e.evaluation.ToJson();
  }
  for (const Idea& idea : history->ideas) out["idea " + idea.id] = idea.text + " → " + idea.outcome;
  return out;
}

// The entries that differ, one line each ("" when none).
std::string Differences(const std::map<std::string, std::string>& got,
                        const std::map<std::string, std::string>& want) {
  std::string out;
  for (const auto& [key, value] : want) {
    auto it = got.find(key);
    if (it == got.end()) {
      out += "missing " + key + "\n";
    } else if (it->second != value) {
      out += key + ":\n  got  " + it->second.substr(0, 400) + "\n  want " + value.substr(0, 400) +
             "\n";
    }
  }
  for (const auto& [key, value] : got) {
    if (!want.count(key)) out += "extra " + key + "\n";
  }
  return out;
}

std::set<std::string> StoredHashes(const std::string& db) {
  std::set<std::string> out;
  int64_t run = 0;
  auto store = OpenRun(db, &run);
  if (!store) return out;
  auto exchanges = store->LoadExchanges(run);
  if (!exchanges.ok()) return out;
  for (const LlmExchange& x : *exchanges) {
    if (x.response.ok()) out.insert(x.request_hash);
  }
  return out;
}

TEST(ResumeLlmSearch, KilledAndResumedItBuysNoStoredReplyAndEndsAsAnUninterruptedRun) {
  ServerProcess server;
  ASSERT_GT(server.port(), 0);
  testing::TempDir dir;
  const std::string reference = dir.path() + "/reference.db";
  {
    pid_t child = ::fork();
    ASSERT_GE(child, 0);
    if (child == 0) ::_exit(Session(reference, server.url(), 0.0));
    int status = 0;
    ASSERT_EQ(::waitpid(child, &status, 0), child);
    ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
  }
  const auto expected = Outcome(reference);
  ASSERT_GT(expected.size(), 20u);
  const size_t reference_requests = server.Hashes().size();
  ASSERT_GT(reference_requests, 10u);

  std::mt19937_64 rng(19);
  int kills = 0;
  for (int trial = 0; trial < 4; ++trial) {
    SCOPED_TRACE("trial " + std::to_string(trial));
    const std::string db = dir.path() + "/killed" + std::to_string(trial) + ".db";
    bool finished = false;
    for (int attempt = 0; attempt < 10 && !finished; ++attempt) {
      const std::set<std::string> stored = StoredHashes(db);
      const size_t served_before = server.Hashes().size();
      pid_t child = ::fork();
      ASSERT_GE(child, 0);
      if (child == 0) ::_exit(Session(db, server.url(), 0.01));
      if (attempt < 3) {
        ::usleep(static_cast<useconds_t>(
            std::uniform_int_distribution<int>(20, 250)(rng) * 1000));
        ::kill(child, SIGKILL);
      }
      int status = 0;
      ASSERT_EQ(::waitpid(child, &status, 0), child);
      if (WIFSIGNALED(status)) {
        ++kills;
      } else {
        ASSERT_TRUE(WIFEXITED(status));
        ASSERT_EQ(WEXITSTATUS(status), 0);
        finished = true;
      }
      // What this session asked the model: never a request whose reply the
      // store already held when it began.
      const std::vector<std::string> served = server.Hashes();
      for (size_t i = served_before; i < served.size(); ++i) {
        EXPECT_EQ(stored.count(served[i]), 0u)
            << "session " << attempt << " bought a stored reply again: " << served[i];
      }
    }
    ASSERT_TRUE(finished);
    EXPECT_EQ(Differences(Outcome(db), expected), "");
  }
  EXPECT_GT(kills, 0);
}

}  // namespace
}  // namespace ksearch
