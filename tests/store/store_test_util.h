// Fakes shared by the store tests: an evaluator and a paid LLM whose answers
// are pure functions of their input (so a resumed run can be compared with an
// uninterrupted one) and that append what they did to journal files (so a
// test can count work done twice), and a small LLM-driven strategy.
#ifndef KSEARCH_TESTS_STORE_STORE_TEST_UTIL_H_
#define KSEARCH_TESTS_STORE_STORE_TEST_UTIL_H_

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sqlite3.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <deque>
#include <fstream>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "ksearch/evaluator.h"
#include "ksearch/llm_client.h"
#include "ksearch/searcher.h"
#include "ksearch/store.h"
#include "test_util.h"

namespace ksearch::testing {

// Appends one line with a single write(2): a line is either whole in the file
// or absent, whatever instant the process is killed.
inline void AppendLine(const std::string& path, const std::string& line) {
  if (path.empty()) return;
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (fd < 0) return;
  std::string text = line + "\n";
  ssize_t written = ::write(fd, text.data(), text.size());
  (void)written;
  ::close(fd);
}

inline std::vector<std::string> ReadLines(const std::string& path) {
  std::vector<std::string> lines;
  std::ifstream in(path);
  for (std::string line; std::getline(in, line);) {
    if (!line.empty()) lines.push_back(line);
  }
  return lines;
}

// Runs `sql` on the SQLite file at `path` (to build old or damaged
// databases by hand; the test links SQLite).
inline void ExecSql(const std::string& path, const std::string& sql) {
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open(path.c_str(), &db), SQLITE_OK);
  char* error = nullptr;
  EXPECT_EQ(sqlite3_exec(db, sql.c_str(), nullptr, nullptr, &error), SQLITE_OK) << (error ? error : "");
  sqlite3_free(error);
  sqlite3_close(db);
}

// Row softmax judged at rows 4 (weight 3), 7 (check-only) and 64, cols 256,
// with dispatch buckets rows <= 16 and rows > 16.
inline Problem BucketedSoftmax() {
  Problem problem = RowSoftmaxProblem(64, 256);
  problem.shapes = {ShapeCase{"decode", {{"rows", 4}}, 3.0, true},
                    ShapeCase{"odd", {{"rows", 7}}, 1.0, false},
                    ShapeCase{"prefill", {{"rows", 64}}, 1.0, true}};
  problem.dispatch = DispatchSpec{"rows", {16}};
  EXPECT_TRUE(problem.Validate().ok()) << problem.Validate().ToString();
  return problem;
}

inline DeviceInfo FakeDevice() {
  DeviceInfo d;
  d.name = "Fake GPU";
  d.cc_major = 9;
  d.cc_minor = 0;
  d.driver_version = 13000;
  d.nvrtc_version = "13.0";
  return d;
}

// The evaluation a candidate deserves, from its content alone.
inline Evaluation FakeVerdict(const Candidate& c, const DeviceInfo& device) {
  Evaluation e;
  e.candidate_id = c.id;
  e.content_hash = c.ContentHash();
  e.device = device;
  unsigned value = static_cast<unsigned>(std::strtoul(e.content_hash.substr(0, 4).c_str(), nullptr, 16));
  if (value % 5 == 0) {
    e.status = EvalStatus::kWrongResult;
    e.message = "y differs on 'normal' inputs";
    Mismatch m;
    m.tensor = "y";
    m.input_set = "normal";
    m.phase = "check";
    m.bad_count = 3;
    m.elements = 1024;
    e.mismatch = m;
    return e;
  }
  if (value % 7 == 0) {
    e.status = EvalStatus::kCompileError;
    e.message = "NVRTC rejected the source";
    e.details = "candidate.cu(3): error: identifier \"x\" is undefined";
    return e;
  }
  e.status = EvalStatus::kOk;
  e.message = "correct on 3 input sets";
  TimingStats t;
  t.median_ms = 0.5 + (value % 1000) / 1000.0;
  t.min_ms = t.median_ms * 0.98;
  t.p10_ms = t.median_ms * 0.99;
  t.p90_ms = t.median_ms * 1.01;
  t.ci_low_ms = t.median_ms * 0.995;
  t.ci_high_ms = t.median_ms * 1.005;
  t.repetitions = 40;
  e.timing = t;
  Speedup s;
  s.baseline = "reference_fp32";
  s.ratio = 1.2 / t.median_ms;
  s.ci_low = s.ratio * 0.99;
  s.ci_high = s.ratio * 1.01;
  s.pairs = 40;
  e.speedup = s;
  KernelResources r;
  r.kernel = c.plan.launches.empty() ? "k" : c.plan.launches[0].kernel;
  r.registers = 32;
  e.resources.push_back(r);
  return e;
}

// Judges in a few hundred microseconds per candidate and writes one journal
// line per judged candidate (its content hash) as it returns.
class FakeEvaluator final : public Evaluator {
 public:
  FakeEvaluator(Problem problem, std::string journal = "", double delay_ms = 0.0,
                DeviceInfo device = FakeDevice())
      : problem_(std::move(problem)), device_(std::move(device)), journal_(std::move(journal)),
        delay_ms_(delay_ms) {}

