// When a search stops by itself to wait: for replies in an exchange folder
// (--exchange-wait), or for a GPU to judge on (a resume on a machine without
// one). Either way the run stays resumable; the exit code says which
// (docs/cli.md: 9 and 10).
#ifndef KSEARCH_TOOLS_RUN_WAIT_H_
#define KSEARCH_TOOLS_RUN_WAIT_H_

#include <atomic>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "ksearch/evaluator.h"
#include "ksearch/exchange_llm_client.h"
#include "ksearch/http_llm_client.h"
#include "ksearch/status.h"

namespace ksearch::cli {

// Stops a search (sets its cancel flag) when it has nothing to do but wait.
// A thread of its own looks four times a second. Thread safety: NeedGpu()
// and Watch()'s evaluator may be used from any thread.
class WaitWatch {
 public:
  enum class Reason { kNone, kReplies, kGpu };

  // `stop`: the search's cancel flag. `exchange`: the clients whose requests
  // are files; with `wait_seconds` > 0 the search stops once each of their
  // pending requests has waited that long while no candidate is being
  // judged and no `http` request is in flight or queued. The clients must
  // outlive this object.
  WaitWatch(std::atomic<bool>* stop, std::vector<const ExchangeLlmClient*> exchange,
            std::vector<const HttpLlmClient*> http, double wait_seconds);
  ~WaitWatch();
  WaitWatch(const WaitWatch&) = delete;
  WaitWatch& operator=(const WaitWatch&) = delete;

  // `inner`, counted while it judges (the watch never stops a search that is
  // judging). Borrows `inner` and this watch, which must outlive it.
  std::unique_ptr<Evaluator> Watch(Evaluator& inner);
  // For RunSession::WrapDeferredEvaluator: no evaluator can be made here.
  void NeedGpu(const Status& why);

  Reason reason() const;
  // Why the search stopped, in one sentence ("" for kNone).
  std::string message() const;

 private:
  class CountingEvaluator;
  void Loop();
  void StopFor(Reason reason, std::string message);

  std::atomic<bool>* stop_;
  std::vector<const ExchangeLlmClient*> exchange_;
  std::vector<const HttpLlmClient*> http_;
  double wait_seconds_;
  std::atomic<int> judging_{0};
  mutable std::mutex mutex_;
  std::condition_variable wake_;
  bool done_ = false;
  Reason reason_ = Reason::kNone;
  std::string message_;
  std::thread thread_;
};

}  // namespace ksearch::cli

#endif  // KSEARCH_TOOLS_RUN_WAIT_H_
