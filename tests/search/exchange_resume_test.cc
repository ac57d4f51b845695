// A branch search through the exchange provider, recorded in a store,
// stopped while it waits for replies and resumed: prompts are a function of
// the stored run, so every resumed session asks for exactly the files the
// stopped one was waiting for, and the folder ends as an uninterrupted
// run's. A resume on a machine without a GPU advances the model's steps
// (idea replies → branch requests) and writes the same files a GPU host
// would, and stops when a candidate must be judged.
#include <gtest/gtest.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <future>
#include <map>
#include <set>

#include "ksearch/exchange_llm_client.h"
#include "ksearch/run_session.h"
#include "ksearch/store.h"
#include "search_test_util.h"

namespace ksearch {
namespace {

namespace fs = std::filesystem;
using testing::KernelReply;
using testing::TempDir;

// The device every verdict carries: prompts quote it.
DeviceInfo FakeH200() {
  DeviceInfo d;
  d.name = "fake GPU";
  d.cc_major = 9;
  d.multiprocessors = 132;
  d.l2_bytes = int64_t{60} << 20;
  d.peak_bandwidth_gbps = 4200;
  return d;
}

// Correct, with a time that is a function of the kernel's text.
Evaluation JudgeByContent(const Candidate& c) {
  const std::string hash = c.ContentHash();
  Evaluation e = testing::Timed(1.0 + static_cast<double>(std::stoul(hash.substr(0, 4), nullptr, 16)) / 65536.0);
  e.device = FakeH200();
  return e;
}

std::string Slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

// Writes a reply for each pending request that `pick` accepts: ideas as a
// JSON list named after the tag, implementations as the row softmax marked
// with the tag (so every branch is a kernel of its own).
int Answer(const std::string& folder, const std::function<bool(const std::string& tag)>& pick) {
  auto files = ListExchangeFolder(folder);
  if (!files.ok()) return 0;
  int answered = 0;
  for (const ExchangeFile& f : *files) {
    if (!f.reply_path.empty()) continue;
    auto request = ExchangeRequestFromJson(Slurp(f.request_path), f.request_path);
    if (!request.ok() || !pick(request->tag)) continue;
    std::string reply;
    if (request->tag.starts_with("ideas ")) {
      reply = "```json\n[{\"category\": \"memory_access\", \"idea\": \"First idea of " +
              request->tag + "\"}, {\"category\": \"compute\", \"idea\": \"Second idea of " +
              request->tag + "\"}]\n```\n";
    } else {
      reply = KernelReply(request->tag);
    }
    const std::string temp = folder + "/replies/." + f.name + ".part";
    std::ofstream(temp) << reply;
    fs::rename(temp, folder + "/replies/" + f.name + ".txt");
    ++answered;
  }
  return answered;
}

bool Always(const std::string&) { return true; }
bool Never(const std::string&) { return false; }

std::set<std::string> PendingNames(const std::string& folder) {
  std::set<std::string> out;
  auto files = ListExchangeFolder(folder);
  if (files.ok()) {
    for (const ExchangeFile& f : *files) {
      if (f.reply_path.empty()) out.insert(f.name);
    }
  }
  return out;
}

std::set<std::string> RequestNames(const std::string& folder) {
  std::set<std::string> out;
  auto files = ListExchangeFolder(folder);
  if (files.ok()) {
    for (const ExchangeFile& f : *files) out.insert(f.name);
  }
  return out;
}

enum class Judge { kGpu, kNoGpu };

struct Session {
  StatusOr<SearchSummary> summary = Status(StatusCode::kUnknown, "not run");
  std::vector<std::string> requested;  // names this session's client asked for
  int unavailable_calls = 0;
  int judged = 0;                      // candidates the (fake) GPU judged
};

// One session of a branch search (k=2, n=2, b=2, 3 rounds) through an
// exchange folder: a new run (run_id 0) or a resume. Every 10 ms `answer`
// may write replies; the session is stopped (as by Ctrl-C) once
// `stop_pending` requests have all waited 0.3 s, or runs to its end.
Session RunOnce(const std::string& db, const std::string& folder, int64_t run_id, Judge judge,
                const std::function<bool(const std::string&)>& pick, int stop_pending) {
  Session out;
  auto store = Store::Open(db);
  EXPECT_TRUE(store.ok()) << store.status().ToString();
  if (!store.ok()) return out;
  const Problem problem = testing::RowSoftmaxProblem(64, 1024);
  testing::FakeEvaluator gpu(problem, JudgeByContent);
  std::atomic<bool> cancel{false};
  std::unique_ptr<RunSession> session;
  if (run_id == 0) {
    RunSettings settings;
    settings.strategy = "branch";
    settings.device = gpu.device();
    auto begun = BeginRun(**store, problem, settings);
    EXPECT_TRUE(begun.ok()) << begun.status().ToString();
    if (!begun.ok()) return out;
    session = std::move(*begun);
  } else {
    auto resumed = ResumeRun(**store, run_id);
    EXPECT_TRUE(resumed.ok()) << resumed.status().ToString();
    if (!resumed.ok()) return out;
    session = std::move(*resumed);
  }
  StatusOr<std::unique_ptr<Evaluator>> evaluator = Status(StatusCode::kUnknown, "");
  if (judge == Judge::kGpu) {
    evaluator = session->WrapEvaluator(gpu);
  } else {
    evaluator = session->WrapDeferredEvaluator(
        [] { return StatusOr<std::unique_ptr<Evaluator>>(FailedPreconditionError("no CUDA driver found")); },
        [&](const Status&) {
          ++out.unavailable_calls;
          cancel = true;
        });
  }
  EXPECT_TRUE(evaluator.ok()) << evaluator.status().ToString();
  if (!evaluator.ok()) return out;

  ExchangeLlmClient::Options exchange;
  exchange.folder = folder;
  exchange.poll_interval_seconds = 0.02;
  auto client = ExchangeLlmClient::Create(exchange);
  EXPECT_TRUE(client.ok()) << client.status().ToString();
  auto llm = session->WrapLlmClient(**client);
  EXPECT_TRUE(llm.ok());
  LlmGeneratorOptions gen;
  gen.reformat_attempts = 1;
  auto ideas = MakeLlmIdeaGenerator(**llm, gen);
  auto brancher = MakeLlmBrancher(**llm, gen);
  SearchOptions options;
  options.seeds = 2;
  options.ideas = 2;
  options.branches = 2;
  options.budget.max_rounds = 3;
  SearchContext context;
  context.problem = &problem;
  context.evaluator = evaluator->get();
  context.ideas = ideas->get();
  context.brancher = brancher->get();
  context.observers.push_back(session->observer());
  context.cancel = &cancel;
  auto running = std::async(std::launch::async,
                            [&] { return MakeParallelBranchSearch(options)->Run(context); });
  while (running.wait_for(std::chrono::milliseconds(10)) != std::future_status::ready) {
    Answer(folder, pick);
    ExchangeLlmClient::Stats s = (*client)->stats();
    if (stop_pending > 0 && s.pending == stop_pending && s.newest_pending_seconds >= 0.3) {
      cancel = true;
    }
  }
  out.summary = running.get();
  EXPECT_TRUE(session->Finish(out.summary).ok());
  out.requested = (*client)->requested();
  out.judged = static_cast<int>(gpu.judged().size());
  return out;
}

std::vector<std::string> TreeIds(const SearchSummary& s) {
  std::vector<std::string> ids;
  for (const Idea& i : s.history.ideas) ids.push_back(i.id + " " + i.parent_id + " " + i.text);
  for (const HistoryEntry& e : s.history.entries) {
    ids.push_back(e.candidate.id + " " + e.candidate.provenance.parent_id + " " +
                  e.candidate.ContentHash());
  }
  return ids;
}

TEST(ExchangeResume, AStoppedRunResumesAskingForTheSameFilesAndEndsAsAnUninterruptedOne) {
  TempDir reference_dir, dir;
  const std::string reference_folder = reference_dir.path() + "/exchange";
  Session reference = RunOnce(reference_dir.path() + "/k.db", reference_folder, 0, Judge::kGpu,
                              Always, 0);
  ASSERT_TRUE(reference.summary.ok()) << reference.summary.status().ToString();
  ASSERT_EQ(reference.summary->rounds, 3);
  // 1 + 4 requests in round 0; 2 + 8 in rounds 1 and 2.
  ASSERT_EQ(RequestNames(reference_folder).size(), 25u);

  const std::string db = dir.path() + "/k.db", folder = dir.path() + "/exchange";
  // Session 1: the idea reply and each idea's first branch only.
  auto first_branches = [](const std::string& tag) {
    return tag.starts_with("ideas ") || tag.ends_with(".b0");
  };
  Session one = RunOnce(db, folder, 0, Judge::kGpu, first_branches, 2);
  ASSERT_TRUE(one.summary.ok());
  EXPECT_EQ(one.summary->termination, TerminationReason::kInterrupted);
  const std::set<std::string> waiting = PendingNames(folder);
  ASSERT_EQ(waiting.size(), 2u);
  auto files_before = RequestNames(folder);

  // Session 2: nothing new is answered; it asks for exactly those files.
  Session two = RunOnce(db, folder, 1, Judge::kGpu, Never, 2);
  ASSERT_TRUE(two.summary.ok());
  EXPECT_EQ(std::set<std::string>(two.requested.begin(), two.requested.end()), waiting);
  EXPECT_EQ(RequestNames(folder), files_before) << "no new request file";

  // Session 3: everything is answered; the run ends as the reference did.
  Session three = RunOnce(db, folder, 1, Judge::kGpu, Always, 0);
  ASSERT_TRUE(three.summary.ok()) << three.summary.status().ToString();
  EXPECT_EQ(three.summary->termination, reference.summary->termination);
  EXPECT_EQ(RequestNames(folder), RequestNames(reference_folder));
  for (const std::string& name : RequestNames(folder)) {
    EXPECT_EQ(Slurp(folder + "/requests/" + name + ".json"),
              Slurp(reference_folder + "/requests/" + name + ".json"))
        << name;
  }
  EXPECT_EQ(TreeIds(*three.summary), TreeIds(*reference.summary));
  // Replies that reached the run once come from the store afterwards.
  for (const std::string& name : three.requested) {
    EXPECT_FALSE(files_before.count(name) && !waiting.count(name))
        << name << " was answered in session 1, yet asked again";
  }
}

void CopyState(const std::string& from_dir, const std::string& to_dir) {
  fs::copy(from_dir, to_dir, fs::copy_options::recursive | fs::copy_options::overwrite_existing);
}

TEST(ExchangeResume, AResumeWithoutAGpuWritesWhatAGpuHostWouldAndStopsToJudge) {
  TempDir dir, gpu_copy_dir;
  const std::string db = dir.path() + "/k.db", folder = dir.path() + "/exchange";
  // On the GPU host: the start is judged, the first idea request waits.
  Session one = RunOnce(db, folder, 0, Judge::kGpu, Never, 1);
  ASSERT_TRUE(one.summary.ok());
  ASSERT_EQ(one.judged, 1);
  ASSERT_EQ(Answer(folder, Always), 1);  // answered elsewhere, carried back
  CopyState(dir.path(), gpu_copy_dir.path());

  // Without a GPU: the idea reply becomes four branch requests.
  Session cpu = RunOnce(db, folder, 1, Judge::kNoGpu, Never, 4);
  ASSERT_TRUE(cpu.summary.ok()) << cpu.summary.status().ToString();
  EXPECT_EQ(cpu.unavailable_calls, 0) << "nothing needed judging yet";
  // The idea request again (its reply is read now) and the four branches.
  ASSERT_EQ(cpu.requested.size(), 5u);
  ASSERT_EQ(PendingNames(folder).size(), 4u);
  // The same step on the GPU host, from the same stored state.
  const std::string gpu_folder = gpu_copy_dir.path() + "/exchange";
  Session gpu = RunOnce(gpu_copy_dir.path() + "/k.db", gpu_folder, 1, Judge::kGpu, Never, 4);
  ASSERT_TRUE(gpu.summary.ok());
  EXPECT_EQ(std::set<std::string>(gpu.requested.begin(), gpu.requested.end()),
            std::set<std::string>(cpu.requested.begin(), cpu.requested.end()));
  for (const std::string& name : cpu.requested) {
    const std::string text = Slurp(folder + "/requests/" + name + ".json");
    EXPECT_EQ(text, Slurp(gpu_folder + "/requests/" + name + ".json")) << name;
    // The device the run was measured on, not a compile-only one.
    EXPECT_NE(text.find("fake GPU (sm_90)"), std::string::npos) << name;
    EXPECT_NE(text.find("132 SMs"), std::string::npos) << name;
  }

  // The implementations arrive; without a GPU the run stops to be judged.
  ASSERT_EQ(Answer(folder, Always), 4);
  const auto files_before = RequestNames(folder);
  Session stop = RunOnce(db, folder, 1, Judge::kNoGpu, Never, 0);
  ASSERT_TRUE(stop.summary.ok()) << stop.summary.status().ToString();
  EXPECT_EQ(stop.unavailable_calls, 1);
  EXPECT_EQ(stop.summary->termination, TerminationReason::kInterrupted);
  EXPECT_EQ(RequestNames(folder), files_before) << "round 1 is not asked before round 0 is judged";

  // Back on the GPU host: the four are judged, round 1 asks for its ideas.
  Session judge = RunOnce(db, folder, 1, Judge::kGpu, Never, 2);
  ASSERT_TRUE(judge.summary.ok());
  EXPECT_EQ(judge.judged, 4) << "the start came from the store";
  EXPECT_EQ(PendingNames(folder).size(), 2u);
  for (const std::string& name : PendingNames(folder)) {
    EXPECT_TRUE(name.starts_with("ideas-r1.s")) << name;
  }
}

TEST(ExchangeResume, ADeferredEvaluatorNeedsARunThatJudgedSomething) {
  TempDir dir;
  auto store = Store::Open(dir.path() + "/k.db");
  ASSERT_TRUE(store.ok());
  Problem problem = testing::RowSoftmaxProblem(64, 1024);
  RunSettings settings;
  settings.device = FakeH200();
  auto session = BeginRun(**store, problem, settings);
  ASSERT_TRUE(session.ok());
  auto deferred = (*session)->WrapDeferredEvaluator(
      [] { return StatusOr<std::unique_ptr<Evaluator>>(UnavailableError("none")); }, nullptr);
  EXPECT_EQ(deferred.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(deferred.status().message().find("has judged no candidate yet"), std::string::npos)
      << deferred.status().ToString();
}

}  // namespace
}  // namespace ksearch
