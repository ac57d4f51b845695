// Recording and resuming runs: RunRecorder, CachingEvaluator,
// ResumingLlmClient and RunSession (store.h).
#include <algorithm>
#include <atomic>
#include <mutex>
#include <unordered_map>
#include <utility>

#include "ksearch/caching_evaluator.h"
#include "ksearch/replay_llm_client.h"
#include "ksearch/resuming_llm_client.h"
#include "ksearch/run_recorder.h"
#include "ksearch/run_session.h"
#include "ksearch/store.h"
#include "store/records.h"

namespace ksearch {
namespace internal {

// What a session learns from the wrappers it handed out. Shared, because the
// caller owns the wrappers and may destroy them before or after the session.
struct SessionCounters {
  std::atomic<int64_t> reused_evaluations{0};
  std::atomic<int64_t> reused_replies{0};
  mutable std::mutex mutex;
  Status first_error;

  void Fail(const Status& status) {
    std::lock_guard<std::mutex> lock(mutex);
    if (first_error.ok()) first_error = status;
  }
  Status error() const {
    std::lock_guard<std::mutex> lock(mutex);
    return first_error;
  }
};

}  // namespace internal

// ---------------------------------------------------------------------------
// RunRecorder

RunRecorder::RunRecorder(Store& store, int64_t run_id, bool stop_on_error)
    : store_(store), run_id_(run_id), stop_on_error_(stop_on_error) {}

ObserverAction RunRecorder::Check(Status status) {
  if (status.ok()) return ObserverAction::kContinue;
  std::lock_guard<std::mutex> lock(mutex_);
  if (status_.ok()) status_ = status.WithContext("recording run " + std::to_string(run_id_));
  return stop_on_error_ ? ObserverAction::kStop : ObserverAction::kContinue;
}

ObserverAction RunRecorder::OnRoundStart(int round, const std::vector<std::string>& seed_ids) {
  return Check(store_.RecordRoundStart(run_id_, round, seed_ids));
}

ObserverAction RunRecorder::OnIdea(const Idea& idea) { return Check(store_.RecordIdea(run_id_, idea)); }

ObserverAction RunRecorder::OnCandidateEvaluated(const Candidate& candidate,
                                                 const Evaluation& evaluation) {
  // When a CachingEvaluator already wrote this pair, the upsert changes
  // nothing and SQLite commits without writing a page.
  return Check(store_.RecordEvaluation(run_id_, candidate, evaluation));
}

ObserverAction RunRecorder::OnNewBest(const Candidate& candidate, const Evaluation&) {
  return Check(store_.RecordBest(run_id_, candidate.id));
}

ObserverAction RunRecorder::OnEvaluationRevised(const Candidate& candidate,
                                                const Evaluation& evaluation) {
  return Check(store_.RecordEvaluation(run_id_, candidate, evaluation));
}

ObserverAction RunRecorder::OnRoundEnd(int round) { return Check(store_.RecordRoundEnd(run_id_, round)); }

Status RunRecorder::status() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return status_;
}

// ---------------------------------------------------------------------------
// CachingEvaluator

struct CachingEvaluator::State {
  State(Evaluator& inner_evaluator, Store& s) : inner(inner_evaluator), store(s) {}
  std::unique_ptr<Evaluator> owned;  // `inner`, when the wrapper owns it
  Evaluator& inner;
  Store& store;
  int64_t run_id = 0;
  Options options;
  std::unordered_map<std::string, Evaluation> by_hash;  // judged in this run
  std::atomic<int64_t> reused{0};
  std::atomic<int64_t> evaluated{0};
  mutable std::mutex mutex;
  Status status;
  std::shared_ptr<internal::SessionCounters> counters;

  void Fail(const Status& s) {
    {
      std::lock_guard<std::mutex> lock(mutex);
      if (status.ok()) status = s;
    }
    if (counters) counters->Fail(s);
  }
};

