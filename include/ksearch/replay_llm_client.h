// ReplayLlmClient: an LlmClient that answers from a recording
// (ksearch/llm_recording.h), offline and deterministically.
#ifndef KSEARCH_REPLAY_LLM_CLIENT_H_
#define KSEARCH_REPLAY_LLM_CLIENT_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "ksearch/llm_client.h"
#include "ksearch/status.h"

namespace ksearch {

namespace internal {
class ReplayLlmClientImpl;
}  // namespace internal

// Serves recorded replies, offline and deterministically. A request is
// answered by an unserved exchange with the same RequestHash — preferring one
// recorded with the same tag — in the order the exchanges were issued
// (LlmExchange::request_id). Recorded errors are replayed as errors. A request
// with no recorded reply left gets kNotFound naming its hash (or, with
// `cycle_when_exhausted`, the recorded replies again from the first).
//
// Callbacks run on one thread owned by the client, in Complete() order.
// Thread safety: as LlmClient. The destructor delivers what is pending and
// joins its thread (from one of its own callbacks it lets the thread finish
// by itself).
class ReplayLlmClient final : public LlmClient {
 public:
  struct Options {
    // When every reply for a hash has been served, start again from the first
    // instead of failing with kNotFound.
    bool cycle_when_exhausted = false;
    // Prefer an exchange recorded with the same ChatRequest::tag.
    bool prefer_same_tag = true;
    // When no unserved exchange has the request's hash, serve the first
    // unserved one recorded with the same tag and model. Prompts that quote
    // measured figures (a parent's time, the history's speedups) differ from
    // run to run on a GPU; the tags ("idea r2 s1", "branch r1.s0.i2 b3") name
    // the request's place in the search tree, which a replay repeats.
    bool match_tag_when_hash_differs = false;
  };

  // Serves `exchanges`. Errors: kInternal (no thread could be started).
  [[nodiscard]] static StatusOr<std::unique_ptr<ReplayLlmClient>> Create(
      std::vector<LlmExchange> exchanges);
  [[nodiscard]] static StatusOr<std::unique_ptr<ReplayLlmClient>> Create(
      std::vector<LlmExchange> exchanges, Options options);
  // Loads a recording and serves it (LoadLlmRecording's errors).
  [[nodiscard]] static StatusOr<std::unique_ptr<ReplayLlmClient>> Open(const std::string& path);
  [[nodiscard]] static StatusOr<std::unique_ptr<ReplayLlmClient>> Open(const std::string& path,
                                                                       Options options);
  ~ReplayLlmClient() override;
  ReplayLlmClient(const ReplayLlmClient&) = delete;
  ReplayLlmClient& operator=(const ReplayLlmClient&) = delete;

  uint64_t Complete(ChatRequest request, Callback done) override;
  void Cancel(uint64_t request_id) override;
  LlmTotals totals() const override;
  void SetObserver(ExchangeObserver observer) override;
  std::string provider() const override;  // "replay"

  // Requests that found no recorded reply.
  int64_t misses() const;
  // Requests answered by tag because no recorded exchange had their hash.
  int64_t tag_matches() const;

 private:
  explicit ReplayLlmClient(std::shared_ptr<internal::ReplayLlmClientImpl> impl);
  std::shared_ptr<internal::ReplayLlmClientImpl> impl_;
};

}  // namespace ksearch

#endif  // KSEARCH_REPLAY_LLM_CLIENT_H_
