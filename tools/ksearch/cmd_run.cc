#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <iostream>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <optional>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "cli_util.h"
#include "commands.h"
#include "json_out.h"
#include "ksearch/evaluator.h"
#include "ksearch/http_llm_client.h"
#include "ksearch/kernel_cache.h"
#include "ksearch/llm_recording.h"
#include "ksearch/mock_llm_server.h"
#include "ksearch/price_table.h"
#include "ksearch/queue.h"
#include "ksearch/replay_llm_client.h"
#include "ksearch/run_report.h"
#include "ksearch/run_session.h"
#include "ksearch/store.h"
#include "ksearch/strategies.h"
#include "ksearch/worker_pool.h"

namespace ksearch::cli {

// `--llm mock`: a loopback server scripted from the problem itself, so the
// whole LLM path (prompts, concurrency, parsing, judging) runs without a
// model. Idea replies name "mock variants" (the starting kernel and points of
// the problem's templates); branch replies return the variant the idea names,
// shifted by the branch number so that branches differ.
Status ScriptMockFromProblem(MockLlmServer& mock, const Problem& problem, int rounds, int branches) {
  std::vector<Candidate> variants = {problem.start.ToCandidate("", "start")};
  for (const TemplateSpec& t : problem.templates) {
    variants.push_back(t.kernel.ToCandidate("", "template"));
    for (const auto& [param, values] : t.space) {
      for (int64_t v : values) {
        Candidate c = t.kernel.ToCandidate("", "template");
        c.plan.SetParam(param, v);
        if (variants.size() < 24 && c.plan != t.kernel.plan) variants.push_back(std::move(c));
      }
    }
  }
  auto reply = [&](size_t v) {
    const Candidate& c = variants[v % variants.size()];
    return "Mock implementation of variant " + std::to_string(v % variants.size()) +
           ".\n\n```cuda\n" + c.source + (c.source.ends_with("\n") ? "" : "\n") +
           "```\n\n```json\n" + c.plan.ToJson() + "\n```\n";
  };
  const size_t n = variants.size();
  // One set of ideas per round (16 with --rounds 0); rounds past the scripted
  // ones share the last rule.
  constexpr int kScriptedRounds = 16;
  int scripted = rounds > 0 ? std::min(rounds, 64) : kScriptedRounds;
  for (int r = 0; r <= scripted; ++r) {
    boost::json::array ideas;
    for (size_t j = 0; j < kAllIdeaCategories.size(); ++j) {
      size_t v = (static_cast<size_t>(r) * kAllIdeaCategories.size() + j + 1) % n;
      ideas.push_back({{"category", ToString(kAllIdeaCategories[j])},
                       {"idea", "Try the kernel of mock variant " + std::to_string(v) + "."}});
    }
    MockRule rule;
    rule.regex = r < scripted ? "# Round " + std::to_string(r) + ":" : "# Round \\d+:";
    rule.reply.content = "```json\n" + boost::json::serialize(ideas) + "\n```\n";
    KSEARCH_RETURN_IF_ERROR(mock.AddRule(rule));
  }
  for (size_t v = 0; v < n; ++v) {
    for (int b = 1; b <= std::max(1, branches); ++b) {
      MockRule rule;
      // Anchored on the idea being implemented: the history below it names
      // other variants.
      rule.regex = "implement \\([a-z_]+\\)\\s+Try the kernel of mock variant " +
                   std::to_string(v) + "\\.[\\s\\S]*implementation " + std::to_string(b) + " of";
      rule.reply.content = reply(v + static_cast<size_t>(b - 1));
      KSEARCH_RETURN_IF_ERROR(mock.AddRule(rule));
    }
  }
  for (size_t j = 0; j < kAllIdeaCategories.size(); ++j) {
    MockRule rule;
    rule.contains = "Suggested focus this step: " + std::string(ToString(kAllIdeaCategories[j]));
    rule.reply.content = reply(j + 1);
    KSEARCH_RETURN_IF_ERROR(mock.AddRule(rule));
  }
  MockReply fallback;
  fallback.content = reply(0);
  mock.SetDefaultReply(fallback);
  return Status::Ok();
}

namespace {

std::atomic<bool> g_interrupted{false};
std::atomic<int> g_signal{0};

// SIGINT and SIGTERM stop the search the same graceful way: work in flight
// is finished or cancelled, everything is recorded, the summary printed.
void OnStopSignal(int signal) {
  g_signal.store(signal);
  g_interrupted.store(true);
}

struct RunArgs {
  std::string problem;
  std::string strategy = "tune";
  std::string llm;
  std::string base_url;
  std::string prices;
  std::string record;
  std::string prompts;
  std::string mock_script;
  std::string tune_method = "random";
  std::string dims;
  std::string arch;
  std::string cache_dir;
  int rounds = 6;
  int batch = 16;
  int seeds = 4;
  int ideas = 4;
  int branches = 4;
  bool repair = false;
  bool idea_per_step = false;
  int max_in_flight = 64;
  int64_t max_candidates = 0;
  int64_t budget_tokens = 0;
  double budget_usd = 0.0;
  double budget_minutes = 0.0;
  double budget_gpu_minutes = 0.0;
  double target_speedup = 0.0;
  double max_timing_seconds = 1.0;
  bool compile_only = false;
  bool unsandboxed_compile = false;
  bool json = false;
  double progress_every = 0.0;  // seconds; 0: a line per round only (off a terminal)
  int device = 0;
  uint64_t seed = 1;  // the search's own choices, never the judge's inputs
  uint64_t replay_input_seed = 0;
  // Which evaluator: the isolated worker pool (default) or in-process.
  std::string gpus;
  bool in_process = false;
  // GPU hosts serving a Redis work queue instead of local GPUs.
  std::string queue;
  std::string queue_run;
  // The store.
  std::string db;
  bool no_db = false;
  int64_t resume = 0;
  bool take_over = false;
  bool reopen = false;
  // Set on `resume`: budget flags and values that replace the recorded ones.
  std::vector<std::pair<std::string, std::string>> overrides;
  // The model's settings (docs/llm.md). --idea-llm / --branch-llm take the
  // same forms as --llm and default to it.
  std::string idea_llm;
  std::string branch_llm;
  int max_output_tokens = 0;  // 0: LlmGeneratorOptions' default
  std::optional<double> temperature;
  std::string reasoning_effort;
  int thinking_budget = 0;
  double llm_timeout = 240.0;
  int llm_attempts = 5;
};

// The live progress line: rewritten in place on a terminal, one line per
// round otherwise (logs, CI), plus one every --progress-every seconds when
// that is set.
class Progress final : public SearchObserver {
 public:
  // `clients` are summed on the line; `http` (may be empty) add requests in
  // flight, retries and waits. On a terminal a ticker thread redraws the line
  // every second, so that the elapsed time moves while the model thinks;
  // elsewhere it prints a line every `every_seconds` (0: never).
  Progress(bool quiet, double every_seconds, std::vector<const LlmClient*> clients,
           std::vector<const HttpLlmClient*> http)
      : quiet_(quiet),
        tty_(::isatty(STDERR_FILENO) != 0),
        clients_(std::move(clients)),
        http_(std::move(http)) {
    const double period = tty_ ? 1.0 : every_seconds;
    if (!quiet_ && period > 0) {
      ticker_ = std::thread([this, period] {
        std::unique_lock<std::mutex> lock(mutex_);
        while (!stop_) {
          tick_.wait_for(lock, std::chrono::duration<double>(period));
          if (!stop_) PrintLocked(false, /*tick=*/true);
        }
      });
    }
  }
  ~Progress() override { StopTicker(); }