namespace {

// What makes figures comparable is the GPU, not the way to it: a queue
// evaluator names itself "any sm_90 worker of redis://HOST:PORT/DB", and the
// same fleet is reached through other spellings of its URL (localhost or
// 127.0.0.1, with or without the default port).
std::string DeviceIdentity(const std::string& name) {
  size_t of = name.find(" worker of ");
  if (name.starts_with("any ") && of != std::string::npos) return name.substr(0, of) + " worker";
  return name;
}

// Figures measured on `device` are comparable with the run's: the same GPU
// model and arch. Errors: kFailedPrecondition naming both.
Status CheckRunDevice(const RunInfo& run, const DeviceInfo& device) {
  std::string arch = device.cc_major > 0 ? device.Arch() : "";
  if (!run.device_name.empty() &&
      (DeviceIdentity(device.name) != DeviceIdentity(run.device_name) ||
       (!run.device_arch.empty() && arch != run.device_arch))) {
    return FailedPreconditionError(
        "run " + std::to_string(run.id) + " was measured on " + run.device_name + " (" +
        run.device_arch + "), but this evaluator runs on " + device.name + " (" + arch +
        "); its figures would not be comparable: resume on the same GPU model");
  }
  return Status::Ok();
}

// The evaluator of RunSession::WrapDeferredEvaluator: made on the first
// Evaluate call; until then it stands for the run's recorded device.
class DeferredEvaluator final : public Evaluator {
 public:
  DeferredEvaluator(Problem problem, RunInfo run, DeviceInfo recorded,
                    RunSession::EvaluatorFactory make,
                    std::function<void(const Status&)> on_unavailable)
      : problem_(std::move(problem)),
        run_(std::move(run)),
        recorded_(std::move(recorded)),
        make_(std::move(make)),
        on_unavailable_(std::move(on_unavailable)) {}

  std::vector<Evaluation> Evaluate(std::span<const Candidate> candidates,
                                   const std::atomic<bool>* cancel) override {
    if (!inner_ && unavailable_.ok()) Make();
    if (inner_) return inner_->Evaluate(candidates, cancel);
    std::vector<Evaluation> out(candidates.size());
    for (size_t i = 0; i < candidates.size(); ++i) {
      out[i].candidate_id = candidates[i].id;
      out[i].content_hash = candidates[i].ContentHash();
      out[i].status = EvalStatus::kCancelled;
      out[i].message = "not judged: " + unavailable_.message();
      out[i].device = recorded_;
    }
    return out;
  }
  const Problem& problem() const override { return problem_; }
  const DeviceInfo& device() const override { return inner_ ? inner_->device() : recorded_; }
  std::optional<TimingStats> reference_timing() const override {
    return inner_ ? inner_->reference_timing() : std::nullopt;
  }
  std::optional<TimingStats> baseline_timing() const override {
    return inner_ ? inner_->baseline_timing() : std::nullopt;
  }
  Status health() const override { return inner_ ? inner_->health() : Status::Ok(); }

 private:
  void Make() {
    StatusOr<std::unique_ptr<Evaluator>> made = make_();
    Status why = made.ok() ? CheckRunDevice(run_, (*made)->device()) : made.status();
    if (why.ok()) {
      inner_ = std::move(*made);
      return;
    }
    unavailable_ = why;
    if (on_unavailable_) on_unavailable_(unavailable_);
  }

  const Problem problem_;
  const RunInfo run_;
  const DeviceInfo recorded_;
  RunSession::EvaluatorFactory make_;
  std::function<void(const Status&)> on_unavailable_;
  // Evaluate is called one at a time (Evaluator's contract); device() and
  // the timings are read by that same caller.
  std::unique_ptr<Evaluator> inner_;
  Status unavailable_;
};

}  // namespace

StatusOr<std::unique_ptr<CachingEvaluator>> CachingEvaluator::Create(
    std::unique_ptr<Evaluator> inner, Store& store, const RunInfo& run,
    const std::vector<HistoryEntry>& known, const Options& options) {
  KSEARCH_ASSIGN_OR_RETURN(std::unique_ptr<CachingEvaluator> made,
                           Create(*inner, store, run, known, options));
  made->state_->owned = std::move(inner);
  return made;
}

