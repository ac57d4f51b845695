#include "worker/messages.h"

#include <boost/json.hpp>

#include "core/json_util.h"
#include "core/evaluation_json.h"

namespace ksearch::internal::worker {
namespace {

Frame MakeFrame(MessageType type, const boost::json::object& body, std::string attachment = {}) {
  Frame frame;
  frame.type = type;
  frame.json = boost::json::serialize(body);
  frame.attachment = std::move(attachment);
  return frame;
}

// Parses the JSON of a frame of the expected type; the document must outlive
// the nodes taken from it.
StatusOr<std::unique_ptr<JsonDocument>> Open(const Frame& frame, MessageType expected) {
  if (frame.type != expected) {
    return InternalError("expected a '" + ToString(expected) + "' frame, got '" +
                         ToString(frame.type) + "'");
  }
  return JsonDocument::Parse(frame.json, "worker '" + ToString(expected) + "' message");
}

boost::json::object OptionsToJson(const EvaluatorOptions& o) {
  return {{"device_ordinal", o.device_ordinal},
          {"arch", o.arch},
          {"compile_only", o.compile_only},
          {"compile_timeout_seconds", o.compile_timeout_seconds},
          {"max_log_bytes", o.max_log_bytes},
          {"allow_unsandboxed_compile", o.allow_unsandboxed_compile},
          {"compile_memory_limit_bytes", o.compile_memory_limit_bytes},
          {"compile_cache_dir", o.compile_cache_dir},
          // As a string: Boost.JSON and simdjson would both read a large
          // u64 back, but a seed is an identifier, not a quantity.
          {"replay_input_seed", std::to_string(o.replay_input_seed)},
          {"trials_per_input_set", o.trials_per_input_set},
          {"warmup_ms", o.warmup_ms},
          {"max_warmup_seconds", o.max_warmup_seconds},
          {"target_ci_fraction", o.target_ci_fraction},
          {"min_repetitions", o.min_repetitions},
          {"max_repetitions", o.max_repetitions},
          {"max_timing_seconds", o.max_timing_seconds},
          {"max_check_seconds", o.max_check_seconds},
          {"timing_spot_check_probability", o.timing_spot_check_probability},
          {"timing_checked_runs", o.timing_checked_runs},
          {"device_printf_buffer_bytes", o.device_printf_buffer_bytes},
          {"max_device_output_bytes", o.max_device_output_bytes},
          {"capture_device_output", o.capture_device_output},
          {"flush_l2", o.flush_l2},
          {"time_baseline", o.time_baseline},
          {"watchdog_floor_seconds", o.watchdog_floor_seconds},
          {"watchdog_reference_multiple", o.watchdog_reference_multiple},
          {"suspicious_floor_fraction", o.suspicious_floor_fraction}};
}

StatusOr<EvaluatorOptions> OptionsFromNode(const JsonNode& n) {
  EvaluatorOptions o;
  std::string seed = "0";
  KSEARCH_RETURN_IF_ERROR(ReadMember(n, "device_ordinal", &o.device_ordinal));
  KSEARCH_RETURN_IF_ERROR(ReadMember(n, "arch", &o.arch));
  KSEARCH_RETURN_IF_ERROR(ReadMember(n, "compile_only", &o.compile_only));
  KSEARCH_RETURN_IF_ERROR(ReadMember(n, "compile_timeout_seconds", &o.compile_timeout_seconds));
  KSEARCH_RETURN_IF_ERROR(ReadMember(n, "max_log_bytes", &o.max_log_bytes));
  KSEARCH_RETURN_IF_ERROR(ReadMember(n, "allow_unsandboxed_compile", &o.allow_unsandboxed_compile));
  KSEARCH_RETURN_IF_ERROR(
      ReadMember(n, "compile_memory_limit_bytes", &o.compile_memory_limit_bytes));
  KSEARCH_RETURN_IF_ERROR(ReadMember(n, "compile_cache_dir", &o.compile_cache_dir));
  KSEARCH_RETURN_IF_ERROR(ReadMember(n, "replay_input_seed", &seed));
  o.replay_input_seed = std::strtoull(seed.c_str(), nullptr, 10);
  KSEARCH_RETURN_IF_ERROR(ReadMember(n, "trials_per_input_set", &o.trials_per_input_set));
  KSEARCH_RETURN_IF_ERROR(ReadMember(n, "warmup_ms", &o.warmup_ms));
  KSEARCH_RETURN_IF_ERROR(ReadMember(n, "max_warmup_seconds", &o.max_warmup_seconds));
  KSEARCH_RETURN_IF_ERROR(ReadMember(n, "target_ci_fraction", &o.target_ci_fraction));
  KSEARCH_RETURN_IF_ERROR(ReadMember(n, "min_repetitions", &o.min_repetitions));
  KSEARCH_RETURN_IF_ERROR(ReadMember(n, "max_repetitions", &o.max_repetitions));
  KSEARCH_RETURN_IF_ERROR(ReadMember(n, "max_timing_seconds", &o.max_timing_seconds));
  KSEARCH_RETURN_IF_ERROR(ReadMember(n, "max_check_seconds", &o.max_check_seconds));
  KSEARCH_RETURN_IF_ERROR(
      ReadMember(n, "timing_spot_check_probability", &o.timing_spot_check_probability));
  KSEARCH_RETURN_IF_ERROR(ReadMember(n, "timing_checked_runs", &o.timing_checked_runs));
  KSEARCH_RETURN_IF_ERROR(
      ReadMember(n, "device_printf_buffer_bytes", &o.device_printf_buffer_bytes));
  KSEARCH_RETURN_IF_ERROR(ReadMember(n, "max_device_output_bytes", &o.max_device_output_bytes));
  KSEARCH_RETURN_IF_ERROR(ReadMember(n, "capture_device_output", &o.capture_device_output));
  KSEARCH_RETURN_IF_ERROR(ReadMember(n, "flush_l2", &o.flush_l2));
  KSEARCH_RETURN_IF_ERROR(ReadMember(n, "time_baseline", &o.time_baseline));
  KSEARCH_RETURN_IF_ERROR(ReadMember(n, "watchdog_floor_seconds", &o.watchdog_floor_seconds));
  KSEARCH_RETURN_IF_ERROR(
      ReadMember(n, "watchdog_reference_multiple", &o.watchdog_reference_multiple));
  KSEARCH_RETURN_IF_ERROR(ReadMember(n, "suspicious_floor_fraction", &o.suspicious_floor_fraction));
  return o;
}

// Sequence numbers travel as strings for the same reason as seeds: JSON
// numbers are doubles to some readers.
StatusOr<uint64_t> ReadSeq(const JsonNode& n) {
  KSEARCH_ASSIGN_OR_RETURN(JsonNode seq, n.Required("seq"));
  KSEARCH_ASSIGN_OR_RETURN(std::string text, seq.String());
  char* end = nullptr;
  uint64_t value = std::strtoull(text.c_str(), &end, 10);
  if (text.empty() || *end != '\0')
    return seq.Error("expected a decimal sequence number, got " + seq.Describe());
  return value;
}

}  // namespace

boost::json::object CandidateToJson(const Candidate& c) {
  return {
      {"id", c.id},
      {"source", c.source},
      {"plan", c.plan.ToJson()},
      {"compile_options", boost::json::array(c.compile_options.begin(), c.compile_options.end())},
      {"provenance",
       {{"parent_id", c.provenance.parent_id},
        {"idea_id", c.provenance.idea_id},
        {"round", c.provenance.round},
        {"generator", c.provenance.generator}}}};
}

StatusOr<Candidate> CandidateFromNode(const JsonNode& n) {
  Candidate c;
  std::string plan;
  KSEARCH_RETURN_IF_ERROR(ReadMember(n, "id", &c.id));
  KSEARCH_RETURN_IF_ERROR(ReadMember(n, "source", &c.source));
  KSEARCH_RETURN_IF_ERROR(ReadMember(n, "plan", &plan));
  KSEARCH_ASSIGN_OR_RETURN(c.plan, LaunchPlan::FromJson(plan, "candidate '" + c.id + "' plan"));
  KSEARCH_ASSIGN_OR_RETURN(std::optional<JsonNode> options, n.Find("compile_options"));
  if (options) {
    KSEARCH_ASSIGN_OR_RETURN(std::vector<JsonNode> items, options->Array());
    for (const JsonNode& item : items) {
      KSEARCH_ASSIGN_OR_RETURN(std::string option, item.String());
      c.compile_options.push_back(std::move(option));
    }
  }
  KSEARCH_ASSIGN_OR_RETURN(std::optional<JsonNode> provenance, n.Find("provenance"));
  if (provenance) {
    KSEARCH_RETURN_IF_ERROR(ReadMember(*provenance, "parent_id", &c.provenance.parent_id));
    KSEARCH_RETURN_IF_ERROR(ReadMember(*provenance, "idea_id", &c.provenance.idea_id));
    KSEARCH_RETURN_IF_ERROR(ReadMember(*provenance, "round", &c.provenance.round));
    KSEARCH_RETURN_IF_ERROR(ReadMember(*provenance, "generator", &c.provenance.generator));
  }
  return c;
}


Frame Encode(const InitMessage& m) {
  return MakeFrame(MessageType::kInit,
                   {{"problem", m.problem_json}, {"options", OptionsToJson(m.options)}});
}

Frame Encode(const ReadyMessage& m) {
  boost::json::object o{{"device", DeviceInfoToJson(m.device)},
                        {"launch_watchdog_seconds", NumberToJson(m.launch_watchdog_seconds)},
                        {"visible_devices", m.visible_devices},
                        {"pid", m.pid},
                        {"version", m.version}};
  if (m.reference_timing) o["reference_timing"] = TimingToJson(*m.reference_timing);
  if (m.baseline_timing) o["baseline_timing"] = TimingToJson(*m.baseline_timing);
  return MakeFrame(MessageType::kReady, o);
}

Frame Encode(const FatalMessage& m) {
  return MakeFrame(MessageType::kFatal,
                   {{"code", static_cast<int>(m.code)}, {"message", m.message}});
}

Frame Encode(const JudgeMessage& m) {
  boost::json::object o{{"seq", std::to_string(m.seq)},
                        {"candidate", CandidateToJson(m.candidate)}};
  std::string attachment;
  if (m.compiled) {
    o["compiled"] = CompileResultToJson(*m.compiled);
    attachment = m.compiled->cubin;
  }
  return MakeFrame(MessageType::kJudge, o, std::move(attachment));
}

Frame Encode(const StartedMessage& m) {
  return MakeFrame(MessageType::kStarted, {{"seq", std::to_string(m.seq)}});
}

Frame Encode(const ResultMessage& m) {
  // The evaluation is embedded as text: it has its own reader, shared with
  // other users of the wire form.
  return MakeFrame(MessageType::kResult, {{"seq", std::to_string(m.seq)},
                                          {"evaluation", boost::json::serialize(EvaluationToJson(m.evaluation))}});
}

Frame Encode(const ByeMessage& m) { return MakeFrame(MessageType::kBye, {{"reason", m.reason}}); }

Frame ShutdownFrame() { return MakeFrame(MessageType::kShutdown, boost::json::object{}); }

StatusOr<InitMessage> DecodeInit(const Frame& frame) {
  KSEARCH_ASSIGN_OR_RETURN(std::unique_ptr<JsonDocument> doc, Open(frame, MessageType::kInit));
  JsonNode root = JsonNode::Root(*doc);
  InitMessage m;
  KSEARCH_ASSIGN_OR_RETURN(JsonNode problem, root.Required("problem"));
  KSEARCH_ASSIGN_OR_RETURN(m.problem_json, problem.String());
  KSEARCH_ASSIGN_OR_RETURN(JsonNode options, root.Required("options"));
  KSEARCH_ASSIGN_OR_RETURN(m.options, OptionsFromNode(options));
  return m;
}

StatusOr<ReadyMessage> DecodeReady(const Frame& frame) {
  KSEARCH_ASSIGN_OR_RETURN(std::unique_ptr<JsonDocument> doc, Open(frame, MessageType::kReady));
  JsonNode root = JsonNode::Root(*doc);
  ReadyMessage m;
  KSEARCH_ASSIGN_OR_RETURN(JsonNode device, root.Required("device"));
  KSEARCH_ASSIGN_OR_RETURN(m.device, DeviceInfoFromNode(device));
  KSEARCH_RETURN_IF_ERROR(ReadMember(root, "launch_watchdog_seconds", &m.launch_watchdog_seconds));
  KSEARCH_RETURN_IF_ERROR(ReadMember(root, "visible_devices", &m.visible_devices));
  KSEARCH_RETURN_IF_ERROR(ReadMember(root, "pid", &m.pid));
  KSEARCH_RETURN_IF_ERROR(ReadMember(root, "version", &m.version));
  for (auto [key, field] : {std::pair{"reference_timing", &m.reference_timing},
                            std::pair{"baseline_timing", &m.baseline_timing}}) {
    KSEARCH_ASSIGN_OR_RETURN(std::optional<JsonNode> timing, root.Find(key));
    if (!timing) continue;
    KSEARCH_ASSIGN_OR_RETURN(*field, TimingFromNode(*timing));
  }
  return m;
}

StatusOr<FatalMessage> DecodeFatal(const Frame& frame) {
  KSEARCH_ASSIGN_OR_RETURN(std::unique_ptr<JsonDocument> doc, Open(frame, MessageType::kFatal));
  JsonNode root = JsonNode::Root(*doc);
  FatalMessage m;
  int code = static_cast<int>(StatusCode::kInternal);
  KSEARCH_RETURN_IF_ERROR(ReadMember(root, "code", &code));
  KSEARCH_RETURN_IF_ERROR(ReadMember(root, "message", &m.message));
  bool known = code > 0 && code <= static_cast<int>(StatusCode::kUnauthenticated);
  m.code = known ? static_cast<StatusCode>(code) : StatusCode::kInternal;
  return m;
}

StatusOr<JudgeMessage> DecodeJudge(const Frame& frame) {
  KSEARCH_ASSIGN_OR_RETURN(std::unique_ptr<JsonDocument> doc, Open(frame, MessageType::kJudge));
  JsonNode root = JsonNode::Root(*doc);
  JudgeMessage m;
  KSEARCH_ASSIGN_OR_RETURN(m.seq, ReadSeq(root));
  KSEARCH_ASSIGN_OR_RETURN(JsonNode candidate, root.Required("candidate"));
  KSEARCH_ASSIGN_OR_RETURN(m.candidate, CandidateFromNode(candidate));
  KSEARCH_ASSIGN_OR_RETURN(std::optional<JsonNode> compiled, root.Find("compiled"));
  if (compiled) {
    KSEARCH_ASSIGN_OR_RETURN(m.compiled, CompileResultFromNode(*compiled));
    m.compiled->cubin = frame.attachment;
  }
  return m;
}

StatusOr<StartedMessage> DecodeStarted(const Frame& frame) {
  KSEARCH_ASSIGN_OR_RETURN(std::unique_ptr<JsonDocument> doc, Open(frame, MessageType::kStarted));
  StartedMessage m;
  KSEARCH_ASSIGN_OR_RETURN(m.seq, ReadSeq(JsonNode::Root(*doc)));
  return m;
}

StatusOr<ResultMessage> DecodeResult(const Frame& frame) {
  KSEARCH_ASSIGN_OR_RETURN(std::unique_ptr<JsonDocument> doc, Open(frame, MessageType::kResult));
  JsonNode root = JsonNode::Root(*doc);
  ResultMessage m;
  KSEARCH_ASSIGN_OR_RETURN(m.seq, ReadSeq(root));
  KSEARCH_ASSIGN_OR_RETURN(JsonNode evaluation, root.Required("evaluation"));
  KSEARCH_ASSIGN_OR_RETURN(std::string text, evaluation.String());
  KSEARCH_ASSIGN_OR_RETURN(m.evaluation, EvaluationFromJson(text, "worker evaluation"));
  return m;
}

StatusOr<ByeMessage> DecodeBye(const Frame& frame) {
  KSEARCH_ASSIGN_OR_RETURN(std::unique_ptr<JsonDocument> doc, Open(frame, MessageType::kBye));
  ByeMessage m;
  KSEARCH_RETURN_IF_ERROR(ReadMember(JsonNode::Root(*doc), "reason", &m.reason));
  return m;
}

}  // namespace ksearch::internal::worker
