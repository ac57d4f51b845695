// Collecting the results of asynchronous LLM requests in the client tests.
#ifndef KSEARCH_TESTS_LLM_COLLECTOR_H_
#define KSEARCH_TESTS_LLM_COLLECTOR_H_

#include <gtest/gtest.h>

#include <chrono>
#include <condition_variable>
#include <mutex>
#include <vector>

#include "ksearch/llm_client.h"

namespace ksearch::testing {

// Collects the results of many asynchronous requests.
class Collector {
 public:
  LlmClient::Callback Callback() {
    return [this](StatusOr<ChatResponse> result) {
      std::lock_guard<std::mutex> lock(mutex_);
      results_.push_back(std::move(result));
      changed_.notify_all();
    };
  }
  // Waits (at most 20 s) for `n` results and returns them.
  std::vector<StatusOr<ChatResponse>> WaitFor(size_t n) {
    std::unique_lock<std::mutex> lock(mutex_);
    bool done = changed_.wait_for(lock, std::chrono::seconds(20),
                                  [&] { return results_.size() >= n; });
    EXPECT_TRUE(done) << "only " << results_.size() << " of " << n << " callbacks arrived";
    return results_;
  }
  size_t size() {
    std::lock_guard<std::mutex> lock(mutex_);
    return results_.size();
  }

 private:
  std::mutex mutex_;
  std::condition_variable changed_;
  std::vector<StatusOr<ChatResponse>> results_;
};

}  // namespace ksearch::testing

#endif  // KSEARCH_TESTS_LLM_COLLECTOR_H_