StatusOr<std::unique_ptr<CachingEvaluator>> CachingEvaluator::Create(
    Evaluator& inner, Store& store, const RunInfo& run, const std::vector<HistoryEntry>& known,
    const Options& options) {
  const std::string fingerprint = inner.problem().Fingerprint();
  if (!run.problem_fingerprint.empty() && fingerprint != run.problem_fingerprint) {
    return FailedPreconditionError(
        "run " + std::to_string(run.id) + " searched problem '" + run.problem_name +
        "' (fingerprint " + run.problem_fingerprint.substr(0, 12) +
        "…), but the evaluator judges a different problem (fingerprint " +
        fingerprint.substr(0, 12) + "…: other dims, tensors, tolerance or reference?)");
  }
  KSEARCH_RETURN_IF_ERROR(CheckRunDevice(run, inner.device()));
  auto state = std::make_unique<State>(inner, store);
  state->run_id = run.id;
  state->options = options;
  for (const HistoryEntry& entry : known) {
    if (entry.evaluation.status == EvalStatus::kCancelled) continue;
    state->by_hash[entry.candidate.ContentHash()] = entry.evaluation;
  }
  return std::unique_ptr<CachingEvaluator>(new CachingEvaluator(std::move(state)));
}

CachingEvaluator::CachingEvaluator(std::unique_ptr<State> state) : state_(std::move(state)) {}
CachingEvaluator::~CachingEvaluator() = default;

std::vector<Evaluation> CachingEvaluator::Evaluate(std::span<const Candidate> candidates,
                                                   const std::atomic<bool>* cancel) {
  State& s = *state_;
  std::vector<Evaluation> out(candidates.size());
  std::vector<std::string> hashes(candidates.size());
  std::vector<size_t> todo;
  for (size_t i = 0; i < candidates.size(); ++i) {
    hashes[i] = candidates[i].ContentHash();
    auto found = s.by_hash.find(hashes[i]);
    if (found == s.by_hash.end()) {
      todo.push_back(i);
      continue;
    }
    out[i] = found->second;
    out[i].candidate_id = candidates[i].id;
    out[i].content_hash = hashes[i];
    ++s.reused;
    if (s.counters) ++s.counters->reused_evaluations;
  }
  const size_t chunk = s.options.chunk_size > 0 ? static_cast<size_t>(s.options.chunk_size)
                                                : std::max<size_t>(todo.size(), 1);
  for (size_t start = 0; start < todo.size(); start += chunk) {
    const size_t end = std::min(todo.size(), start + chunk);
    if (cancel && cancel->load()) {
      for (size_t k = start; k < todo.size(); ++k) {
        Evaluation& e = out[todo[k]];
        e.candidate_id = candidates[todo[k]].id;
        e.content_hash = hashes[todo[k]];
        e.status = EvalStatus::kCancelled;
        e.message = "the search stopped before this candidate was judged";
        e.device = s.inner.device();
      }
      break;
    }
    std::vector<Candidate> part;
    part.reserve(end - start);
    for (size_t k = start; k < end; ++k) part.push_back(candidates[todo[k]]);
    std::vector<Evaluation> results = s.inner.Evaluate(part, cancel);
    for (size_t k = start; k < end; ++k) {
      const size_t i = todo[k];
      Evaluation& e = out[i];
      if (k - start < results.size()) {
        e = std::move(results[k - start]);
      } else {
        e.status = EvalStatus::kCancelled;
        e.message = "the evaluator returned no result for this candidate";
      }
      if (e.status == EvalStatus::kCancelled) continue;
      ++s.evaluated;
      Candidate candidate = candidates[i];
      if (candidate.id.empty()) candidate.id = "h" + hashes[i].substr(0, 12);
      // Written now, before the searcher sees it: what finished survives a
      // kill that comes before the observers run.
      Status written = s.store.RecordEvaluation(s.run_id, candidate, e);
      if (!written.ok()) s.Fail(written.WithContext("recording an evaluation of run " + std::to_string(s.run_id)));
      s.by_hash[hashes[i]] = e;
    }
  }
  return out;
}

