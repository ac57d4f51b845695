// Evaluations, device descriptions and timing figures as JSON, both ways, for
// the worker protocol.
//
// The wire form is Evaluation::ToJson's layout with two differences: the
// device is complete (compute capability and memory size as numbers, not only
// the arch string), and non-finite numbers travel as the strings "nan",
// "inf" and "-inf" (a poisoned output read back is NaN, and plain JSON has no
// NaN). EvaluationFromJson reads either form.
//
// Thread safety: stateless functions.
#ifndef KSEARCH_WORKER_EVALUATION_JSON_H_
#define KSEARCH_WORKER_EVALUATION_JSON_H_

#include <boost/json/value.hpp>
#include <string>
#include <string_view>

#include "core/json_util.h"
#include "ksearch/evaluation.h"
#include "ksearch/status.h"

namespace ksearch::internal::worker {

std::string EvaluationToWireJson(const Evaluation& evaluation);
// Errors: kInvalidArgument "ORIGIN: FIELD: …" for malformed JSON, a field of
// the wrong type or an unknown status name. Absent fields keep their defaults.
StatusOr<Evaluation> EvaluationFromJson(std::string_view json, std::string_view origin);
StatusOr<Evaluation> EvaluationFromNode(const JsonNode& node);

boost::json::value DeviceInfoToJson(const DeviceInfo& device);
StatusOr<DeviceInfo> DeviceInfoFromNode(const JsonNode& node);

boost::json::value TimingToJson(const TimingStats& timing);
StatusOr<TimingStats> TimingFromNode(const JsonNode& node);

// A double as JSON: a number, or "nan" / "inf" / "-inf".
boost::json::value NumberToJson(double value);

// Optional members of an object node: absent leaves `*out` unchanged; a
// present member of the wrong type is an error naming its path.
Status ReadMember(const JsonNode& object, std::string_view key, std::string* out);
Status ReadMember(const JsonNode& object, std::string_view key, int64_t* out);
Status ReadMember(const JsonNode& object, std::string_view key, int* out);
Status ReadMember(const JsonNode& object, std::string_view key, double* out);
Status ReadMember(const JsonNode& object, std::string_view key, bool* out);

}  // namespace ksearch::internal::worker

#endif  // KSEARCH_WORKER_EVALUATION_JSON_H_