  std::vector<Evaluation> Evaluate(std::span<const Candidate> candidates,
                                   const std::atomic<bool>* cancel) override {
    std::vector<Evaluation> out;
    for (const Candidate& c : candidates) {
      if (cancel && cancel->load()) {
        Evaluation e;
        e.candidate_id = c.id;
        e.content_hash = c.ContentHash();
        e.status = EvalStatus::kCancelled;
        out.push_back(e);
        continue;
      }
      if (delay_ms_ > 0) std::this_thread::sleep_for(std::chrono::duration<double, std::milli>(delay_ms_));
      out.push_back(FakeVerdict(c, device_));
      ++judged_;
    }
    for (const Evaluation& e : out) {
      if (e.status != EvalStatus::kCancelled) AppendLine(journal_, e.content_hash);
    }
    return out;
  }
  const Problem& problem() const override { return problem_; }
  const DeviceInfo& device() const override { return device_; }
  std::optional<TimingStats> reference_timing() const override { return std::nullopt; }
  std::optional<TimingStats> baseline_timing() const override { return std::nullopt; }
  int judged() const { return judged_; }

 private:
  Problem problem_;
  DeviceInfo device_;
  std::string journal_;
  double delay_ms_;
  std::atomic<int> judged_{0};
};

// A "paid" model on its own thread: the reply is a function of the request.
// Follows the LlmClient contract (callbacks never inline; the observer runs
// before the callback). Once the observer has returned — the exchange is in
// the store — the request's hash is appended to the journal: that is the
// moment the reply counts as paid and kept.
class FakePaidLlm final : public LlmClient {
 public:
  explicit FakePaidLlm(std::string journal = "", double delay_ms = 0.0)
      : journal_(std::move(journal)), delay_ms_(delay_ms), thread_([this] { Loop(); }) {}
  ~FakePaidLlm() override {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      stop_ = true;
    }
    wake_.notify_all();
    thread_.join();
  }

  uint64_t Complete(ChatRequest request, Callback done) override {
    std::lock_guard<std::mutex> lock(mutex_);
    uint64_t id = next_id_++;
    queue_.push_back(Job{id, std::move(request), std::move(done)});
    wake_.notify_one();
    return id;
  }
  void Cancel(uint64_t) override {}
  LlmTotals totals() const override {
    std::lock_guard<std::mutex> lock(mutex_);
    return totals_;
  }
  void SetObserver(ExchangeObserver observer) override {
    std::lock_guard<std::mutex> lock(mutex_);
    observer_ = std::move(observer);
  }
  std::string provider() const override { return "fake"; }
  int64_t calls() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return totals_.requests;
  }

  static std::string ReplyFor(const ChatRequest& request) {
    return "variant " + RequestHash(request).substr(0, 10);
  }

 private:
  struct Job {
    uint64_t id;
    ChatRequest request;
    Callback done;
  };
  void Loop() {
    while (true) {
      Job job;
      ExchangeObserver observer;
      {
        std::unique_lock<std::mutex> lock(mutex_);
        wake_.wait(lock, [&] { return stop_ || !queue_.empty(); });
        if (queue_.empty()) return;
        job = std::move(queue_.front());
        queue_.pop_front();
        observer = observer_;
      }
      if (delay_ms_ > 0) std::this_thread::sleep_for(std::chrono::duration<double, std::milli>(delay_ms_));
      ChatResponse response;
      response.content = ReplyFor(job.request);
      response.input_tokens = 100;
      response.output_tokens = 50;
      response.cost_usd = 0.001;
      response.model = job.request.model;
      {
        std::lock_guard<std::mutex> lock(mutex_);
        ++totals_.requests;
        totals_.input_tokens += 100;
        totals_.output_tokens += 50;
        totals_.cost_usd += 0.001;
      }
      LlmExchange exchange;
      exchange.provider = "fake";
      exchange.request_hash = RequestHash(job.request);
      exchange.request = job.request;
      exchange.response = response;
      exchange.request_id = job.id;
      exchange.started_unix_ms = 1700000000000;
      if (observer) observer(exchange);
      AppendLine(journal_, exchange.request_hash);
      job.done(response);
    }
  }

  std::string journal_;
  double delay_ms_;
  mutable std::mutex mutex_;
  std::condition_variable wake_;
  std::deque<Job> queue_;
  ExchangeObserver observer_;
  LlmTotals totals_;
  uint64_t next_id_ = 1;
  bool stop_ = false;
  std::thread thread_;
};

// A small LLM-driven strategy: each round, `ideas` ideas on the best kernel so
// far, `branches` requests per idea issued concurrently, one candidate per
// reply (the starting kernel with the reply as a comment, so every reply makes
// a distinct kernel), judged in one batch.
class ToyLlmSearch final : public Searcher {
 public:
  ToyLlmSearch(LlmClient& llm, int rounds, int ideas, int branches)
      : llm_(llm), rounds_(rounds), ideas_(ideas), branches_(branches) {}
  std::string name() const override { return "toy"; }