const Problem& CachingEvaluator::problem() const { return state_->inner.problem(); }
const DeviceInfo& CachingEvaluator::device() const { return state_->inner.device(); }
std::optional<TimingStats> CachingEvaluator::reference_timing() const {
  return state_->inner.reference_timing();
}
std::optional<TimingStats> CachingEvaluator::baseline_timing() const {
  return state_->inner.baseline_timing();
}
int64_t CachingEvaluator::reused() const { return state_->reused.load(); }
int64_t CachingEvaluator::evaluated() const { return state_->evaluated.load(); }
Status CachingEvaluator::status() const {
  std::lock_guard<std::mutex> lock(state_->mutex);
  return state_->status;
}

// ---------------------------------------------------------------------------
// ResumingLlmClient

struct ResumingLlmClient::State : std::enable_shared_from_this<ResumingLlmClient::State> {
  State(LlmClient& live_client, Store& s) : live(live_client), store(s) {}
  LlmClient& live;
  Store& store;
  int64_t run_id = 0;
  int session = 1;
  std::unique_ptr<ReplayLlmClient> replay;
  std::shared_ptr<internal::SessionCounters> counters;
  std::atomic<int64_t> replayed{0};
  std::atomic<int64_t> forwarded{0};

  mutable std::mutex mutex;
  std::unordered_map<std::string, int> available;  // request hash → stored replies not yet served
  struct Route {
    bool replayed = false;
    uint64_t inner_id = 0;
  };
  std::unordered_map<uint64_t, Route> routes;  // requests in flight
  uint64_t next_id = 1;
  ExchangeObserver observer;
  Status status;

  // On the live client's I/O thread, before the request's callback: the
  // reply is in the store before anyone can act on it.
  void OnLiveExchange(const LlmExchange& exchange) {
    Status written = store.RecordExchange(run_id, session, exchange);
    ExchangeObserver user;
    {
      std::lock_guard<std::mutex> lock(mutex);
      if (!written.ok() && status.ok()) {
        status = written.WithContext("recording an LLM exchange of run " + std::to_string(run_id));
      }
      user = observer;
    }
    if (!written.ok() && counters) counters->Fail(written);
    if (user) user(exchange);
  }
};

StatusOr<std::unique_ptr<ResumingLlmClient>> ResumingLlmClient::Create(
    LlmClient& live, Store& store, int64_t run_id, int session, std::vector<LlmExchange> recorded) {
  auto state = std::make_shared<State>(live, store);
  state->run_id = run_id;
  state->session = session;
  std::vector<LlmExchange> replies;
  uint64_t order = 0;
  for (LlmExchange& exchange : recorded) {
    // Failures are not worth replaying: the resumed search asks again.
    if (!exchange.response.ok()) continue;
    // Renumbered in the given (replay) order: ids of different sessions come
    // from different clients and do not compare.
    exchange.request_id = ++order;
    ++state->available[RequestHash(exchange.request)];
    replies.push_back(std::move(exchange));
  }
  KSEARCH_ASSIGN_OR_RETURN(state->replay, ReplayLlmClient::Create(std::move(replies)));
  std::weak_ptr<State> weak = state;
  live.SetObserver([weak](const LlmExchange& exchange) {
    if (auto s = weak.lock()) s->OnLiveExchange(exchange);
  });
  return std::unique_ptr<ResumingLlmClient>(new ResumingLlmClient(std::move(state)));
}

ResumingLlmClient::ResumingLlmClient(std::shared_ptr<State> state) : state_(std::move(state)) {}

ResumingLlmClient::~ResumingLlmClient() {
  state_->live.SetObserver(nullptr);
  // Delivers what the replay client still holds and joins its thread.
  state_->replay.reset();
}

