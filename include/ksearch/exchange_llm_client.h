// ExchangeLlmClient: an LlmClient whose requests are files in a folder and
// whose replies are files written there by someone else — another machine
// that reaches the provider (`ksearch answer`, ksearch/exchange_answer.h), a
// gateway owned by another team, or a person. For GPU hosts that reach no
// provider, and for reviewing prompts before paying for them. docs/llm.md
// ("The exchange provider") describes the folder and its file formats.
//
//   DIR/requests/NAME.json   written by the search (atomically)
//   DIR/replies/NAME.json    the reply: the assistant's text and usage
//   DIR/replies/NAME.txt     or the assistant's text alone (usage unknown)
//
// NAME is a function of the request alone (ExchangeRequestName): a search
// stopped while it waits and resumed later asks for the same files, and
// finds the replies written meanwhile.
#ifndef KSEARCH_EXCHANGE_LLM_CLIENT_H_
#define KSEARCH_EXCHANGE_LLM_CLIENT_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "ksearch/llm_client.h"
#include "ksearch/price_table.h"
#include "ksearch/status.h"

namespace ksearch {

namespace internal {
class ExchangeLlmClientImpl;
}  // namespace internal

// ---- The files.

// "<tag>-<the first 16 hex digits of RequestHash>", the tag made safe for a
// file name (letters, digits, '.', '_' and '-' kept, anything else '-', at
// most 64 characters): "branch-r0.s0.i1.b0-3f2a9c0d1e2b4a5c". Requests with
// the same hash and tag share a name (and so a reply).
std::string ExchangeRequestName(const ChatRequest& request);

// A request file's text: name, tag, request_hash, the model settings and the
// conversation (docs/llm.md shows one). ChatRequest::timeout_seconds is not
// written: how long a reply may take is up to whoever answers.
std::string ExchangeRequestToJson(const ChatRequest& request);
// The inverse. `origin` (a path) prefixes errors. Errors: kInvalidArgument
// naming the field (not JSON, a field missing or of the wrong type, a version
// other than 1), kFailedPrecondition when request_hash does not match the
// content (the file was edited after ksearch wrote it).
[[nodiscard]] StatusOr<ChatRequest> ExchangeRequestFromJson(std::string_view text,
                                                            std::string_view origin);

// A JSON reply file's text: the response (content, usage, finish reason,
// model, cost, latency), or {"error": {"code", "message"}} for a request the
// provider refused for good (see ksearch/exchange_answer.h).
std::string ExchangeReplyToJson(const StatusOr<ChatResponse>& reply);
// What a reply file holds: the reply — a response, or the error the
// answering side recorded — and whether its usage is known.
struct ExchangeReply {
  StatusOr<ChatResponse> reply = Status(StatusCode::kUnknown, "not set");
  // False for a plain-text reply: its tokens are unknown (counted as 0).
  bool usage_known = true;
};
// Reads a reply file: `path` ends in ".json" (ExchangeReplyToJson's format;
// content, input_tokens and output_tokens are required; finish_reason,
// model, cost_usd, latency_ms and attempts are optional) or ".txt" (the
// whole file is the assistant's text). The response is returned as written
// (a finish reason "length" or an empty content included: the client
// decides what they mean). Errors, when the file itself is bad, name the
// file and the field: kDataLoss (not JSON, not UTF-8 text), kUnimplemented
// (a field missing, of the wrong type or with an unknown value), kNotFound,
// kPermissionDenied, kInvalidArgument (larger than 16 MiB).
[[nodiscard]] StatusOr<ExchangeReply> ReadExchangeReply(const std::string& path);

// One request file of a folder and its reply, if any.
struct ExchangeFile {
  std::string name;          // NAME
  std::string request_path;  // DIR/requests/NAME.json
  std::string reply_path;    // DIR/replies/NAME.json or .txt; empty while pending
};
// The folder's request files (sorted by name) with their replies. Files
// whose names do not end in ".json" (temporary files of an atomic write
// among them) are ignored. Errors: kNotFound (no DIR/requests), kUnknown.
[[nodiscard]] StatusOr<std::vector<ExchangeFile>> ListExchangeFolder(const std::string& folder);
// Every answered request of a folder as an exchange (provider "exchange",
// request ids in name order), for ReplayLlmClient: a search recorded through
// an exchange folder replays from the folder itself. Errors: the first bad
// request or reply file, by name.
[[nodiscard]] StatusOr<std::vector<LlmExchange>> LoadExchangeFolder(const std::string& folder);

// ---- The client.

// Writes each request to DIR/requests/NAME.json and delivers the reply when
// DIR/replies/NAME.json or NAME.txt appears (a reply already there is
// delivered at once). A reply file is read only once two polls in a row
// found it the same size and age, so a file written in place is not read
// half-written; writers should still write elsewhere and rename.
//
// A delivered response's latency_ms is how long its request waited in this
// client; its cost is the reply's cost_usd, else priced from
// Options::prices. A finish reason "length" is kOutOfRange and an empty
// content kDataLoss, as from a provider; their tokens are still counted in
// totals().
//
// Requests never time out (ChatRequest::timeout_seconds is ignored): a
// search that should stop waiting watches stats() and stops itself, and a
// resumed search asks for the same files again. Cancel() delivers kCancelled
// and leaves the request file in place, unless the reply is in the folder
// already: a reply that has arrived is delivered (it may be paid for, and a
// resumed run would otherwise ask for it again). A bad reply file fails its request
// (ReadExchangeReply's errors); so does a request file that cannot be
// written (the OS error). A request file already there with other text
// (edited, or written by another version) is replaced.
//
// Callbacks and the observer run on the client's polling thread, never
// inside Complete(). Thread safety: as LlmClient. The destructor cancels what
// is pending and joins the thread (from one of its own callbacks it lets the
// thread finish by itself).
class ExchangeLlmClient final : public LlmClient {
 public:
  struct Options {
    // DIR; requests/ and replies/ are created in it when missing.
    std::string folder;
    // How often pending replies are looked for.
    double poll_interval_seconds = 0.5;
    // Model written into requests whose ChatRequest::model is empty (empty:
    // none; whoever answers chooses).
    std::string default_model;
    // Prices replies that carry usage but no cost_usd, by the reply's model,
    // else the request's.
    PriceTable prices;
  };

