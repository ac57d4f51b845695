// Small pieces behind the strategies: figures read off an evaluation, the
// first error line of a log, and the threading tools the parallel loop runs
// on. The bookkeeping every strategy shares is public: SearchRun
// (ksearch/searcher.h).
#ifndef KSEARCH_SEARCH_SEARCH_UTIL_H_
#define KSEARCH_SEARCH_SEARCH_UTIL_H_

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "ksearch/evaluation.h"

namespace ksearch::internal {

using Clock = std::chrono::steady_clock;

inline double SecondsSince(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

// Median time in ms, or 0 when the evaluation was not timed.
double MedianMs(const Evaluation& evaluation);
// Registers per thread summed over the plan's kernels; INT64_MAX when unknown.
int64_t TotalRegisters(const Evaluation& evaluation);
// Local (stack) bytes summed over the kernels; INT64_MAX when unknown.
int64_t TotalLocalBytes(const Evaluation& evaluation);

// The first line of `text` that mentions "error" (else the first non-empty
// line), cut to `max_bytes`.
std::string FirstErrorLine(std::string_view text, size_t max_bytes = 160);

// Closures posted from any thread, run on the thread that calls RunFor (the
// searcher's own thread, which therefore owns all round state).
class Mailbox {
 public:
  void Post(std::function<void()> closure);
  // Runs everything posted; when nothing is, waits up to `timeout` for a
  // post first. Returns how many closures ran.
  int RunFor(std::chrono::milliseconds timeout);

 private:
  std::mutex mutex_;
  std::condition_variable wake_;
  std::deque<std::function<void()>> queue_;
};

}  // namespace ksearch::internal

#endif  // KSEARCH_SEARCH_SEARCH_UTIL_H_