uint64_t ResumingLlmClient::Complete(ChatRequest request, Callback done) {
  State& s = *state_;
  const std::string hash = RequestHash(request);
  uint64_t id = 0;
  bool from_store = false;
  {
    std::lock_guard<std::mutex> lock(s.mutex);
    id = s.next_id++;
    if (auto it = s.available.find(hash); it != s.available.end() && it->second > 0) {
      --it->second;
      from_store = true;
    }
    s.routes[id] = State::Route{from_store, 0};
  }
  std::weak_ptr<State> weak = state_;
  Callback finish = [weak, id, done = std::move(done)](StatusOr<ChatResponse> response) {
    if (auto st = weak.lock()) {
      std::lock_guard<std::mutex> guard(st->mutex);
      st->routes.erase(id);
    }
    done(std::move(response));
  };
  // The inner call is made without the lock: a client may hold its own lock
  // while it delivers callbacks, and `finish` takes ours.
  uint64_t inner_id = 0;
  if (from_store) {
    ++s.replayed;
    if (s.counters) ++s.counters->reused_replies;
    inner_id = s.replay->Complete(std::move(request), std::move(finish));
  } else {
    ++s.forwarded;
    inner_id = s.live.Complete(std::move(request), std::move(finish));
  }
  std::lock_guard<std::mutex> lock(s.mutex);
  // Absent when the reply already came back.
  if (auto it = s.routes.find(id); it != s.routes.end()) it->second.inner_id = inner_id;
  return id;
}

void ResumingLlmClient::Cancel(uint64_t request_id) {
  State& s = *state_;
  State::Route route;
  {
    std::lock_guard<std::mutex> lock(s.mutex);
    auto it = s.routes.find(request_id);
    if (it == s.routes.end()) return;
    route = it->second;
  }
  if (route.replayed) {
    s.replay->Cancel(route.inner_id);
  } else {
    s.live.Cancel(route.inner_id);
  }
}

LlmTotals ResumingLlmClient::totals() const {
  LlmTotals totals = state_->replay->totals();
  totals += state_->live.totals();
  return totals;
}

void ResumingLlmClient::SetObserver(ExchangeObserver observer) {
  std::lock_guard<std::mutex> lock(state_->mutex);
  state_->observer = std::move(observer);
}

std::string ResumingLlmClient::provider() const { return state_->live.provider(); }
std::optional<double> ResumingLlmClient::EstimateCostUsd(std::string_view model,
                                                         int64_t input_tokens,
                                                         int64_t output_tokens) const {
  return state_->live.EstimateCostUsd(model, input_tokens, output_tokens);
}
int64_t ResumingLlmClient::replayed() const { return state_->replayed.load(); }
int64_t ResumingLlmClient::forwarded() const { return state_->forwarded.load(); }
Status ResumingLlmClient::status() const {
  std::lock_guard<std::mutex> lock(state_->mutex);
  return state_->status;
}

// ---------------------------------------------------------------------------
// RunSession

RunSession::RunSession(Store& store, RunInfo run, RunHistory history, bool resumed,
                       SessionOptions options)
    : store_(store),
      run_(std::move(run)),
      history_(std::move(history)),
      resumed_(resumed),
      options_(options),
      recorder_(store, run_.id, options.stop_on_store_error),
      counters_(std::make_shared<internal::SessionCounters>()) {}

RunSession::~RunSession() = default;

StatusOr<Problem> RunSession::problem() const {
  auto problem = Problem::FromJson(run_.problem_json, "", "run " + std::to_string(run_.id) + " problem");
  if (!problem.ok()) {
    return DataLossError(store_.path() + ": the problem stored with run " + std::to_string(run_.id) +
                         " does not load: " + problem.status().message());
  }
  return problem;
}

StatusOr<std::unique_ptr<Evaluator>> RunSession::WrapEvaluator(Evaluator& inner) {
  CachingEvaluator::Options options;
  options.chunk_size = options_.evaluation_chunk_size;
  KSEARCH_ASSIGN_OR_RETURN(auto evaluator,
                           CachingEvaluator::Create(inner, store_, run_, history_.entries, options));
  evaluator->state_->counters = counters_;
  return std::unique_ptr<Evaluator>(std::move(evaluator));
}