  ObserverAction OnRoundStart(int round, const std::vector<std::string>&) override {
    std::lock_guard<std::mutex> lock(mutex_);
    round_ = round;
    PrintLocked(false);
    return ObserverAction::kContinue;
  }
  ObserverAction OnCandidateEvaluated(const Candidate&, const Evaluation& e) override {
    std::lock_guard<std::mutex> lock(mutex_);
    ++evaluated_;
    if (e.status == EvalStatus::kCompiled) {
      ++compiled_;
    } else if (e.ok()) {
      ++ok_;
    } else {
      ++failed_;
    }
    if (tty_) PrintLocked(false);
    return ObserverAction::kContinue;
  }
  ObserverAction OnNewBest(const Candidate& c, const Evaluation& e) override {
    std::lock_guard<std::mutex> lock(mutex_);
    best_ = c.id;
    best_ms_ = e.timing ? e.timing->median_ms : 0.0;
    if (e.speedup) {
      speedup_ = e.speedup->ratio;
      baseline_ = e.speedup->baseline;
    }
    return ObserverAction::kContinue;
  }
  ObserverAction OnRoundEnd(int) override {
    std::lock_guard<std::mutex> lock(mutex_);
    PrintLocked(true);
    return ObserverAction::kContinue;
  }
  void Finish() {
    StopTicker();
    if (tty_ && !quiet_) std::fprintf(stderr, "\n");
  }

 private:
  void StopTicker() {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      stop_ = true;
    }
    tick_.notify_all();
    if (ticker_.joinable()) ticker_.join();
  }

  // With mutex_ held (observer callbacks and the ticker both print).
  void PrintLocked(bool round_done, bool tick = false) {
    if (quiet_) return;
    if (!tty_ && !round_done && !tick) return;
    double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
    char best[160] = "no correct kernel yet";
    if (!best_.empty() && best_ms_ > 0) {
      std::snprintf(best, sizeof(best), "best %s %.4f ms (%.2fx vs %s)", best_.c_str(), best_ms_,
                    speedup_, baseline_.c_str());
    } else if (!best_.empty()) {
      std::snprintf(best, sizeof(best), "best compiled %s (never run)", best_.c_str());
    }
    char llm[192] = "";
    if (!clients_.empty()) {
      LlmTotals t;
      for (const LlmClient* c : clients_) {
        LlmTotals one = c->totals();
        t.input_tokens += one.input_tokens;
        t.output_tokens += one.output_tokens;
        t.cost_usd += one.cost_usd;
      }
      HttpLlmClient::Stats s;
      for (const HttpLlmClient* h : http_) {
        HttpLlmClient::Stats one = h->stats();
        s.in_flight += one.in_flight;
        s.queued += one.queued;
        s.waiting_to_retry += one.waiting_to_retry;
        s.retries += one.retries;
        s.timeouts += one.timeouts;
        s.last_retry_delay_seconds = std::max(s.last_retry_delay_seconds,
                                              one.last_retry_delay_seconds);
      }
      int n = std::snprintf(llm, sizeof(llm), " | %lld tokens, $%.4f",
                            static_cast<long long>(t.input_tokens + t.output_tokens), t.cost_usd);
      if (!http_.empty() && n > 0 && static_cast<size_t>(n) < sizeof(llm)) {
        std::snprintf(llm + n, sizeof(llm) - static_cast<size_t>(n),
                      " | LLM %d in flight, %d queued, %d waiting to retry (%lld retries, "
                      "%lld time-outs, last wait %.1f s)",
                      s.in_flight, s.queued - s.waiting_to_retry, s.waiting_to_retry,
                      static_cast<long long>(s.retries), static_cast<long long>(s.timeouts),
                      s.last_retry_delay_seconds);
      }
    }
    char counts[96];
    if (compiled_ > 0) {
      std::snprintf(counts, sizeof(counts), "ok %d, compiled %d, failed %d", ok_, compiled_, failed_);
    } else {
      std::snprintf(counts, sizeof(counts), "ok %d, failed %d", ok_, failed_);
    }
    std::fprintf(stderr, "%sround %d | evaluated %d (%s) | %s%s | %.1f s%s",
                 tty_ ? "\r\033[K" : "", round_, evaluated_, counts, best, llm, seconds,
                 tty_ ? "" : "\n");
    std::fflush(stderr);
  }

  bool quiet_;
  bool tty_;
  std::vector<const LlmClient*> clients_;
  std::vector<const HttpLlmClient*> http_;
  std::mutex mutex_;
  std::condition_variable tick_;
  bool stop_ = false;
  std::thread ticker_;
  int round_ = 0, evaluated_ = 0, ok_ = 0, compiled_ = 0, failed_ = 0;
  std::string best_, baseline_;
  double best_ms_ = 0.0, speedup_ = 0.0;
  std::chrono::steady_clock::time_point start_ = std::chrono::steady_clock::now();
};

// What --llm makes: the client (and, for mock, its server), and the model
// name requests carry.
// Members are destroyed bottom-up: the store's wrapper before the live client
// it borrows, the client before the recorder and the mock server.
struct LlmSetup {
  std::unique_ptr<MockLlmServer> mock;
  std::unique_ptr<LlmRecorder> recorder;
  std::unique_ptr<LlmClient> client;
  std::unique_ptr<LlmClient> recorded;  // the run's store in front of `client`
  std::string model;
  HttpLlmClient* http = nullptr;  // `client`, when it is one

