// The one JSON form of an Evaluation and of its parts (kernel resources,
// mismatch, timing, speedup, device), both ways: what `ksearch eval --json`
// prints, what the store keeps, what a worker process and a queue worker send
// back, and what the compile cache and the compile helper carry for
// resources. docs/schemas/evaluation.json describes it.
//
// Each struct's fields are listed once, in evaluation_json.cc; the writer and
// the reader both walk that list, so a new field is one line there.
//
// Numbers round-trip exactly (shortest form that reads back as the same
// double). A non-finite double is written as the string "nan", "inf" or
// "-inf"; the reader also takes null as NaN (records written before this
// form). Reading is lenient about what is absent (a field keeps its default,
// null counts as absent) and strict about what is present: a field of the
// wrong type, an integer out of range, an unknown status or a string that is
// not one of the three names above is an error naming the origin and the
// field path. Unknown fields are ignored, so that records written by newer
// versions stay readable.
//
// Thread safety: stateless functions.
#ifndef KSEARCH_CORE_EVALUATION_JSON_H_
#define KSEARCH_CORE_EVALUATION_JSON_H_

#include <boost/json/array.hpp>
#include <boost/json/object.hpp>
#include <boost/json/value.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "core/json_util.h"
#include "ksearch/evaluation.h"
#include "ksearch/status.h"

namespace ksearch::internal {

// A double as JSON: a number, or the string "nan", "inf" or "-inf".
boost::json::value NumberToJson(double value);

boost::json::object EvaluationToJson(const Evaluation& evaluation);
// Errors: kInvalidArgument "ORIGIN: FIELD: …" for malformed JSON, a field of
// the wrong type, a missing or unknown status.
StatusOr<Evaluation> EvaluationFromJson(std::string_view json, std::string_view origin);
StatusOr<Evaluation> EvaluationFromNode(const JsonNode& node);

boost::json::array ResourcesToJson(const std::vector<KernelResources>& resources);
StatusOr<std::vector<KernelResources>> ResourcesFromNode(const JsonNode& node);

boost::json::object DeviceInfoToJson(const DeviceInfo& device);
StatusOr<DeviceInfo> DeviceInfoFromNode(const JsonNode& node);

boost::json::object TimingToJson(const TimingStats& timing);
StatusOr<TimingStats> TimingFromNode(const JsonNode& node);

// "sm_90" → (9, 0); "sm_100" → (10, 0); "sm_90a" → (9, 0). False when not of
// that form.
bool ParseArch(std::string_view arch, int* major, int* minor);

}  // namespace ksearch::internal

#endif  // KSEARCH_CORE_EVALUATION_JSON_H_
