// Answering an exchange folder (ksearch/exchange_llm_client.h) with an
// ordinary LlmClient, on a machine that reaches the provider: what
// `ksearch answer DIR --llm openai:MODEL` does. docs/llm.md ("The exchange
// provider") describes the workflow.
#ifndef KSEARCH_EXCHANGE_ANSWER_H_
#define KSEARCH_EXCHANGE_ANSWER_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "ksearch/llm_client.h"
#include "ksearch/price_table.h"
#include "ksearch/status.h"

namespace ksearch {

struct AnswerOptions {
  // The model every request is sent to. Empty: the one the request names
  // (then the client's default when that is empty too).
  std::string model;
  // Seconds per attempt until the whole reply is read (request files carry
  // no time-out).
  double timeout_seconds = 240.0;
  // Requests sent at once.
  int max_in_flight = 8;
  // Keep looking for new request files (every poll_interval_seconds) until
  // `stop` becomes true; otherwise return once every request pending at the
  // start has been tried.
  bool watch = false;
  double poll_interval_seconds = 0.5;
  // With `watch`: a request whose answer failed (an outage, a rate limit
  // that outlasted the client's retries) is tried again after this long.
  double retry_failed_after_seconds = 60.0;
  // Budgets of this call; 0: none. A request is not started unless its
  // prompt (bytes / 4 tokens) plus its max_tokens — and their price, for the
  // money budget — still fits in what remains after the replies received
  // and the requests in flight; it stays pending.
  int64_t max_tokens = 0;
  double max_cost_usd = 0.0;
  // Prices for the money budget's estimate (the client prices the replies).
  PriceTable prices;
  // Set to stop: requests in flight are cancelled (they stay pending).
  const std::atomic<bool>* stop = nullptr;
};

// One request finished (answered or not), for progress lines.
struct AnswerEvent {
  std::string name;     // the request file's NAME
  std::string tag;
  // The provider's reply, or why there is none.
  StatusOr<ChatResponse> reply = Status(StatusCode::kUnknown, "not set");
  // A reply file was written: the response, or (for a request the provider
  // refuses for good) the error, which the search then gets as its own.
  bool reply_written = false;
};

struct AnswerSummary {
  int64_t answered = 0;       // replies written with the model's text
  int64_t refused = 0;        // error replies written: the provider refused the request
  int64_t failed = 0;         // requests that stay pending after a failure
  int64_t over_budget = 0;    // requests left pending: the budget would not cover them
  int64_t bad_requests = 0;   // request files that could not be read (named in notes)
  int64_t pending = 0;        // requests without a reply at the end
  LlmTotals totals;           // what the client billed during this call
  // A failure every later request would share (a key, a quota, a model name:
  // FailureScope kRun) stopped the answering; OK otherwise.
  Status stopped_by;
  // One line per request file that could not be read, or per note worth
  // telling (a request's model replaced by AnswerOptions::model).
  std::vector<std::string> notes;
};

// Answers the folder's pending requests with `client` and writes each reply
// to DIR/replies/NAME.json atomically (never replacing a reply that
// appeared meanwhile). Provider errors that are the request's own —
// kOutOfRange (cut at max_tokens, context length), kDataLoss (empty,
// refused), kUnimplemented, kInvalidArgument — are written as error replies,
// so the search meets them as it would meet them directly; other failures
// leave the request pending. `on_event` (may be empty) runs on the calling
// thread after each request. Errors: kNotFound (no DIR/requests), the OS
// error listing the folder.
[[nodiscard]] StatusOr<AnswerSummary> AnswerExchangeFolder(
    const std::string& folder, LlmClient& client, const AnswerOptions& options,
    const std::function<void(const AnswerEvent&)>& on_event = {});

}  // namespace ksearch

#endif  // KSEARCH_EXCHANGE_ANSWER_H_
