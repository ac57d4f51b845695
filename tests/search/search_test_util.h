// Helpers for the search tests: a fake evaluator with scripted verdicts, a
// row-softmax problem with a tunable template, kernel replies for the mock
// LLM, and an observer that counts what each round did.
#ifndef KSEARCH_TESTS_SEARCH_SEARCH_TEST_UTIL_H_
#define KSEARCH_TESTS_SEARCH_SEARCH_TEST_UTIL_H_

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "ksearch/ksearch.h"
#include "test_util.h"

namespace ksearch::testing {

// An Evaluator whose verdicts come from a function, for tests that need
// timings (selection, targets) without a GPU. Records what it judged.
class FakeEvaluator final : public Evaluator {
 public:
  using Judge = std::function<Evaluation(const Candidate&)>;
  FakeEvaluator(Problem problem, Judge judge, double seconds_per_call = 0.0)
      : problem_(std::move(problem)), judge_(std::move(judge)), delay_(seconds_per_call) {
    device_.name = "fake GPU";
    device_.cc_major = 9;
  }

  std::vector<Evaluation> Evaluate(std::span<const Candidate> candidates,
                                   const std::atomic<bool>* cancel) override {
    std::lock_guard<std::mutex> lock(mutex_);
    ++calls_;
    max_batch_ = std::max(max_batch_, static_cast<int>(candidates.size()));
    if (delay_ > 0) std::this_thread::sleep_for(std::chrono::duration<double>(delay_));
    std::vector<Evaluation> out;
    for (const Candidate& c : candidates) {
      Evaluation e;
      if (cancel && cancel->load()) {
        e.status = EvalStatus::kCancelled;
      } else {
        e = judge_(c);
        judged_.push_back(c);
      }
      e.candidate_id = c.id;
      e.content_hash = c.ContentHash();
      out.push_back(std::move(e));
    }
    return out;
  }
  const Problem& problem() const override { return problem_; }
  const DeviceInfo& device() const override { return device_; }
  std::optional<TimingStats> reference_timing() const override { return std::nullopt; }
  std::optional<TimingStats> baseline_timing() const override { return std::nullopt; }
  // Reports a broken judge (health() not OK) after `calls` Evaluate calls.
  void BreakAfter(int calls, Status why) {
    std::lock_guard<std::mutex> lock(mutex_);
    break_after_ = calls;
    broken_ = std::move(why);
  }
  Status health() const override {
    std::lock_guard<std::mutex> lock(mutex_);
    return break_after_ >= 0 && calls_ >= break_after_ ? broken_ : Status::Ok();
  }

  std::vector<Candidate> judged() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return judged_;
  }
  int calls() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return calls_;
  }
  int max_batch() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return max_batch_;
  }

 private:
  Problem problem_;
  Judge judge_;
  double delay_;
  DeviceInfo device_;
  mutable std::mutex mutex_;
  std::vector<Candidate> judged_;
  int calls_ = 0;
  int break_after_ = -1;
  Status broken_;
  int max_batch_ = 0;
};

// A correct, timed verdict; the baseline runs in 1 ms.
inline Evaluation Timed(double ms) {
  Evaluation e;
  e.status = EvalStatus::kOk;
  e.message = "correct (fake)";
  e.timing = TimingStats{ms, ms, ms, ms, ms, ms, 10};
  e.speedup = Speedup{"fake_baseline", 1.0 / ms, 1.0 / ms, 1.0 / ms, 10};
  return e;
}

inline Evaluation Failed(EvalStatus status, std::string message) {
  Evaluation e;
  e.status = status;
  e.message = std::move(message);
  return e;
}

// The result of shape case `index` of `problem` (its name, dims, timing and
// weight), with `status`; a timed case ran in `ms`.
inline CaseResult FakeCase(const Problem& problem, size_t index, EvalStatus status, double ms) {
  CaseResult r;
  r.name = problem.shapes[index].name;
  r.dims = problem.CaseDims(index);
  r.timed = problem.shapes[index].timed;
  r.weight = r.timed ? problem.shapes[index].weight : 0.0;
  r.status = status;
  r.message = status == EvalStatus::kOk ? "correct (fake)" : "wrong (fake)";
  if (r.timed) {
    r.median_ms = r.min_ms = r.p10_ms = r.p90_ms = r.ci_low_ms = r.ci_high_ms = ms;
    r.repetitions = 10;
  }
  return r;
}

// The row softmax of test_util.h, with a template "rows" over BLOCK × VEC
// under two constraints. The template's source differs from the starting
// kernel's by a comment, so that the start is not one of its points.
inline Problem TemplatedRowSoftmax() {
  Problem problem = RowSoftmaxProblem(64, 1024);
  TemplateSpec t;
  t.name = "rows";
  t.kernel = problem.start;
  t.kernel.source = "// template rows\n" + t.kernel.source;
  t.kernel.plan.params = {{"BLOCK", 128}, {"VEC", 1}};
  t.kernel.plan.launches[0].block = {"BLOCK", "1", "1"};
  t.space = {{"BLOCK", {32, 64, 128, 256, 512, 1024}}, {"VEC", {1, 2, 4, 8}}};
  t.constraints = {"BLOCK * VEC <= 1024", "BLOCK >= 64"};
  problem.templates.push_back(t);
  return problem;
}