StatusOr<std::unique_ptr<Evaluator>> RunSession::WrapDeferredEvaluator(
    EvaluatorFactory make, std::function<void(const Status&)> on_unavailable) {
  // The device of the run's stored evaluations: every figure prompts quote
  // (SMs, waves, bandwidth) comes from it.
  const DeviceInfo* recorded = nullptr;
  for (const HistoryEntry& e : history_.entries) {
    if (!e.evaluation.device.name.empty()) {
      recorded = &e.evaluation.device;
      break;
    }
  }
  if (recorded == nullptr) {
    return FailedPreconditionError(
        "run " + std::to_string(run_.id) +
        " has judged no candidate yet, so no device stands for the one it is measured on: "
        "resume it where it can be judged");
  }
  KSEARCH_ASSIGN_OR_RETURN(Problem problem, this->problem());
  auto deferred = std::make_unique<DeferredEvaluator>(std::move(problem), run_, *recorded,
                                                      std::move(make), std::move(on_unavailable));
  CachingEvaluator::Options options;
  options.chunk_size = options_.evaluation_chunk_size;
  KSEARCH_ASSIGN_OR_RETURN(auto evaluator, CachingEvaluator::Create(std::move(deferred), store_, run_,
                                                                    history_.entries, options));
  evaluator->state_->counters = counters_;
  return std::unique_ptr<Evaluator>(std::move(evaluator));
}

StatusOr<std::unique_ptr<LlmClient>> RunSession::WrapLlmClient(LlmClient& live) {
  KSEARCH_ASSIGN_OR_RETURN(auto client, ResumingLlmClient::Create(live, store_, run_.id, run_.sessions,
                                                                  history_.exchanges));
  client->state_->counters = counters_;
  return std::unique_ptr<LlmClient>(std::move(client));
}

int64_t RunSession::reused_evaluations() const { return counters_->reused_evaluations.load(); }
int64_t RunSession::reused_replies() const { return counters_->reused_replies.load(); }

Status RunSession::status() const {
  Status recorded = recorder_.status();
  if (!recorded.ok()) return recorded;
  return counters_->error();
}

Status RunSession::Finish(const StatusOr<SearchSummary>& summary) {
  RunEnd end = RunEnd::FromSummary(summary);
  // A strategy writes an idea's outcome once its branches are judged, after
  // OnIdea recorded the idea: the summary's tree has the outcomes.
  if (summary.ok()) {
    for (const Idea& idea : summary->history.ideas) {
      if (!idea.outcome.empty()) recorder_.OnIdea(idea);  // a write error stays in status()
    }
  }
  Status failure = status();
  if (!failure.ok()) {
    // The recorder stopped the search: it failed, whatever the summary says.
    end.status = RunStatus::kFailed;
    end.termination = ToString(TerminationReason::kFailed);
    end.message = failure.ToString();
  }
  Status finished = store_.FinishRun(run_.id, end);
  if (!failure.ok()) return failure;
  if (finished.ok()) {
    run_.status = end.status;
    run_.termination = end.termination;
    run_.message = end.message;
  }
  return finished;
}

StatusOr<std::unique_ptr<RunSession>> BeginRun(Store& store, const Problem& problem,
                                               const RunSettings& settings,
                                               const SessionOptions& options) {
  NewRun spec;
  spec.problem = &problem;
  spec.strategy = settings.strategy;
  spec.options_json = settings.options_json;
  spec.seed = settings.seed;
  spec.device = settings.device;
  KSEARCH_ASSIGN_OR_RETURN(RunInfo run, store.CreateRun(spec));
  RunHistory history;
  history.run = run;
  return std::unique_ptr<RunSession>(
      new RunSession(store, std::move(run), std::move(history), false, options));
}

StatusOr<std::unique_ptr<RunSession>> ResumeRun(Store& store, int64_t run_id,
                                                const SessionOptions& options) {
  KSEARCH_RETURN_IF_ERROR(
      store.ReopenRun(run_id, options.reopen_completed, options.take_over_running));
  KSEARCH_ASSIGN_OR_RETURN(RunHistory history, store.LoadRunHistory(run_id, true));
  RunInfo reopened = history.run;
  return std::unique_ptr<RunSession>(
      new RunSession(store, std::move(reopened), std::move(history), true, options));
}

}  // namespace ksearch
