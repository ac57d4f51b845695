#include "queue/job.h"

#include <boost/json.hpp>
#include <chrono>
#include <memory>

#include "core/json_util.h"
#include "worker/messages.h"

namespace ksearch::internal::queue {

std::string CandidateToJson(const Candidate& c) {
  return boost::json::serialize(worker::CandidateToJson(c));
}

StatusOr<Candidate> CandidateFromJson(std::string_view json, std::string_view origin) {
  KSEARCH_ASSIGN_OR_RETURN(std::unique_ptr<JsonDocument> doc, JsonDocument::Parse(json, origin));
  return worker::CandidateFromNode(JsonNode::Root(*doc));
}

std::string JobId(const Candidate& candidate, const std::string& content_hash) {
  return candidate.id + "@" + content_hash.substr(0, 16);
}

int64_t UnixMicros() {
  return std::chrono::duration_cast<std::chrono::microseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

}  // namespace ksearch::internal::queue
