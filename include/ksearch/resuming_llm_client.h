// ResumingLlmClient: an LlmClient that serves a resumed run's stored replies
// and records the live ones in the Store (RunSession::WrapLlmClient makes
// one).
#ifndef KSEARCH_RESUMING_LLM_CLIENT_H_
#define KSEARCH_RESUMING_LLM_CLIENT_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "ksearch/llm_client.h"
#include "ksearch/status.h"
#include "ksearch/store.h"

namespace ksearch {

class RunSession;

// An LlmClient decorator for resumable runs: a request whose RequestHash
// matches a stored, successful, not yet served exchange of the run is answered
// from it (by a ReplayLlmClient, in the order the originals were issued,
// preferring the same tag); any other request goes to the live client. Every
// exchange the live client finishes is written to the store (before the
// request's callback runs) and then passed to the observer set with
// SetObserver. Stored failures are not replayed: those requests go live again.
//
// Callbacks run on the replay client's thread or on the live client's I/O
// thread. totals() adds both. Thread safety: as LlmClient. Borrows `live` and
// the store, which must outlive it; it installs its own observer on `live`
// (and removes it when destroyed).
class ResumingLlmClient final : public LlmClient {
 public:
  // `recorded`: the run's exchanges in replay order (Store::LoadExchanges).
  // `session`: the session number to record live exchanges under. Errors:
  // kInternal (no thread could be started).
  [[nodiscard]] static StatusOr<std::unique_ptr<ResumingLlmClient>> Create(
      LlmClient& live, Store& store, int64_t run_id, int session, std::vector<LlmExchange> recorded);
  ~ResumingLlmClient() override;

  uint64_t Complete(ChatRequest request, Callback done) override;
  void Cancel(uint64_t request_id) override;
  LlmTotals totals() const override;
  void SetObserver(ExchangeObserver observer) override;
  std::string provider() const override;  // the live client's
  std::optional<double> EstimateCostUsd(std::string_view model, int64_t input_tokens,
                                        int64_t output_tokens) const override;  // the live client's

  // Requests answered from the store, and sent to the live client.
  int64_t replayed() const;
  int64_t forwarded() const;
  // OK, or the first error writing an exchange.
  Status status() const;

 private:
  friend class RunSession;
  struct State;
  explicit ResumingLlmClient(std::shared_ptr<State> state);
  std::shared_ptr<State> state_;
};

}  // namespace ksearch

#endif  // KSEARCH_RESUMING_LLM_CLIENT_H_