  LlmClient* active() const { return recorded ? recorded.get() : client.get(); }
};

StatusOr<LlmSetup> MakeLlm(const RunArgs& args, const std::string& spec, const Problem& problem,
                           RunSession* session) {
  LlmSetup setup;
  std::string kind = spec.substr(0, spec.find(':'));
  std::string rest = spec.find(':') == std::string::npos ? "" : spec.substr(spec.find(':') + 1);
  HttpLlmClient::Options options;
  options.base_url = args.base_url;
  options.max_in_flight = args.max_in_flight;
  options.retry.max_attempts = args.llm_attempts;
  if (!args.prices.empty()) {
    KSEARCH_ASSIGN_OR_RETURN(options.prices, PriceTable::Load(args.prices));
  }
  if (kind == "replay") {
    if (rest.empty()) return InvalidArgumentError("--llm replay:FILE needs the recording's path");
    KSEARCH_ASSIGN_OR_RETURN(auto exchanges, LoadLlmRecording(rest));
    // Replay matches requests by hash, which includes the model: use the
    // recorded one.
    if (!exchanges.empty()) setup.model = exchanges.front().request.model;
    // On a GPU, prompts quote measured times, which differ from the recorded
    // run's: fall back to the request's place in the tree (its tag).
    ReplayLlmClient::Options replay;
    replay.match_tag_when_hash_differs = true;
    KSEARCH_ASSIGN_OR_RETURN(auto client,
                             ReplayLlmClient::Create(std::move(exchanges), replay));
    setup.client = std::move(client);
  } else if (kind == "mock") {
    KSEARCH_ASSIGN_OR_RETURN(setup.mock, MockLlmServer::Start({}));
    if (!args.mock_script.empty()) {
      KSEARCH_RETURN_IF_ERROR(setup.mock->LoadScript(args.mock_script));
    } else {
      KSEARCH_RETURN_IF_ERROR(ScriptMockFromProblem(*setup.mock, problem, args.rounds, args.branches));
    }
    options.provider = LlmProvider::kOpenAi;
    options.base_url = setup.mock->openai_base_url();
    setup.model = "mock";
  } else if (kind == "openai" || kind == "anthropic") {
    if (rest.empty()) return InvalidArgumentError("--llm " + kind + ":MODEL needs a model name");
    KSEARCH_ASSIGN_OR_RETURN(options.provider, ParseLlmProvider(kind));
    setup.model = rest;
    if (args.budget_usd > 0 && options.prices.Find(rest) == nullptr) {
      return InvalidArgumentError(
          "--budget-usd: " +
          (args.prices.empty() ? std::string("no --prices table given")
                               : "the price table " + args.prices + " has no price") +
          " for model " + rest + ", so every request would cost $0 and the budget never end the "
          "run (docs/llm.md shows the format)");
    }
  } else {
    return InvalidArgumentError(
        "--llm " + spec + ": expected openai:MODEL, anthropic:MODEL, mock, replay:FILE or catalog");
  }
  if (!setup.client) {
    options.default_model = setup.model;
    KSEARCH_ASSIGN_OR_RETURN(auto client, HttpLlmClient::Create(std::move(options)));
    setup.http = client.get();
    setup.client = std::move(client);
  }
  if (session) {
    KSEARCH_ASSIGN_OR_RETURN(setup.recorded, session->WrapLlmClient(*setup.client));
  }
  if (!args.record.empty()) {
    KSEARCH_ASSIGN_OR_RETURN(setup.recorder, LlmRecorder::Open(args.record));
    setup.active()->SetObserver(setup.recorder->observer());
  }
  return setup;
}

// Where a search's time went. compile, check and timing are summed over the
// judged candidates (compiles run in parallel, so their sum can pass the
// wall time); model is the wall time during which at least one model
// request of this session was in flight; evaluator is the wall time the
// search spent waiting for evaluations.
struct TimeSplit {
  double compile_seconds = 0.0;
  double check_seconds = 0.0;
  double timing_seconds = 0.0;
  std::optional<double> model_seconds;  // unknown without a database
  double candidates_per_minute = 0.0;
};

TimeSplit SplitTime(const SearchSummary& s, const std::vector<LlmExchange>& session_exchanges,
                    bool model_known) {
  TimeSplit t;
  for (const HistoryEntry& e : s.history.entries) {
    t.compile_seconds += e.evaluation.compile_ms / 1000.0;
    t.check_seconds += e.evaluation.check_ms / 1000.0;
    t.timing_seconds += e.evaluation.timing_ms / 1000.0;
  }
  if (s.wall_seconds > 0) t.candidates_per_minute = s.candidates / (s.wall_seconds / 60.0);
  if (model_known) {
    std::vector<std::pair<double, double>> spans;
    for (const LlmExchange& x : session_exchanges) {
      double latency = x.response.ok() ? x.response->latency_ms : 0.0;
      spans.emplace_back(static_cast<double>(x.started_unix_ms),
                         static_cast<double>(x.started_unix_ms) + latency);
    }
    std::sort(spans.begin(), spans.end());
    double covered_ms = 0.0, end = -1.0;
    for (const auto& [from, to] : spans) {
      if (to <= end) continue;
      covered_ms += to - std::max(from, end);
      end = to;
    }
    t.model_seconds = covered_ms / 1000.0;
  }
  return t;
}

std::string TimeSplitText(const SearchSummary& s, const TimeSplit& t) {
  char text[512];
  std::snprintf(text, sizeof(text),
                "rate: %.1f candidates/min; time: wall %.1f s, evaluator %.1f s; summed over "
                "candidates: compile %.1f s (CPU), check %.1f s, timing %.1f s (GPU)",
                t.candidates_per_minute, s.wall_seconds, s.gpu_seconds, t.compile_seconds,
                t.check_seconds, t.timing_seconds);
  std::string out = text;
  if (t.model_seconds) {
    std::snprintf(text, sizeof(text), "; waiting for the model %.1f s", *t.model_seconds);
    out += text;
  }
  return out + "\n";
}

int64_t StatusCount(const SearchSummary& s, const char* status) {
  auto it = s.by_status.find(status);
  return it == s.by_status.end() ? 0 : it->second;
}

void PrintSummaryJson(const SearchSummary& s, const Problem& problem, int64_t run_id, const TimeSplit& t) {
  boost::json::object o;
  o["run"] = run_id;
  o["strategy"] = s.strategy;
  o["termination"] = ToString(s.termination);
  if (!s.error.ok()) o["error"] = s.error.ToString();
  o["rounds"] = s.rounds;
  o["ideas"] = s.ideas;
  o["candidates"] = s.candidates;
  o["correct"] = StatusCount(s, "ok");
  o["compiled"] = StatusCount(s, "compiled");
  o["repairs"] = s.repairs;
  o["input_tokens"] = s.input_tokens;
  o["output_tokens"] = s.output_tokens;
  o["cost_usd"] = Number(s.cost_usd);
  o["wall_seconds"] = Number(s.wall_seconds);
  o["gpu_seconds"] = Number(s.gpu_seconds);
  o["candidates_per_minute"] = Number(t.candidates_per_minute);
  o["time"] = {{"wall_seconds", Number(s.wall_seconds)},
               {"evaluator_seconds", Number(s.gpu_seconds)},
               {"compile_seconds", Number(t.compile_seconds)},
               {"check_seconds", Number(t.check_seconds)},
               {"timing_seconds", Number(t.timing_seconds)},
               {"model_seconds", Number(t.model_seconds)}};
  boost::json::object by_status;
  for (const auto& [status, count] : s.by_status) by_status[status] = count;
  o["by_status"] = std::move(by_status);
  o["best_candidate_id"] = s.best ? boost::json::value(s.best->candidate.id) : nullptr;
  o["best"] = s.best ? Embedded(s.best->evaluation.ToJson()) : nullptr;
  o["best_plan"] = s.best ? Embedded(s.best->candidate.plan.ToJson()) : nullptr;
  o["best_source"] = s.best ? boost::json::value(s.best->candidate.source) : nullptr;
  // A problem with dispatch buckets: each bucket's best (its cases only),
  // null where none was correct; what the kernel cache's table holds.
  if (problem.dispatch.enabled()) {
    boost::json::array buckets;
    for (size_t b = 0; b < problem.dispatch.bucket_count(); ++b) {
      const std::optional<HistoryEntry>* entry = b < s.best_per_bucket.size() ? &s.best_per_bucket[b] : nullptr;
      boost::json::object bucket{{"bucket", problem.dispatch.BucketName(b)}};
      bucket["candidate_id"] = entry && *entry ? boost::json::value((*entry)->candidate.id) : nullptr;
      bucket["evaluation"] = entry && *entry ? Embedded((*entry)->evaluation.ToJson()) : nullptr;
      bucket["plan"] = entry && *entry ? Embedded((*entry)->candidate.plan.ToJson()) : nullptr;
      buckets.push_back(std::move(bucket));
    }
    o["best_per_bucket"] = std::move(buckets);
  }
  boost::json::array ideas, candidates;
  for (const Idea& i : s.history.ideas) {
    ideas.push_back({{"id", i.id},
                     {"parent", i.parent_id},
                     {"round", i.round},
                     {"category", ToString(i.category)},
                     {"text", i.text},
                     {"outcome", i.outcome}});
  }
  for (const HistoryEntry& e : s.history.entries) {
    boost::json::object c{{"id", e.candidate.id},
                          {"parent", e.candidate.provenance.parent_id},
                          {"idea", e.candidate.provenance.idea_id},
                          {"round", e.candidate.provenance.round},
                          {"status", ToString(e.evaluation.status)}};
    if (e.evaluation.timing) c["median_ms"] = Number(e.evaluation.timing->median_ms);
    candidates.push_back(std::move(c));
  }
  o["tree"] = {{"ideas", std::move(ideas)}, {"candidates", std::move(candidates)}};
  o["notes"] = boost::json::array(s.notes.begin(), s.notes.end());
  PrintJson(o);
}

// "0,1" -> {0, 1}.
StatusOr<std::vector<int>> ParseGpus(const std::string& text) {
  std::vector<int> gpus;
  if (text.empty() || text == "all") return gpus;
  std::stringstream in(text);
  std::string item;
  while (std::getline(in, item, ',')) {
    char* end = nullptr;
    long value = std::strtol(item.c_str(), &end, 10);
    if (item.empty() || *end != '\0' || value < 0 || value > 1023) {
      return InvalidArgumentError("--gpus " + text + ": '" + item +
                                  "' is not a GPU ordinal; expected e.g. --gpus 0,1 or all");
    }
    for (int g : gpus) {
      if (g == value) return InvalidArgumentError("--gpus " + text + ": GPU " + item + " twice");
    }
    gpus.push_back(static_cast<int>(value));
  }
  return gpus;
}

EvaluatorOptions MakeEvaluatorOptions(const RunArgs& args) {
  EvaluatorOptions options;
  options.device_ordinal = args.device;
  options.arch = args.arch;
  options.compile_only = args.compile_only;
  options.compile_cache_dir = args.cache_dir;
  options.replay_input_seed = args.replay_input_seed;
  options.max_timing_seconds = args.max_timing_seconds;
  options.allow_unsandboxed_compile = args.unsandboxed_compile;
  return options;
}

// --compile-only and --in-process judge in this process; everything else goes
// to isolated ksearch-worker processes, one per GPU, so a kernel that crashes
// or hangs its GPU costs one evaluation, not the search.
StatusOr<std::unique_ptr<Evaluator>> MakeEvaluator(const RunArgs& args, const Problem& problem) {
  EvaluatorOptions options = MakeEvaluatorOptions(args);
  if (!args.queue.empty()) {
    QueueEvaluatorOptions queue;
    queue.queue.url = args.queue;
    queue.arch = args.arch;          // the workers' arch
    queue.run_id = args.queue_run;   // the same name again collects earlier results
    queue.evaluator = options;       // compile cache and limits for the local compiles
    KSEARCH_ASSIGN_OR_RETURN(auto made, CreateQueueEvaluator(problem, queue));
    std::cerr << "ksearch: judging through " << args.queue << " (queue run " << made->run_id()
              << ")\n";
    return std::unique_ptr<Evaluator>(std::move(made));
  }
  if (args.compile_only || args.in_process) {
    KSEARCH_ASSIGN_OR_RETURN(auto local, CreateLocalEvaluator(problem, options));
    return std::unique_ptr<Evaluator>(std::move(local));
  }
  WorkerPoolOptions pool;
  pool.evaluator = options;
  KSEARCH_ASSIGN_OR_RETURN(pool.gpus, ParseGpus(args.gpus));
  if (pool.gpus.empty() && args.device != 0) pool.gpus = {args.device};
  KSEARCH_ASSIGN_OR_RETURN(auto made, CreateWorkerPoolEvaluator(problem, pool));
  return std::unique_ptr<Evaluator>(std::move(made));
}

// How many candidates the store hands the evaluator at once: each chunk is
// written before the search sees it, so a kill loses at most one chunk, and a
// chunk large enough keeps every GPU (and the compile pool) busy.
SessionOptions MakeSessionOptions(const RunArgs& args) {
  SessionOptions options;
  options.take_over_running = args.take_over;
  options.reopen_completed = args.reopen;
  if (!args.queue.empty()) {
    // A fleet is idle unless many jobs are queued at once.
    options.evaluation_chunk_size = std::max(64, args.batch);
  } else if (args.compile_only) {
    options.evaluation_chunk_size = std::max(1, args.batch);
  } else if (args.in_process) {
    options.evaluation_chunk_size = 1;  // the in-process evaluator judges one at a time anyway
  } else {
    auto gpus = ParseGpus(args.gpus);
    size_t count = gpus.ok() && !gpus->empty() ? gpus->size() : 2;
    options.evaluation_chunk_size = static_cast<int>(4 * count);
  }
  return options;
}

// The driver check before any work: only searches judged on this machine's
// GPUs need one (not --compile-only, not --queue).
Status RequireLocalGpu(const RunArgs& args, const std::string& advice) {
  std::string why;
  if (args.compile_only || !args.queue.empty() || CudaDriverAvailable(&why)) return Status::Ok();
  return FailedPreconditionError(why + "; " + advice);
}

std::string DbPath(const RunArgs& args) { return args.db.empty() ? Store::DefaultPath() : args.db; }

Status ValidateArgs(const RunArgs& args) {
  if (args.strategy != "tune" && args.strategy != "branch" && args.strategy != "refine") {
    return InvalidArgumentError("--strategy " + args.strategy + ": expected branch, refine or tune");
  }
  KSEARCH_RETURN_IF_ERROR(ParseTuneMethod(args.tune_method).status());
  KSEARCH_RETURN_IF_ERROR(ParseGpus(args.gpus).status());
  if (args.in_process && !args.gpus.empty()) {
    return InvalidArgumentError("--in-process judges on one GPU: use --device N, not --gpus");
  }
  if (!args.queue.empty()) {
    if (args.arch.empty()) {
      return InvalidArgumentError("--queue needs --arch (the workers' GPUs, e.g. sm_90)");
    }
    if (args.in_process || args.compile_only || !args.gpus.empty()) {
      return InvalidArgumentError(
          "--queue judges on the workers' GPUs: drop --in-process, --compile-only and --gpus");
    }
  }
  return Status::Ok();
}

// Runs the search with `evaluator` on `problem`, recording in `session` when
// there is one. Prints the progress line and the summary.
int Search(const RunArgs& args, const Problem& problem, Evaluator& inner, Store* store,
           RunSession* session) {
  if (args.strategy == "tune" && !args.llm.empty()) {
    std::cerr << "ksearch: note: --llm is for --strategy branch or refine; tune needs no model\n";
  }
  // The generators: a language model (one for ideas and one for branches
  // when --idea-llm / --branch-llm differ), or the offline catalog.
  LlmSetup idea_llm, branch_llm;
  std::unique_ptr<IdeaGenerator> ideas;
  std::unique_ptr<Brancher> brancher;
  const std::string idea_spec = args.idea_llm.empty() ? args.llm : args.idea_llm;
  const std::string branch_spec = args.branch_llm.empty() ? args.llm : args.branch_llm;
  bool use_llm = args.strategy != "tune" && !idea_spec.empty() && idea_spec != "catalog" &&
                 !branch_spec.empty() && branch_spec != "catalog";
  if (use_llm) {
    LlmGeneratorOptions gen;
    if (args.max_output_tokens > 0) gen.max_tokens = args.max_output_tokens;
    if (args.thinking_budget > 0 && args.thinking_budget >= gen.max_tokens) {
      return ReportError(InvalidArgumentError(
          "--thinking-budget " + std::to_string(args.thinking_budget) +
          " must be below --max-output-tokens (" + std::to_string(gen.max_tokens) +
          "): thinking counts toward the output limit"));
    }
    gen.idea_temperature = args.temperature;
    gen.code_temperature = args.temperature;
    gen.reasoning_effort = args.reasoning_effort;
    gen.thinking_budget_tokens = args.thinking_budget;
    gen.timeout_seconds = args.llm_timeout;
    gen.reformat_attempts = 1;
    if (!args.prompts.empty()) {
      auto prompts = PromptTemplates::Load(args.prompts);
      if (!prompts.ok()) return ReportError(prompts.status());
      gen.prompts = std::move(*prompts);
    }
    auto setup = MakeLlm(args, idea_spec, problem, session);
    if (!setup.ok()) return ReportError(setup.status());
    idea_llm = std::move(*setup);
    gen.model = idea_llm.model;
    auto made_ideas = MakeLlmIdeaGenerator(*idea_llm.active(), gen);
    if (!made_ideas.ok()) return ReportError(made_ideas.status());
    ideas = std::move(*made_ideas);
    LlmClient* branch_client = idea_llm.active();
    if (branch_spec != idea_spec) {
      setup = MakeLlm(args, branch_spec, problem, session);
      if (!setup.ok()) return ReportError(setup.status());
      branch_llm = std::move(*setup);
      branch_client = branch_llm.active();
      gen.model = branch_llm.model;
    }
    auto made_brancher = MakeLlmBrancher(*branch_client, gen);
    if (!made_brancher.ok()) return ReportError(made_brancher.status());
    brancher = std::move(*made_brancher);
  } else if (args.strategy != "tune") {
    ideas = MakeCatalogIdeaGenerator();
    brancher = MakeParameterMutationBrancher();
  }

  std::unique_ptr<Evaluator> recorded;
  if (session) {
    auto wrapped = session->WrapEvaluator(inner);
    if (!wrapped.ok()) {
      // Another problem or another device than the run's.
      return wrapped.status().code() == StatusCode::kFailedPrecondition
                 ? ReportError(wrapped.status(), kExitDeviceMismatch)
                 : ReportError(wrapped.status());
    }
    recorded = std::move(*wrapped);
  }
  Evaluator& evaluator = recorded ? *recorded : inner;

  SearchOptions options;
  options.seed = args.seed;
  options.seeds = args.seeds;
  options.ideas = args.ideas;
  options.branches = args.branches;
  options.repair = args.repair;
  options.budget.max_rounds = args.rounds;
  options.budget.max_candidates = args.max_candidates;
  options.budget.max_tokens = args.budget_tokens;
  options.budget.max_cost_usd = args.budget_usd;
  options.budget.max_wall_seconds = args.budget_minutes * 60.0;
  options.budget.max_gpu_seconds = args.budget_gpu_minutes * 60.0;
  options.budget.target_speedup = args.target_speedup;
  std::unique_ptr<Searcher> searcher;
  if (args.strategy == "branch") {
    searcher = MakeParallelBranchSearch(options);
  } else if (args.strategy == "refine") {
    SequentialRefineOptions refine;
    refine.use_idea_generator = args.idea_per_step;
    searcher = MakeSequentialRefineSearch(options, refine);
  } else {
    ParameterTuneOptions tune;
    tune.batch_size = args.batch;
    tune.method = *ParseTuneMethod(args.tune_method);
    searcher = MakeParameterTuneSearch(options, tune);
  }
  std::vector<const LlmClient*> clients;
  std::vector<const HttpLlmClient*> http;
  for (const LlmSetup* setup : {&idea_llm, &branch_llm}) {
    if (setup->active()) clients.push_back(setup->active());
    if (setup->http) http.push_back(setup->http);
  }
  Progress progress(args.json, args.progress_every, std::move(clients), std::move(http));
  SearchContext context;
  context.problem = &problem;
  context.evaluator = &evaluator;
  context.ideas = ideas.get();
  context.brancher = brancher.get();
  if (session) context.observers.push_back(session->observer());
  context.observers.push_back(&progress);
  context.cancel = &g_interrupted;
  std::signal(SIGINT, OnStopSignal);
  std::signal(SIGTERM, OnStopSignal);
  const int64_t session_start_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
      std::chrono::system_clock::now().time_since_epoch()).count();
  auto summary = searcher->Run(context);
  std::signal(SIGINT, SIG_DFL);
  std::signal(SIGTERM, SIG_DFL);
  progress.Finish();
  Status recorded_status = session ? session->Finish(summary) : Status::Ok();
  if (!summary.ok()) return ReportError(summary.status());
  // The best timed kernel goes to the kernel cache beside the run, where an
  // engine's KernelRunner finds it (kept only if faster than the entry there).
  if (store && summary->best && summary->best->evaluation.timing) {
    KernelCache cache(*store);
    auto put = cache.PutBest(problem, evaluator.device(), *summary->best, session->run_id());
    if (!put.ok()) {
      std::cerr << "ksearch: note: the best kernel was not cached: " << put.status().message()
                << "\n";
    } else if (*put && !args.json) {
      std::cerr << "ksearch: the best kernel is now the cached one for " << problem.name << " on "
                << evaluator.device().name << "\n";
    }
  }
  // A problem with dispatch buckets: the per-bucket bests form the table
  // KernelRunner::LoadTable dispatches by.
  if (store && !summary->best_per_bucket.empty() && !args.compile_only) {
    KernelCache cache(*store);
    auto put = cache.PutTable(problem, evaluator.device(), summary->best_per_bucket, session->run_id());
    if (!put.ok()) {
      std::cerr << "ksearch: note: the dispatch table was not cached: " << put.status().message() << "\n";
    } else if (!args.json) {
      std::cerr << "ksearch: " << *put << " of " << summary->best_per_bucket.size()
                << " bucket entries of the dispatch table of " << problem.name << " updated\n";
    }
  }
  std::vector<LlmExchange> exchanges;
  const bool any_llm = idea_llm.active() != nullptr || branch_llm.active() != nullptr;
  if (store && any_llm) {
    // This session's live requests (replayed ones were paid for earlier).
    auto recorded_exchanges = store->LoadExchanges(session->run_id());
    if (recorded_exchanges.ok()) {
      for (LlmExchange& x : *recorded_exchanges) {
        if (x.started_unix_ms >= session_start_ms) exchanges.push_back(std::move(x));
      }
    }
  }
  TimeSplit time = SplitTime(*summary, exchanges, store != nullptr || !any_llm);
  if (args.json) {
    PrintSummaryJson(*summary, problem, session ? session->run_id() : 0, time);
  } else {
    std::cout << summary->FullReport() << TimeSplitText(*summary, time);
    if (std::string why; args.unsandboxed_compile && !CompileConfinementAvailable(&why)) {
      std::cout << "compiles: UNCONFINED (--unsandboxed-compile; " << why << ")\n";
    }
    // What the provider billed, replies the search could not use included
    // (refused, empty, truncated): the summary counts the usable ones.
    LlmTotals billed;
    for (const LlmSetup* setup : {&idea_llm, &branch_llm}) {
      if (!setup->active()) continue;
      LlmTotals t = setup->active()->totals();
      billed.requests += t.requests;
      billed.failures += t.failures;
      billed.input_tokens += t.input_tokens;
      billed.output_tokens += t.output_tokens;
      billed.cost_usd += t.cost_usd;
    }
    if (billed.requests > 0) {
      char line[256];
      std::snprintf(line, sizeof line,
                    "billed: %lld requests (%lld failed), tokens in %lld, out %lld; cost $%.4f\n",
                    static_cast<long long>(billed.requests),
                    static_cast<long long>(billed.failures),
                    static_cast<long long>(billed.input_tokens),
                    static_cast<long long>(billed.output_tokens), billed.cost_usd);
      std::cout << line;
    }
    if (summary->best) {
      std::cout << "best plan:\n" << IndentJson(summary->best->candidate.plan.ToJson()) << "\n";
    }
  }
  if (session) {
    std::cerr << "ksearch: run " << session->run_id() << " recorded in " << store->path();
    if (session->reused_evaluations() > 0 || session->reused_replies() > 0) {
      std::cerr << " (reused from earlier sessions: " << session->reused_evaluations()
                << " judged kernels, " << session->reused_replies() << " LLM replies)";
    }
    std::cerr << "; see 'ksearch show " << session->run_id() << "'";
    if (summary->termination == TerminationReason::kInterrupted) {
      std::cerr << ", continue with 'ksearch resume " << session->run_id() << "'";
    }
    std::cerr << "\n";
  }
  if (!recorded_status.ok()) return ReportError(recorded_status);
  if (summary->termination == TerminationReason::kInterrupted) {
    return g_signal.load() == SIGTERM ? kExitTerminated : kExitInterrupted;
  }
  if (summary->termination == TerminationReason::kFailed) return kExitFailure;
  if (summary->best && summary->best->evaluation.correct()) return kExitOk;
  return summary->best ? kExitCompiledOnly : kExitRejected;
}