  // A snapshot, for progress lines and for deciding to stop waiting.
  struct Stats {
    int pending = 0;                 // requests waiting for a reply file
    double oldest_pending_seconds = 0.0;  // how long the first of them has waited
    double newest_pending_seconds = 0.0;  // how long the last one asked has waited
    int64_t requests_written = 0;    // request files written (or found already written)
    int64_t replies_read = 0;        // replies delivered (recorded errors included)
    int64_t bad_replies = 0;         // reply files that failed their request
    int64_t replies_without_usage = 0;  // plain-text replies: their tokens are unknown
  };

  // Creates DIR/requests and DIR/replies and starts the polling thread.
  // Errors: kInvalidArgument (no folder, a bad interval), the OS error
  // creating the folders (kPermissionDenied, kNotFound, …), kInternal (no
  // thread).
  [[nodiscard]] static StatusOr<std::unique_ptr<ExchangeLlmClient>> Create(Options options);
  ~ExchangeLlmClient() override;
  ExchangeLlmClient(const ExchangeLlmClient&) = delete;
  ExchangeLlmClient& operator=(const ExchangeLlmClient&) = delete;

  uint64_t Complete(ChatRequest request, Callback done) override;
  void Cancel(uint64_t request_id) override;
  LlmTotals totals() const override;
  void SetObserver(ExchangeObserver observer) override;
  std::string provider() const override;  // "exchange"

  Stats stats() const;
  const std::string& folder() const;
  // Names of the request files this client wrote or found, in the order
  // Complete() was called (repeated names once).
  std::vector<std::string> requested() const;

 private:
  explicit ExchangeLlmClient(std::shared_ptr<internal::ExchangeLlmClientImpl> impl);
  std::shared_ptr<internal::ExchangeLlmClientImpl> impl_;
};

}  // namespace ksearch

#endif  // KSEARCH_EXCHANGE_LLM_CLIENT_H_
