// AnswerExchangeFolder: the answering side of an exchange folder. One loop
// on the caller's thread lists the folder, starts requests within the
// limits, and writes each reply file as its callback hands it over.
#include <chrono>
#include <condition_variable>
#include <deque>
#include <map>
#include <mutex>
#include <optional>
#include <set>

#include "core/file_util.h"
#include "ksearch/exchange_answer.h"
#include "ksearch/exchange_llm_client.h"

namespace ksearch {
namespace {

using SteadyClock = std::chrono::steady_clock;

// Failures that belong to the request itself: the search gets them as
// written, as it would from the provider.
bool WriteAsErrorReply(const Status& status) {
  switch (status.code()) {
    case StatusCode::kOutOfRange:
    case StatusCode::kDataLoss:
    case StatusCode::kUnimplemented:
    case StatusCode::kInvalidArgument:
      return true;
    default:
      return false;
  }
}

struct Finished {
  std::string name;
  StatusOr<ChatResponse> reply = Status(StatusCode::kUnknown, "not set");
};

// What a request is expected to cost at most: its prompt at four bytes a
// token, and its whole output limit.
struct Estimate {
  int64_t tokens = 0;
  double cost_usd = 0.0;
};

Estimate EstimateOf(const ChatRequest& request, const PriceTable& prices) {
  int64_t bytes = static_cast<int64_t>(request.system.size());
  for (const ChatMessage& m : request.messages) bytes += static_cast<int64_t>(m.content.size());
  Estimate e;
  const int64_t prompt = (bytes + 3) / 4;
  e.tokens = prompt + request.max_tokens;
  e.cost_usd = prices.CostUsd(request.model, prompt, request.max_tokens);
  return e;
}

class Answerer {
 public:
  Answerer(const std::string& folder, LlmClient& client, const AnswerOptions& options,
           const std::function<void(const AnswerEvent&)>& on_event)
      : folder_(folder),
        replies_(internal::JoinPath(folder, "replies")),
        client_(client),
        options_(options),
        on_event_(on_event),
        start_totals_(client.totals()) {}

  StatusOr<AnswerSummary> Run() {
    for (;;) {
      KSEARCH_ASSIGN_OR_RETURN(std::vector<ExchangeFile> files, ListExchangeFolder(folder_));
      const bool stopping = Stopping();
      if (!stopping) StartPending(files);
      if (in_flight_.empty() && (stopping || !options_.watch)) break;
      WaitForReplies(stopping);
    }
    KSEARCH_ASSIGN_OR_RETURN(std::vector<ExchangeFile> files, ListExchangeFolder(folder_));
    summary_.pending = 0;
    summary_.failed = 0;
    summary_.over_budget = 0;
    for (const ExchangeFile& f : files) {
      if (!f.reply_path.empty()) continue;
      ++summary_.pending;
      summary_.failed += failed_.count(f.name) ? 1 : 0;
      summary_.over_budget += over_budget_.count(f.name) ? 1 : 0;
    }
    LlmTotals now = client_.totals();
    summary_.totals.requests = now.requests - start_totals_.requests;
    summary_.totals.failures = now.failures - start_totals_.failures;
    summary_.totals.input_tokens = now.input_tokens - start_totals_.input_tokens;
    summary_.totals.output_tokens = now.output_tokens - start_totals_.output_tokens;
    summary_.totals.cost_usd = now.cost_usd - start_totals_.cost_usd;
    return summary_;
  }

 private:
  struct InFlight {
    uint64_t id = 0;
    std::string tag;
    Estimate estimate;
  };

  bool Stopping() const {
    return (options_.stop && options_.stop->load()) || !summary_.stopped_by.ok();
  }

  // Starts the pending requests that are not in flight, not tried already
  // (or due for another try), and within the limits.
  void StartPending(const std::vector<ExchangeFile>& files) {
    for (const ExchangeFile& file : files) {
      if (!file.reply_path.empty() || in_flight_.count(file.name) || bad_.count(file.name)) {
        continue;
      }
      if (auto tried = tried_.find(file.name); tried != tried_.end()) {
        if (!options_.watch) continue;
        if (std::chrono::duration<double>(SteadyClock::now() - tried->second).count() <
            options_.retry_failed_after_seconds) {
          continue;
        }
      }
      if (static_cast<int>(in_flight_.size()) >= std::max(1, options_.max_in_flight)) return;
      StatusOr<ChatRequest> request = ReadRequest(file);
      if (!request.ok()) {
        bad_.insert(file.name);
        ++summary_.bad_requests;
        summary_.notes.push_back(request.status().message());
        continue;
      }
      Estimate estimate = EstimateOf(*request, options_.prices);
      // Tried again on every pass: replies smaller than their estimate
      // free room.
      if (!Fits(estimate)) {
        over_budget_.insert(file.name);
        continue;
      }
      Start(file.name, std::move(*request), estimate);
    }
  }