// The arguments after "run" on this command line, without the ones that
// choose the database or the GPUs (a resume chooses those afresh).
// `extra` is appended (flags the run chose itself, such as its queue run id).
std::vector<std::string> RecordedArguments(const std::vector<std::string>& extra) {
  const std::vector<std::string>& all = CommandLine();
  std::vector<std::string> out;
  size_t i = 0;
  while (i < all.size() && all[i] != "run") ++i;
  for (++i; i < all.size(); ++i) {
    const std::string& a = all[i];
    if (a == "--db" || a == "--gpus" || a == "--device" || a == "--queue") {
      ++i;  // and its value
      continue;
    }
    if (a.starts_with("--db=") || a.starts_with("--gpus=") || a.starts_with("--device=") ||
        a.starts_with("--queue=") ||
        a == "--in-process" || a == "--no-db") {
      continue;
    }
    out.push_back(a);
  }
  out.insert(out.end(), extra.begin(), extra.end());
  return out;
}

int RunSearch(const RunArgs& given) {
  if (given.resume > 0) return kExitUsage;  // handled by ResumeSearch
  // Through a queue, the run names its results in Redis; recorded with the
  // run, a resume collects what the workers finished while it was down.
  RunArgs args = given;
  WarnIfUnsandboxed(args.unsandboxed_compile);
  std::vector<std::string> chosen;
  if (!args.queue.empty() && args.queue_run.empty()) {
    std::random_device random;
    char id[32];
    std::snprintf(id, sizeof(id), "ks-%08x%08x", random(), random());
    args.queue_run = id;
    chosen = {"--queue-run", args.queue_run};
  }
  if (Status valid = ValidateArgs(args); !valid.ok()) return ReportError(valid);
  if (args.problem.empty()) {
    return ReportError(InvalidArgumentError("ksearch run needs a PROBLEM (or --resume RUN)"));
  }
  auto problem = LoadWithDims(args.problem, args.dims);
  if (!problem.ok()) return ReportError(problem.status());
  if (Status gpu = RequireLocalGpu(
          args, "run on a machine with an NVIDIA GPU, or add --compile-only --arch sm_90");
      !gpu.ok()) {
    return ReportError(gpu);
  }
  // The store first: a database that cannot be written should stop the run
  // before any GPU time is spent.
  std::unique_ptr<Store> store;
  if (!args.no_db) {
    auto opened = Store::Open(DbPath(args));
    if (!opened.ok()) {
      return ReportStoreError(Status(opened.status().code(),
                                     opened.status().message() + " (or run with --no-db)"));
    }
    store = std::move(*opened);
  }
  auto evaluator = MakeEvaluator(args, *problem);
  if (!evaluator.ok()) return ReportError(evaluator.status());
  std::unique_ptr<RunSession> session;
  if (store) {
    RunSettings settings;
    settings.strategy = args.strategy;
    settings.options_json = ArgvToOptionsJson(RecordedArguments(chosen));
    settings.seed = args.seed;
    settings.device = (*evaluator)->device();
    auto begun = BeginRun(*store, *problem, settings, MakeSessionOptions(args));
    if (!begun.ok()) return ReportError(begun.status());
    session = std::move(*begun);
    if (!args.json) {
      std::cerr << "ksearch: recording run " << session->run_id() << " in " << store->path()
                << "\n";
    }
  }
  int code = Search(args, *problem, **evaluator, store.get(), session.get());
  session.reset();
  return code;
}

