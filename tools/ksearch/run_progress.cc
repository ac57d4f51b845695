#include "run_progress.h"

#include <unistd.h>

#include <algorithm>
#include <cstdio>

namespace ksearch::cli {

Progress::Progress(bool quiet, double every_seconds, std::vector<const LlmClient*> clients,
                   std::vector<const HttpLlmClient*> http,
                   std::vector<const ExchangeLlmClient*> exchange)
    : quiet_(quiet),
      tty_(::isatty(STDERR_FILENO) != 0),
      clients_(std::move(clients)),
      http_(std::move(http)),
      exchange_(std::move(exchange)) {
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

Progress::~Progress() { StopTicker(); }

ObserverAction Progress::OnRoundStart(int round, const std::vector<std::string>&) {
  std::lock_guard<std::mutex> lock(mutex_);
  round_ = round;
  PrintLocked(false);
  return ObserverAction::kContinue;
}

ObserverAction Progress::OnCandidateEvaluated(const Candidate&, const Evaluation& e) {
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

ObserverAction Progress::OnNewBest(const Candidate& c, const Evaluation& e) {
  std::lock_guard<std::mutex> lock(mutex_);
  best_ = c.id;
  best_ms_ = e.timing ? e.timing->median_ms : 0.0;
  if (e.speedup) {
    speedup_ = e.speedup->ratio;
    baseline_ = e.speedup->baseline;
  }
  return ObserverAction::kContinue;
}

ObserverAction Progress::OnRoundEnd(int) {
  std::lock_guard<std::mutex> lock(mutex_);
  PrintLocked(true);
  return ObserverAction::kContinue;
}

void Progress::Finish() {
  StopTicker();
  if (tty_ && !quiet_) std::fprintf(stderr, "\n");
}

void Progress::StopTicker() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_ = true;
  }
  tick_.notify_all();
  if (ticker_.joinable()) ticker_.join();
}

void Progress::PrintLocked(bool round_done, bool tick) {
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
  std::string waiting;
  for (const ExchangeLlmClient* x : exchange_) {
    ExchangeLlmClient::Stats s = x->stats();
    char line[96];
    std::snprintf(line, sizeof(line), " | %d request%s awaiting replies in ", s.pending,
                  s.pending == 1 ? "" : "s");
    waiting += line + x->folder();
    if (s.pending > 0) {
      std::snprintf(line, sizeof(line), " (the oldest for %.0f s)", s.oldest_pending_seconds);
      waiting += line;
    }
  }
  char counts[96];
  if (compiled_ > 0) {
    std::snprintf(counts, sizeof(counts), "ok %d, compiled %d, failed %d", ok_, compiled_, failed_);
  } else {
    std::snprintf(counts, sizeof(counts), "ok %d, failed %d", ok_, failed_);
  }
  std::fprintf(stderr, "%sround %d | evaluated %d (%s) | %s%s%s | %.1f s%s",
               tty_ ? "\r\033[K" : "", round_, evaluated_, counts, best, llm, waiting.c_str(),
               seconds, tty_ ? "" : "\n");
  std::fflush(stderr);
}

}  // namespace ksearch::cli
