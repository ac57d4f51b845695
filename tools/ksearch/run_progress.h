// The live progress line of `ksearch run` and `ksearch resume`.
#ifndef KSEARCH_TOOLS_RUN_PROGRESS_H_
#define KSEARCH_TOOLS_RUN_PROGRESS_H_

#include <chrono>
#include <condition_variable>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "ksearch/exchange_llm_client.h"
#include "ksearch/http_llm_client.h"
#include "ksearch/searcher.h"

namespace ksearch::cli {

// The live progress line: rewritten in place on a terminal, one line per
// round otherwise (logs, CI), plus one every --progress-every seconds (30
// by default), so that a log shows a model that is still thinking. Thread safety: the observer callbacks may come from any
// thread; the ticker thread prints under the same mutex.
class Progress final : public SearchObserver {
 public:
  // `clients` are summed on the line; `http` (may be empty) add requests in
  // flight, retries and waits; `exchange` (may be empty) the requests
  // waiting for replies in their folders. On a terminal a ticker thread
  // redraws the line every second, so that the elapsed time moves while the
  // model thinks; elsewhere it prints a line every `every_seconds` (0:
  // never). The clients must outlive this object. The line says how much of
  // `budget` is left and when the first budget should run out.
  Progress(bool quiet, double every_seconds, const SearchBudget& budget,
           std::vector<const LlmClient*> clients, std::vector<const HttpLlmClient*> http,
           std::vector<const ExchangeLlmClient*> exchange = {});
  ~Progress() override;

  ObserverAction OnRoundStart(int round, const std::vector<std::string>&) override;
  ObserverAction OnCandidateEvaluated(const Candidate&, const Evaluation& e) override;
  ObserverAction OnNewBest(const Candidate& c, const Evaluation& e) override;
  ObserverAction OnRoundEnd(int) override;
  // Stops the ticker and ends the line on a terminal.
  void Finish();

 private:
  void StopTicker();
  // With mutex_ held (observer callbacks and the ticker both print). The
  // line: "round 2 of 6 | evaluated … | best … | LLM … | 4 requests awaiting
  // replies in DIR … | left: … | ETA … | 12.3 s".
  void PrintLocked(bool round_done, bool tick = false);
  std::string RoundText() const;
  std::string CountsText() const;
  std::string BestText() const;
  std::string LlmText(const LlmTotals& totals) const;
  std::string WaitingText() const;
  std::string BudgetText(double seconds, const LlmTotals& totals) const;

  bool quiet_;
  bool tty_;
  SearchBudget budget_;
  std::vector<const LlmClient*> clients_;
  std::vector<const HttpLlmClient*> http_;
  std::vector<const ExchangeLlmClient*> exchange_;
  std::mutex mutex_;
  std::condition_variable tick_;
  bool stop_ = false;
  std::thread ticker_;
  int round_ = 0, rounds_done_ = 0, evaluated_ = 0, ok_ = 0, compiled_ = 0, failed_ = 0;
  std::string best_, baseline_;
  double best_ms_ = 0.0, speedup_ = 0.0;
  std::chrono::steady_clock::time_point start_ = std::chrono::steady_clock::now();
};

}  // namespace ksearch::cli

#endif  // KSEARCH_TOOLS_RUN_PROGRESS_H_