// The budgets that bound a run by themselves; `resume` takes them too, to
// extend a run.
void AddBudgetOptions(CLI::App& cmd, RunArgs& args) {
  cmd.add_option("--max-candidates", args.max_candidates, "stop after this many candidates")
      ->check(NonNegative());
  cmd.add_option("--budget-minutes", args.budget_minutes, "stop after this much wall time")
      ->check(NonNegative());
  cmd.add_option("--budget-gpu-minutes", args.budget_gpu_minutes,
                 "stop after this much evaluator time")
      ->check(NonNegative());
}

// After parsing: --rounds keeps its default of 6 only when no budget that
// bounds the run by itself was given.
void ApplyRoundsDefault(const CLI::App& cmd, RunArgs& args) {
  if (cmd.count("--rounds") > 0) return;
  bool bounded = args.budget_minutes > 0 || args.budget_gpu_minutes > 0 || args.max_candidates > 0;
  args.rounds = bounded ? 0 : 6;
}

void AddRunOptions(CLI::App& cmd, RunArgs& args) {
  cmd.add_option("PROBLEM", args.problem, "built-in name (see 'ksearch problems') or path");
  cmd.add_option("--strategy", args.strategy,
                 "branch: ideas + parallel branches (the method); refine: one candidate at a "
                 "time; tune: offline tuning of the problem's templates")
      ->capture_default_str();
  cmd.add_option("--llm", args.llm,
                 "openai:MODEL, anthropic:MODEL, mock, replay:FILE, or catalog (offline "
                 "parameter moves; the default for branch and refine)");
  cmd.add_option("--base-url", args.base_url,
                 "server URL (default: $OPENAI_BASE_URL / $ANTHROPIC_BASE_URL, else the provider's)");
  cmd.add_option("--prices", args.prices,
                 "price table JSON (docs/llm.md) for costs and --budget-usd");
  cmd.add_option("--record", args.record,
                 "also append every LLM exchange to this JSONL file (for replay:)");
  cmd.add_option("--prompts", args.prompts,
                 "folder of prompt templates overriding the built-in ones");
  cmd.add_option("--mock-script", args.mock_script, "with --llm mock: a mock script (docs/llm.md)");
  // The model's settings, together (docs/llm.md has the providers' rules).
  cmd.add_option("--idea-llm", args.idea_llm,
                 "the model that writes ideas, in --llm's forms (default: --llm)");
  cmd.add_option("--branch-llm", args.branch_llm,
                 "the model that writes implementations and repairs (default: --llm)");
  cmd.add_option("--max-output-tokens", args.max_output_tokens,
                 "output tokens per reply at most, reasoning included (default 16384)")
      ->check(CLI::PositiveNumber);
  cmd.add_option("--temperature", args.temperature,
                 "sampling temperature (default: none sent, the provider's default; never sent "
                 "to OpenAI reasoning models or with --thinking-budget)")
      ->check(CLI::Range(0.0, 2.0));
  cmd.add_option("--reasoning-effort", args.reasoning_effort,
                 "OpenAI reasoning models (o1, o3, o4, gpt-5): minimal, low, medium or high")
      ->check(CLI::IsMember({"minimal", "low", "medium", "high"}));
  cmd.add_option("--thinking-budget", args.thinking_budget,
                 "Anthropic extended thinking: budget_tokens (>= 1024, below "
                 "--max-output-tokens)")
      ->check(NonNegative());
  cmd.add_option("--llm-timeout", args.llm_timeout,
                 "seconds per LLM attempt until the whole reply is read")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  cmd.add_option("--llm-attempts", args.llm_attempts,
                 "attempts per LLM request, the first included (time-outs: at most 2)")
      ->check(CLI::Range(1, 20))
      ->capture_default_str();
  cmd.add_option("--rounds", args.rounds,
                 "rounds to run (0: until another budget ends; default 6, unlimited when "
                 "--budget-minutes, --budget-gpu-minutes or --max-candidates is given alone)")
      ->check(NonNegative());
  cmd.add_option("--seeds", args.seeds, "branch: k, correct kernels seeding each round")
      ->capture_default_str()
      ->check(Positive());
  cmd.add_option("--ideas", args.ideas, "branch: n, ideas per seed per round")
      ->capture_default_str()
      ->check(Positive());
  cmd.add_option("--branches", args.branches, "branch: b, implementations per idea")
      ->capture_default_str()
      ->check(Positive());
  cmd.add_flag("--repair", args.repair,
               "branch: give a branch that fails to compile or is wrong one fix attempt");
  cmd.add_flag("--idea-per-step", args.idea_per_step,
               "refine: ask for an idea before each revision (two requests per candidate)");
  cmd.add_option("--max-in-flight", args.max_in_flight, "LLM requests in flight at most")
      ->capture_default_str()
      ->check(Positive());
  cmd.add_option("--batch", args.batch, "tune: candidates judged per round")
      ->capture_default_str()
      ->check(Positive());
  cmd.add_option("--tune-method", args.tune_method, "tune: random, annealing or halving")
      ->capture_default_str();
  AddBudgetOptions(cmd, args);
  cmd.add_option("--budget-tokens", args.budget_tokens, "stop after this many LLM tokens")
      ->check(NonNegative());
  cmd.add_option("--budget-usd", args.budget_usd,
                 "stop after this much LLM spending (needs --prices)")
      ->check(NonNegative());
  cmd.add_option("--target-speedup", args.target_speedup,
                 "stop once the best beats the baseline by this")
      ->check(NonNegative());
  cmd.add_option("--dims", args.dims, "override problem dims, e.g. rows=256,cols=1024");
  cmd.add_flag("--compile-only", args.compile_only,
               "run the loop without a GPU, judging up to compilation and plan checks (needs "
               "--arch)");
  cmd.add_option("--arch", args.arch, "compile target, e.g. sm_90 (default: the GPU's)");
  cmd.add_option("--seed", args.seed,
                 "seed of the search's own choices (seeds, template points); the judge's inputs never "
                 "depend on it")
      ->capture_default_str()
      ->check(NonNegative());
  cmd.add_option("--replay-input-seed", args.replay_input_seed,
                 "fixed input seed, for tests and replays only: every input becomes predictable to a kernel that knows it (docs/evaluation.md, Secrets); default 0: the operating system's randomness")
      ->check(NonNegative());
  cmd.add_option("--cache-dir", args.cache_dir, "compile cache folder ('off' to disable)");
  cmd.add_option("--max-timing-seconds", args.max_timing_seconds, "cap on timing per candidate")
      ->capture_default_str()
      ->check(Positive());
  cmd.add_flag("--unsandboxed-compile", args.unsandboxed_compile, kUnsandboxedCompileHelp);
  cmd.add_flag("--json", args.json,
               "print the summary and the search tree as JSON (no progress line)");
  cmd.add_option("--progress-every", args.progress_every,
                 "when stderr is not a terminal (a log, CI), also print the progress line every "
                 "SECONDS, not only at the end of each round (0: only then)")
      ->capture_default_str()
      ->check(NonNegative());
}

