#include "run_progress.h"

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <optional>

#include "run_llm.h"

namespace ksearch::cli {
namespace {

// "45 s", "3.2 min", "1.5 h".
std::string Duration(double seconds) {
  char text[32];
  if (seconds < 60) {
    std::snprintf(text, sizeof(text), "%.0f s", seconds);
  } else if (seconds < 3600) {
    std::snprintf(text, sizeof(text), "%.1f min", seconds / 60);
  } else {
    std::snprintf(text, sizeof(text), "%.1f h", seconds / 3600);
  }
  return text;
}

}  // namespace

Progress::Progress(bool quiet, double every_seconds, const SearchBudget& budget,
                   std::vector<const LlmClient*> clients, std::vector<const HttpLlmClient*> http,
                   std::vector<const ExchangeLlmClient*> exchange)
    : quiet_(quiet),
      tty_(::isatty(STDERR_FILENO) != 0),
      budget_(budget),
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
  ++rounds_done_;
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
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  const LlmTotals totals = SumTotals(clients_);
  std::string line = RoundText() + " | " + CountsText() + " | " + BestText() + LlmText(totals) +
                     WaitingText() + BudgetText(seconds, totals);
  std::fprintf(stderr, "%s%s | %.1f s%s", tty_ ? "\r\033[K" : "", line.c_str(), seconds,
               tty_ ? "" : "\n");
  std::fflush(stderr);
}

std::string Progress::RoundText() const {
  // Rounds count from 0 inside the search, from 1 on the line.
  std::string text = "round " + std::to_string(round_ + 1);
  if (budget_.max_rounds > 0) text += " of " + std::to_string(budget_.max_rounds);
  return text;
}

std::string Progress::CountsText() const {
  char counts[128];
  if (compiled_ > 0) {
    std::snprintf(counts, sizeof(counts), "evaluated %d (ok %d, compiled %d, failed %d)",
                  evaluated_, ok_, compiled_, failed_);
  } else {
    std::snprintf(counts, sizeof(counts), "evaluated %d (ok %d, failed %d)", evaluated_, ok_,
                  failed_);
  }
  return counts;
}

std::string Progress::BestText() const {
  char best[192] = "no correct kernel yet";
  if (!best_.empty() && best_ms_ > 0) {
    std::snprintf(best, sizeof(best), "best %s %.4f ms (%.2fx vs %s)", best_.c_str(), best_ms_,
                  speedup_, baseline_.c_str());
  } else if (!best_.empty()) {
    std::snprintf(best, sizeof(best), "best compiled %s (never run)", best_.c_str());
  }
  return best;
}

std::string Progress::LlmText(const LlmTotals& totals) const {
  if (clients_.empty()) return "";
  char text[256];
  int n = std::snprintf(text, sizeof(text), " | %lld tokens, $%.4f",
                        static_cast<long long>(totals.input_tokens + totals.output_tokens),
                        totals.cost_usd);
  if (http_.empty() || n < 0 || static_cast<size_t>(n) >= sizeof(text)) return text;
  HttpLlmClient::Stats s;
  for (const HttpLlmClient* h : http_) {
    HttpLlmClient::Stats one = h->stats();
    s.in_flight += one.in_flight;
    s.queued += one.queued;
    s.waiting_to_retry += one.waiting_to_retry;
    s.retries += one.retries;
    s.timeouts += one.timeouts;
    s.last_retry_delay_seconds = std::max(s.last_retry_delay_seconds, one.last_retry_delay_seconds);
  }
  std::snprintf(text + n, sizeof(text) - static_cast<size_t>(n),
                " | LLM %d in flight, %d queued, %d waiting to retry (%lld retries, "
                "%lld time-outs, last wait %.1f s)",
                s.in_flight, s.queued - s.waiting_to_retry, s.waiting_to_retry,
                static_cast<long long>(s.retries), static_cast<long long>(s.timeouts),
                s.last_retry_delay_seconds);
  return text;
}

std::string Progress::WaitingText() const {
  std::string waiting;
  for (const ExchangeLlmClient* x : exchange_) {
    ExchangeLlmClient::Stats s = x->stats();
    // Nothing pending: between one reply and the next request (a round's
    // end) "0 requests awaiting replies" would read as a stall.
    if (s.pending <= 0) continue;
    char line[96];
    std::snprintf(line, sizeof(line), " | %d request%s awaiting replies in ", s.pending, s.pending == 1 ? "" : "s");
    waiting += line + x->folder();
    std::snprintf(line, sizeof(line), " (the oldest for %.0f s)", s.oldest_pending_seconds);
    waiting += line;
  }
  return waiting;
}

std::string Progress::BudgetText(double seconds, const LlmTotals& totals) const {
  // What is left of each budget that was set, and the time until the first
  // one runs out at this session's pace so far (an estimate: on a resume
  // the replayed rounds go faster than new ones).
  std::vector<std::string> left;
  std::optional<double> eta;
  auto sooner = [&eta](double s) { eta = eta ? std::min(*eta, s) : s; };
  if (budget_.max_rounds > 0 && rounds_done_ > 0) {
    sooner(seconds / rounds_done_ * std::max(0, budget_.max_rounds - rounds_done_));
  }
  if (budget_.max_wall_seconds > 0) {
    const double wall = std::max(0.0, budget_.max_wall_seconds - seconds);
    left.push_back(Duration(wall));
    sooner(wall);
  }
  if (budget_.max_candidates > 0) {
    const int64_t candidates = std::max<int64_t>(0, budget_.max_candidates - evaluated_);
    left.push_back(std::to_string(candidates) + " candidates");
    if (evaluated_ > 0) sooner(seconds / evaluated_ * static_cast<double>(candidates));
  }
  if (budget_.max_tokens > 0) {
    left.push_back(std::to_string(std::max<int64_t>(
                       0, budget_.max_tokens - totals.input_tokens - totals.output_tokens)) +
                   " tokens");
  }
  if (budget_.max_cost_usd > 0) {
    char usd[32];
    std::snprintf(usd, sizeof(usd), "$%.2f", std::max(0.0, budget_.max_cost_usd - totals.cost_usd));
    left.push_back(usd);
  }
  std::string text;
  if (!left.empty()) {
    text += " | left:";
    for (size_t i = 0; i < left.size(); ++i) text += (i ? ", " : " ") + left[i];
  }
  if (eta) text += " | ETA " + Duration(*eta);
  return text;
}

}  // namespace ksearch::cli