  StatusOr<ChatRequest> ReadRequest(const ExchangeFile& file) {
    KSEARCH_ASSIGN_OR_RETURN(std::string text, internal::ReadFile(file.request_path));
    KSEARCH_ASSIGN_OR_RETURN(ChatRequest request,
                             ExchangeRequestFromJson(text, file.request_path));
    if (!options_.model.empty() && request.model != options_.model) {
      if (!request.model.empty() && replaced_.insert(request.model).second) {
        summary_.notes.push_back("requests written for model \"" + request.model +
                                 "\" are sent to \"" + options_.model + "\"");
      }
      request.model = options_.model;
    }
    request.timeout_seconds = options_.timeout_seconds;
    return request;
  }

  bool Fits(const Estimate& e) const {
    LlmTotals now = client_.totals();
    int64_t tokens = now.input_tokens + now.output_tokens - start_totals_.input_tokens -
                     start_totals_.output_tokens;
    double cost = now.cost_usd - start_totals_.cost_usd;
    for (const auto& [name, flight] : in_flight_) {
      tokens += flight.estimate.tokens;
      cost += flight.estimate.cost_usd;
    }
    if (options_.max_tokens > 0 && tokens + e.tokens > options_.max_tokens) return false;
    if (options_.max_cost_usd > 0 && cost + e.cost_usd > options_.max_cost_usd) return false;
    return true;
  }

  void Start(const std::string& name, ChatRequest request, const Estimate& estimate) {
    InFlight& flight = in_flight_[name];
    flight.tag = request.tag;
    flight.estimate = estimate;
    over_budget_.erase(name);
    flight.id = client_.Complete(std::move(request), [this, name](StatusOr<ChatResponse> reply) {
      // On the client's I/O thread: hand over, write on the answering thread.
      std::lock_guard<std::mutex> lock(mutex_);
      finished_.push_back(Finished{name, std::move(reply)});
      arrived_.notify_all();
    });
  }

  // Waits up to one poll interval (until everything in flight is back, when
  // stopping) and writes the replies that came.
  void WaitForReplies(bool stopping) {
    std::deque<Finished> done;
    {
      std::unique_lock<std::mutex> lock(mutex_);
      if (stopping && !cancelled_) {
        cancelled_ = true;
        lock.unlock();
        for (const auto& [name, flight] : in_flight_) client_.Cancel(flight.id);
        lock.lock();
      }
      const auto period = std::chrono::duration<double>(options_.poll_interval_seconds);
      if (finished_.empty() && !in_flight_.empty()) arrived_.wait_for(lock, period);
      if (finished_.empty() && in_flight_.empty() && options_.watch && !stopping) {
        arrived_.wait_for(lock, period);
      }
      done.swap(finished_);
    }
    for (Finished& f : done) Finish(std::move(f));
  }

  void Finish(Finished f) {
    auto it = in_flight_.find(f.name);
    AnswerEvent event;
    event.name = f.name;
    event.tag = it == in_flight_.end() ? "" : it->second.tag;
    if (it != in_flight_.end()) in_flight_.erase(it);
    const bool cancelled = !f.reply.ok() && f.reply.status().code() == StatusCode::kCancelled;
    if (f.reply.ok() || WriteAsErrorReply(f.reply.status())) {
      const std::string path = internal::JoinPath(replies_, f.name + ".json");
      Status written = internal::WriteNewFileAtomically(path, ExchangeReplyToJson(f.reply));
      if (written.ok()) {
        event.reply_written = true;
        failed_.erase(f.name);
        ++(f.reply.ok() ? summary_.answered : summary_.refused);
      } else if (written.code() == StatusCode::kAlreadyExists) {
        summary_.notes.push_back(f.name + ": another answer arrived first; this one was dropped");
      } else {
        failed_.insert(f.name);
        tried_[f.name] = SteadyClock::now();
        f.reply = written.WithContext("writing the reply");
      }
    } else if (!cancelled) {
      failed_.insert(f.name);
      tried_[f.name] = SteadyClock::now();
      if (FailureScope(f.reply.status()) == LlmFailureScope::kRun && summary_.stopped_by.ok()) {
        summary_.stopped_by = f.reply.status();
      }
    }
    event.reply = std::move(f.reply);
    if (on_event_) on_event_(event);
  }

  const std::string folder_;
  const std::string replies_;
  LlmClient& client_;
  const AnswerOptions& options_;
  const std::function<void(const AnswerEvent&)>& on_event_;
  const LlmTotals start_totals_;
  AnswerSummary summary_;
  std::map<std::string, InFlight> in_flight_;
  std::map<std::string, SteadyClock::time_point> tried_;  // when each failure came
  std::set<std::string> failed_;
  std::set<std::string> bad_;
  std::set<std::string> over_budget_;
  std::set<std::string> replaced_;
  bool cancelled_ = false;

  std::mutex mutex_;
  std::condition_variable arrived_;
  std::deque<Finished> finished_;
};

}  // namespace

StatusOr<AnswerSummary> AnswerExchangeFolder(
    const std::string& folder, LlmClient& client, const AnswerOptions& options,
    const std::function<void(const AnswerEvent&)>& on_event) {
  if (!(options.poll_interval_seconds > 0)) {
    return InvalidArgumentError("AnswerOptions::poll_interval_seconds must be above 0");
  }
  Answerer answerer(folder, client, options, on_event);
  return answerer.Run();
}

}  // namespace ksearch