// `ksearch resume RUN` and `ksearch run --resume RUN`: the run's problem and
// flags come from the store; --db, --gpus, --device and --in-process may be
// chosen again (another host, other GPUs).
void AddSelectionOptions(CLI::App& cmd, RunArgs& args);

// Replaces (or appends) `flag VALUE` in recorded run arguments.
void SetArgument(std::vector<std::string>& argv, const std::string& flag, const std::string& value) {
  std::vector<std::string> out;
  for (size_t i = 0; i < argv.size(); ++i) {
    if (argv[i] == flag) {
      ++i;  // and its value
      continue;
    }
    if (argv[i].starts_with(flag + "=")) continue;
    out.push_back(argv[i]);
  }
  out.push_back(flag);
  out.push_back(value);
  argv = std::move(out);
}

int ResumeSearch(const RunArgs& given) {
  // A resume never creates a database: a mistyped --db is an error.
  Store::Options open;
  open.create_if_missing = false;
  auto store = Store::Open(DbPath(given), open);
  if (!store.ok()) return ReportStoreError(store.status());
  // Everything that can be checked is checked before the run is claimed, so
  // that a resume which cannot start leaves the run as it was.
  auto found = (*store)->FindRun(given.resume);
  if (!found.ok()) return ReportError(found.status());
  auto argv = ArgvFromOptionsJson(found->options_json);
  if (!argv.ok()) return ReportError(argv.status());
  // A larger budget for the rest of the run, kept for later resumes.
  for (const auto& [flag, value] : given.overrides) SetArgument(*argv, flag, value);

  RunArgs args;
  CLI::App parser{"ksearch run (as recorded)", "ksearch run"};
  AddRunOptions(parser, args);
  AddSelectionOptions(parser, args);  // --queue-run is recorded; the others are stripped
  std::vector<std::string> reversed(argv->rbegin(), argv->rend());
  try {
    parser.parse(reversed);
  } catch (const CLI::ParseError& e) {
    return ReportError(DataLossError("run " + std::to_string(given.resume) +
                                     ": its recorded flags no longer parse (" + e.what() + ")"));
  }
  ApplyRoundsDefault(parser, args);
  if (!args.queue_run.empty() && given.queue.empty()) {
    return ReportError(InvalidArgumentError(
        "run " + std::to_string(given.resume) +
        " was judged by GPU hosts through a Redis queue: resume it with --queue URL (the "
        "Redis the workers serve, e.g. --queue redis://HOST:6379)"));
  }
  args.db = given.db;
  args.resume = given.resume;
  args.gpus = given.gpus;
  args.device = given.device;
  args.in_process = given.in_process;
  args.queue = given.queue;
  if (!given.queue_run.empty()) args.queue_run = given.queue_run;
  if (given.json) args.json = true;
  if (Status valid = ValidateArgs(args); !valid.ok()) return ReportError(valid);
  if (Status gpu = RequireLocalGpu(args, "run " + std::to_string(args.resume) +
                                              " needs a GPU to go on");
      !gpu.ok()) {
    return ReportError(gpu);
  }

  // The claim: check and reopen in one transaction.
  auto session = ResumeRun(**store, given.resume, MakeSessionOptions(given));
  if (!session.ok()) {
    // "already completed": the request, not the machine, is at fault (exit
    // 2, not the no-GPU exit 3); "still running": exit 8 (kAborted).
    if (session.status().code() == StatusCode::kFailedPrecondition) {
      return ReportError(session.status(), kExitUsage);
    }
    return ReportError(session.status());
  }
  if (!given.overrides.empty()) {
    Status kept = (*store)->SetRunOptions(given.resume, ArgvToOptionsJson(*argv));
    if (!kept.ok()) return ReportError(kept);
  }
  auto problem = (*session)->problem();
  if (!problem.ok()) return ReportError(problem.status());
  auto evaluator = MakeEvaluator(args, *problem);
  if (!evaluator.ok()) return ReportError(evaluator.status());
  if (!args.json) {
    std::cerr << "ksearch: resuming run " << args.resume << " (" << (*session)->run().problem_name
              << ", " << args.strategy << ") from " << (*store)->path() << "\n";
  }
  int code = Search(args, *problem, **evaluator, store->get(), session->get());
  session->reset();
  return code;
}

