// The messages of the worker protocol (docs/workers.md): what each frame's
// JSON holds, and conversion both ways. Framing is in protocol.h.
//
// Conversation:
//   orchestrator                         worker
//   init {problem, options, device} -->
//                                    <-- ready {device, reference timing, …}
//                                        or fatal {code, message}, then exit
//   judge {seq, candidate, compiled} + cubin -->     (any number, in order)
//                                    <-- started {seq}
//                                    <-- result {seq, evaluation}
//                                    <-- bye {reason}, then exit, after a
//                                        sticky CUDA error or a hang
//   shutdown -->                         exit 0
//
// Thread safety: stateless functions.
#ifndef KSEARCH_WORKER_MESSAGES_H_
#define KSEARCH_WORKER_MESSAGES_H_

#include <cstdint>
#include <optional>
#include <string>

#include <boost/json/object.hpp>

#include "core/json_util.h"
#include "cuda/compiler.h"
#include "ksearch/candidate.h"
#include "ksearch/evaluation.h"
#include "ksearch/evaluator.h"
#include "ksearch/status.h"
#include "worker/protocol.h"

namespace ksearch::internal::worker {

struct InitMessage {
  std::string problem_json;  // Problem::ToJson(): self-contained
  EvaluatorOptions options;  // options.device_ordinal is the GPU to use
};

struct ReadyMessage {
  DeviceInfo device;
  std::optional<TimingStats> reference_timing;
  std::optional<TimingStats> baseline_timing;
  double launch_watchdog_seconds = 0.0;  // the worker's per-launch limit
  int visible_devices = 0;               // GPUs the worker's driver reports
  int64_t pid = 0;
  std::string version;  // ksearch::Version() of the worker
};

struct FatalMessage {
  StatusCode code = StatusCode::kInternal;
  std::string message;
};

struct JudgeMessage {
  uint64_t seq = 0;  // unique per dispatch; echoed by started and result
  Candidate candidate;
  // The orchestrator's compile (its cubin travels as the attachment); absent
  // when the worker compiles the source itself.
  std::optional<CompileResult> compiled;
};

struct StartedMessage {
  uint64_t seq = 0;
};

struct ResultMessage {
  uint64_t seq = 0;
  Evaluation evaluation;
};

struct ByeMessage {
  std::string reason;
};

Frame Encode(const InitMessage& m);
Frame Encode(const ReadyMessage& m);
Frame Encode(const FatalMessage& m);
Frame Encode(const JudgeMessage& m);
Frame Encode(const StartedMessage& m);
Frame Encode(const ResultMessage& m);
Frame Encode(const ByeMessage& m);
Frame ShutdownFrame();

// Each decoder checks the frame's type and its JSON. Errors: kInvalidArgument
// naming the message and the field; kInternal for a frame of another type.
// A candidate as JSON (id, source, plan, compile options, provenance), and
// back; also the job format of the Redis queue (lib/queue).
boost::json::object CandidateToJson(const Candidate& candidate);
StatusOr<Candidate> CandidateFromNode(const JsonNode& node);

StatusOr<InitMessage> DecodeInit(const Frame& frame);
StatusOr<ReadyMessage> DecodeReady(const Frame& frame);
StatusOr<FatalMessage> DecodeFatal(const Frame& frame);
StatusOr<JudgeMessage> DecodeJudge(const Frame& frame);
StatusOr<StartedMessage> DecodeStarted(const Frame& frame);
StatusOr<ResultMessage> DecodeResult(const Frame& frame);
StatusOr<ByeMessage> DecodeBye(const Frame& frame);

}  // namespace ksearch::internal::worker

#endif  // KSEARCH_WORKER_MESSAGES_H_
