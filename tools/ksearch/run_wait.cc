#include "run_wait.h"

#include <algorithm>
#include <chrono>
#include <cstdio>

namespace ksearch::cli {

class WaitWatch::CountingEvaluator final : public Evaluator {
 public:
  CountingEvaluator(Evaluator& inner, std::atomic<int>& judging)
      : inner_(inner), judging_(judging) {}
  std::vector<Evaluation> Evaluate(std::span<const Candidate> candidates,
                                   const std::atomic<bool>* cancel) override {
    ++judging_;
    std::vector<Evaluation> out = inner_.Evaluate(candidates, cancel);
    --judging_;
    return out;
  }
  const Problem& problem() const override { return inner_.problem(); }
  const DeviceInfo& device() const override { return inner_.device(); }
  std::optional<TimingStats> reference_timing() const override { return inner_.reference_timing(); }
  std::optional<TimingStats> baseline_timing() const override { return inner_.baseline_timing(); }
  Status health() const override { return inner_.health(); }

 private:
  Evaluator& inner_;
  std::atomic<int>& judging_;
};

WaitWatch::WaitWatch(std::atomic<bool>* stop, std::vector<const ExchangeLlmClient*> exchange,
                     std::vector<const HttpLlmClient*> http, double wait_seconds)
    : stop_(stop), exchange_(std::move(exchange)), http_(std::move(http)), wait_seconds_(wait_seconds) {
  if (wait_seconds_ > 0 && !exchange_.empty()) thread_ = std::thread([this] { Loop(); });
}

WaitWatch::~WaitWatch() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    done_ = true;
  }
  wake_.notify_all();
  if (thread_.joinable()) thread_.join();
}

std::unique_ptr<Evaluator> WaitWatch::Watch(Evaluator& inner) {
  return std::make_unique<CountingEvaluator>(inner, judging_);
}

void WaitWatch::NeedGpu(const Status& why) {
  StopFor(Reason::kGpu, "candidates must be judged, and " + why.message());
}

WaitWatch::Reason WaitWatch::reason() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return reason_;
}

std::string WaitWatch::message() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return message_;
}

void WaitWatch::StopFor(Reason reason, std::string message) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (reason_ != Reason::kNone) return;  // the first reason stands
    reason_ = reason;
    message_ = std::move(message);
  }
  stop_->store(true);
}

void WaitWatch::Loop() {
  std::unique_lock<std::mutex> lock(mutex_);
  while (!done_ && reason_ == Reason::kNone) {
    wake_.wait_for(lock, std::chrono::milliseconds(250));
    if (done_) return;
    lock.unlock();
    int pending = 0;
    double waited = 1e300;  // how long the most recent pending request has waited
    std::string folders;
    for (const ExchangeLlmClient* x : exchange_) {
      ExchangeLlmClient::Stats s = x->stats();
      if (s.pending == 0) continue;
      pending += s.pending;
      waited = std::min(waited, s.newest_pending_seconds);
      folders += (folders.empty() ? "" : " and ") + x->folder();
    }
    int busy = judging_.load();
    for (const HttpLlmClient* h : http_) {
      HttpLlmClient::Stats s = h->stats();
      busy += s.in_flight + s.queued;
    }
    if (pending > 0 && busy == 0 && waited >= wait_seconds_) {
      char text[160];
      std::snprintf(text, sizeof(text), "%d request%s waited %.0f s or more for replies in ",
                    pending, pending == 1 ? " has" : "s have", wait_seconds_);
      StopFor(Reason::kReplies, text + folders);
    }
    lock.lock();
  }
}

}  // namespace ksearch::cli