void AddSelectionOptions(CLI::App& cmd, RunArgs& args) {
  cmd.add_option("--gpus", args.gpus,
                 "GPUs to judge on, one isolated worker process each, e.g. 0,1 (default: all)");
  cmd.add_flag("--in-process", args.in_process,
               "judge in this process on --device (no isolation: a crashing kernel ends the "
               "search; for trusted templates)");
  cmd.add_option("--device", args.device, "CUDA device ordinal for --in-process")
      ->capture_default_str()
      ->check(NonNegative());
  cmd.add_option("--queue", args.queue,
                 "judge on GPU hosts serving this Redis instead (redis://HOST[:PORT][/DB]; needs "
                 "--arch; see 'ksearch worker --help')");
  cmd.add_option("--queue-run", args.queue_run,
                 "with --queue: name of this search's results in Redis; the same name again "
                 "collects them (default: random)");
  cmd.add_option("--db", args.db,
                 "the ksearch database to record in (default: $KSEARCH_DB, else ./ksearch.db)");
}

}  // namespace

void AddRunCommand(CLI::App& app, int* exit_code) {
  static RunArgs args;
  auto* cmd = app.add_subcommand("run", "Search for a faster kernel for a problem");
  AddRunOptions(*cmd, args);
  AddSelectionOptions(*cmd, args);
  cmd->add_flag("--no-db", args.no_db, "do not record the run (it cannot be resumed)");
  cmd->add_option("--resume", args.resume,
                  "continue run RUN of the database with its recorded problem and flags (as "
                  "'ksearch resume RUN')");
  cmd->footer(
      "Every run is recorded in the database (--db): a run stopped by Ctrl-C, a crash or\n"
      "SIGKILL continues with 'ksearch resume RUN' without judging a finished kernel or\n"
      "buying an LLM reply twice. Kernels are judged in isolated worker processes, one per\n"
      "GPU (--gpus); a kernel that crashes or hangs costs one evaluation, not the search.\n"
      "Ctrl-C or SIGTERM stops gracefully: work in flight is finished or cancelled,\n"
      "everything is recorded and the summary is printed (exit 130, 143). API keys come from $OPENAI_API_KEY or\n"
      "$ANTHROPIC_API_KEY, never from the command line.\n\n"
      "Examples:\n"
      "  ksearch run softmax                           tune softmax's templates on every GPU\n"
      "  ksearch run matmul --tune-method annealing --rounds 10 --batch 32 --gpus 0,1\n"
      "  ksearch run softmax --strategy branch --llm openai:gpt-4o --rounds 4 --seeds 2\n"
      "      --ideas 4 --branches 4 --budget-usd 5 --prices prices.json\n"
      "  ksearch run softmax --strategy branch --llm replay:run.jsonl   replay a run offline\n"
      "  ksearch run softmax --strategy branch                          offline: catalog ideas\n"
      "  ksearch run softmax --strategy branch --llm mock --compile-only --arch sm_90\n"
      "                                                exercise the loop without a GPU or model\n"
      "  ksearch resume 3                              continue run 3 after a kill\n"
      "  ksearch run matmul --queue redis://fleet:6379 --arch sm_90\n"
      "                                                judge on GPU hosts running 'ksearch worker'\n\n" +
      std::string(kExitCodesHelp));
  cmd->callback([exit_code, cmd] {
    ApplyRoundsDefault(*cmd, args);
    *exit_code = args.resume > 0 ? ResumeSearch(args) : RunSearch(args);
  });
}

