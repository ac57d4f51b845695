// Recordings of LLM exchanges: one JSON line per exchange (docs/llm.md), a
// recorder that appends every exchange a client sees, and loading and saving
// whole files. ReplayLlmClient (ksearch/replay_llm_client.h) serves them.
#ifndef KSEARCH_LLM_RECORDING_H_
#define KSEARCH_LLM_RECORDING_H_

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "ksearch/llm_client.h"
#include "ksearch/status.h"

namespace ksearch {

// One exchange as one line of JSON (no newline): see docs/llm.md for the
// fields. Never contains a key: exchanges carry none.
std::string ExchangeToJsonLine(const LlmExchange& exchange);
// The inverse. `request_hash` is recomputed from the request, so a hand-edited
// recording stays consistent. Errors: kDataLoss (not JSON), kInvalidArgument
// (a field missing or of the wrong type, named in the message).
[[nodiscard]] StatusOr<LlmExchange> ExchangeFromJsonLine(std::string_view line);
// A whole JSONL recording; blank lines are skipped. Errors as above, prefixed
// with "PATH:LINE", or kNotFound.
[[nodiscard]] StatusOr<std::vector<LlmExchange>> LoadLlmRecording(const std::string& path);
// Writes (replaces) a JSONL recording. Errors: kPermissionDenied / kUnknown
// from the file system.
[[nodiscard]] Status SaveLlmRecording(const std::string& path,
                                      const std::vector<LlmExchange>& exchanges);

// Appends every exchange it sees to a JSONL file, one flushed line each.
// Use: client->SetObserver(recorder->observer()).
// Thread safety: Record() and observer() may be used from many threads. The
// recorder must outlive every client that has its observer.
class LlmRecorder {
 public:
  // Opens (creating or appending to) `path`. Errors: kPermissionDenied,
  // kNotFound (missing folder).
  [[nodiscard]] static StatusOr<std::unique_ptr<LlmRecorder>> Open(const std::string& path);
  ~LlmRecorder();
  LlmRecorder(const LlmRecorder&) = delete;
  LlmRecorder& operator=(const LlmRecorder&) = delete;

  void Record(const LlmExchange& exchange);
  // An observer that calls Record(); borrows this recorder.
  LlmClient::ExchangeObserver observer();
  // Exchanges written so far.
  int64_t recorded() const;
  // OK, or the first write error (later exchanges are dropped after one).
  Status status() const;

 private:
  struct State;
  explicit LlmRecorder(std::unique_ptr<State> state);
  std::unique_ptr<State> state_;
};

}  // namespace ksearch

#endif  // KSEARCH_LLM_RECORDING_H_