  StatusOr<SearchSummary> Run(SearchContext& context) override {
    SearchSummary summary;
    summary.strategy = name();
    std::string best_id = "start";
    double best_ms = 1e9;
    auto notify = [&](auto&& call) {
      bool stop = false;
      for (SearchObserver* o : context.observers) stop |= call(o) == ObserverAction::kStop;
      return stop;
    };
    int next = 0;
    for (int round = 0; round < rounds_; ++round) {
      if (notify([&](SearchObserver* o) { return o->OnRoundStart(round, {best_id}); })) break;
      std::vector<Idea> ideas;
      for (int i = 0; i < ideas_; ++i) {
        Idea idea;
        idea.id = "r" + std::to_string(round) + "i" + std::to_string(i);
        idea.parent_id = best_id;
        idea.round = round;
        idea.category = kAllIdeaCategories[static_cast<size_t>(i) % kAllIdeaCategories.size()];
        idea.text = "idea " + std::to_string(i) + " for " + best_id;
        idea.generator = "toy";
        ideas.push_back(idea);
        notify([&](SearchObserver* o) { return o->OnIdea(idea); });
      }
      // Every request of the round in flight at once, as the real strategy does.
      std::mutex mutex;
      std::condition_variable done;
      int pending = ideas_ * branches_;
      std::vector<std::string> replies(static_cast<size_t>(pending));
      for (int i = 0; i < ideas_; ++i) {
        for (int b = 0; b < branches_; ++b) {
          ChatRequest request;
          request.model = "toy-model";
          request.messages.push_back({ChatMessage::Role::kUser, ideas[static_cast<size_t>(i)].text +
                                                                     ", implementation " + std::to_string(b)});
          request.tag = ideas[static_cast<size_t>(i)].id + " b" + std::to_string(b);
          size_t slot = static_cast<size_t>(i * branches_ + b);
          llm_.Complete(request, [&, slot](StatusOr<ChatResponse> response) {
            std::lock_guard<std::mutex> lock(mutex);
            replies[slot] = response.ok() ? response->content : "error";
            --pending;
            done.notify_all();
          });
        }
      }
      {
        std::unique_lock<std::mutex> lock(mutex);
        done.wait(lock, [&] { return pending == 0; });
      }
      std::vector<Candidate> batch;
      for (size_t slot = 0; slot < replies.size(); ++slot) {
        Candidate c = context.problem->start.ToCandidate("c" + std::to_string(next++), "llm:toy-model");
        c.source += "\n// " + replies[slot] + "\n";
        c.provenance.parent_id = best_id;
        c.provenance.idea_id = ideas[slot / static_cast<size_t>(branches_)].id;
        c.provenance.round = round;
        batch.push_back(std::move(c));
      }
      std::vector<Evaluation> results = context.evaluator->Evaluate(batch, context.cancel);
      for (size_t k = 0; k < batch.size(); ++k) {
        ++summary.candidates;
        ++summary.by_status[std::string(ToString(results[k].status))];
        notify([&](SearchObserver* o) { return o->OnCandidateEvaluated(batch[k], results[k]); });
        if (results[k].ok() && results[k].timing && results[k].timing->median_ms < best_ms) {
          best_ms = results[k].timing->median_ms;
          best_id = batch[k].id;
          summary.best = HistoryEntry{batch[k], results[k]};
        }
      }
      notify([&](SearchObserver* o) { return o->OnRoundEnd(round); });
      summary.rounds = round + 1;
    }
    summary.termination = TerminationReason::kBudgetRounds;
    return summary;
  }

 private:
  LlmClient& llm_;
  int rounds_, ideas_, branches_;
};

// A run whose best kernel is correct (a fake GPU verdict: there is no GPU
// here), recorded in `db`; its source ends with `marker`.
inline void RecordACorrectKernel(const std::string& db, const std::string& marker) {
  auto store = Store::Open(db);
  ASSERT_TRUE(store.ok()) << store.status().ToString();
  Problem problem = RowSoftmaxProblem(64, 256);
  NewRun spec;
  spec.problem = &problem;
  spec.strategy = "tune";
  spec.device = FakeDevice();
  auto run = (*store)->CreateRun(spec);
  ASSERT_TRUE(run.ok()) << run.status().ToString();
  Candidate candidate = problem.start.ToCandidate("c0", "start");
  candidate.source += marker;
  Evaluation verdict;
  verdict.candidate_id = candidate.id;
  verdict.content_hash = candidate.ContentHash();
  verdict.device = spec.device;
  verdict.status = EvalStatus::kOk;
  TimingStats timing;
  timing.median_ms = 0.25;
  verdict.timing = timing;
  ASSERT_TRUE((*store)->RecordEvaluation(run->id, candidate, verdict).ok());
  ASSERT_TRUE((*store)->RecordBest(run->id, candidate.id).ok());
  ASSERT_TRUE((*store)->FinishRun(run->id, RunEnd{}).ok());
}

}  // namespace ksearch::testing

#endif  // KSEARCH_TESTS_STORE_STORE_TEST_UTIL_H_