void AddResumeCommand(CLI::App& app, int* exit_code) {
  static RunArgs args;
  auto* cmd = app.add_subcommand(
      "resume", "Continue a recorded run that was interrupted, killed or failed");
  cmd->add_option("RUN", args.resume, "run number, as 'ksearch list' shows it")->required();
  AddSelectionOptions(*cmd, args);
  cmd->add_flag("--take-over", args.take_over,
                "resume although the run says it is running (its process is known to be gone)");
  cmd->add_flag("--reopen", args.reopen,
                "continue a completed run, to extend it with a larger budget (--rounds, …)");
  static std::string rounds, max_candidates, budget_minutes, budget_gpu_minutes;
  struct Override {
    const char* flag;
    std::string* value;
    const char* help;
  };
  for (const Override& o : {Override{"--rounds", &rounds, "rounds in all, replacing the recorded"},
                            Override{"--max-candidates", &max_candidates,
                                     "candidates in all, replacing the recorded budget"},
                            Override{"--budget-minutes", &budget_minutes,
                                     "wall time for this session, replacing the recorded budget"},
                            Override{"--budget-gpu-minutes", &budget_gpu_minutes,
                                     "evaluator time for this session, replacing the recorded"}}) {
    cmd->add_option(o.flag, *o.value, o.help)->check(NonNegative());
  }
  cmd->add_flag("--json", args.json, "print the summary as JSON");
  cmd->footer(
      "The run's problem, strategy, seed and flags come from the database. Kernels judged\n"
      "and LLM replies received before the interruption are reused, so the search replays\n"
      "quickly to where it stopped and goes on from there.\n\n"
      "Examples:\n"
      "  ksearch list                       find the run\n"
      "  ksearch resume 3                   continue run 3 of ./ksearch.db\n"
      "  ksearch resume 3 --reopen --rounds 20   extend a completed run to 20 rounds\n"
      "  ksearch resume 3 --db runs.db --gpus 1");
  cmd->callback([exit_code] {
    for (const auto& [flag, value] : {std::pair{"--rounds", &rounds},
                                      std::pair{"--max-candidates", &max_candidates},
                                      std::pair{"--budget-minutes", &budget_minutes},
                                      std::pair{"--budget-gpu-minutes", &budget_gpu_minutes}}) {
      if (!value->empty()) args.overrides.emplace_back(flag, *value);
    }
    *exit_code = ResumeSearch(args);
  });
}

}  // namespace ksearch::cli
