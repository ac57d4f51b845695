// Conversions between ksearch's plain values and the text the store keeps
// (evaluations through core/evaluation_json.h), string lists, and small
// helpers shared by the store's translation units.
#ifndef KSEARCH_STORE_RECORDS_H_
#define KSEARCH_STORE_RECORDS_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include <boost/json/object.hpp>

#include "core/evaluation_json.h"
#include "ksearch/evaluation.h"
#include "ksearch/store.h"
#include "ksearch/status.h"

namespace ksearch::internal {

// RunInfo::ToJson's object, to embed in a larger document.
boost::json::object RunInfoToJson(const RunInfo& run);

// ["a","b"] and back. Errors: kInvalidArgument.
std::string StringListToJson(const std::vector<std::string>& items);
StatusOr<std::vector<std::string>> StringListFromJson(std::string_view json, std::string_view origin);

// Milliseconds since the Unix epoch, now.
int64_t NowUnixMs();
// This machine's host name ("" when unknown).
std::string HostName();

}  // namespace ksearch::internal

#endif  // KSEARCH_STORE_RECORDS_H_