// A reply the LLM brancher accepts: the row softmax with a marker comment
// (distinct markers make distinct kernels).
inline std::string KernelReply(const std::string& marker) {
  return "Here is the kernel.\n\n```cuda\n// " + marker + "\n" + RowSoftmaxSource("float") +
         "```\n\n```json\n" + kRowSoftmaxPlan + "\n```\n";
}

inline std::string BrokenKernelReply(const std::string& marker) {
  return "```cuda\n// " + marker +
         "\nextern \"C\" __global__ void row_softmax(const float* x, float* y, int cols) {\n"
         "  this_does_not_exist(x, y);\n}\n```\n\n```json\n" +
         kRowSoftmaxPlan + "\n```\n";
}

// An idea list in the format ideas.md asks for: `count` ideas, numbered from
// `first`, one per category in turn.
inline std::string IdeasReply(int count, int first = 0) {
  std::string out = "```json\n[";
  for (int j = 0; j < count; ++j) {
    IdeaCategory c = kAllIdeaCategories[static_cast<size_t>(first + j) % kAllIdeaCategories.size()];
    out += std::string(j ? ",\n " : "") + "{\"category\": \"" + std::string(ToString(c)) +
           "\", \"idea\": \"Scripted idea " + std::to_string(first + j) + ".\"}";
  }
  return out + "]\n```\n";
}

// Counts per round what the searcher did.
class RoundCounter final : public SearchObserver {
 public:
  ObserverAction OnRoundStart(int round, const std::vector<std::string>& seeds) override {
    seeds_[round] = seeds;
    return ObserverAction::kContinue;
  }
  ObserverAction OnIdea(const Idea& idea) override {
    ++ideas_[idea.round];
    return ObserverAction::kContinue;
  }
  ObserverAction OnCandidateEvaluated(const Candidate& c, const Evaluation&) override {
    ++candidates_[c.provenance.round];
    return ObserverAction::kContinue;
  }
  ObserverAction OnNewBest(const Candidate& c, const Evaluation&) override {
    bests_.push_back(c.id);
    return ObserverAction::kContinue;
  }
  ObserverAction OnRoundEnd(int round) override {
    ends_.push_back(round);
    return ObserverAction::kContinue;
  }

  std::map<int, std::vector<std::string>> seeds_;
  std::map<int, int> ideas_;
  std::map<int, int> candidates_;
  std::vector<std::string> bests_;
  std::vector<int> ends_;
};

// A search of `problem` judged by `evaluator` with these generators (either
// may be null) and observers.
inline SearchContext Context(const Problem& problem, Evaluator& evaluator, IdeaGenerator* ideas,
                             Brancher* brancher, std::vector<SearchObserver*> observers = {}) {
  SearchContext context;
  context.problem = &problem;
  context.evaluator = &evaluator;
  context.ideas = ideas;
  context.brancher = brancher;
  context.observers = std::move(observers);
  return context;
}
inline SearchContext Context(const Problem& problem, Evaluator& evaluator, IdeaGenerator& ideas,
                             Brancher& brancher, std::vector<SearchObserver*> observers = {}) {
  return Context(problem, evaluator, &ideas, &brancher, std::move(observers));
}

// An OpenAI-format client of the mock server (or any server) at `base_url`
// for model "mock": `attempts` per request with millisecond backoffs, costs
// from `prices`.
inline std::unique_ptr<HttpLlmClient> MockClient(const std::string& base_url, int attempts = 1,
                                                 PriceTable prices = {}) {
  HttpLlmClient::Options options;
  options.base_url = base_url;
  options.default_model = "mock";
  options.retry.max_attempts = attempts;
  options.retry.initial_backoff_seconds = 0.001;
  options.retry.max_backoff_seconds = 0.005;
  options.prices = std::move(prices);
  auto client = HttpLlmClient::Create(options);
  if (!client.ok()) {
    ADD_FAILURE() << client.status().ToString();
    return nullptr;
  }
  return std::move(*client);
}

inline std::unique_ptr<Evaluator> CompileOnlyEvaluator(const Problem& problem) {
  EvaluatorOptions options;
  options.compile_only = true;
  options.arch = "sm_90";
  options.compile_cache_dir = "off";
  auto e = CreateLocalEvaluator(problem, options);
  if (!e.ok()) return nullptr;
  return std::move(*e);
}

}  // namespace ksearch::testing

#endif  // KSEARCH_TESTS_SEARCH_SEARCH_TEST_UTIL_H_
