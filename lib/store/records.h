// Conversions between ksearch's plain values and the text the store keeps:
// the inverse of Evaluation::ToJson, string lists, and small helpers shared by
// the store's translation units.
#ifndef KSEARCH_STORE_RECORDS_H_
#define KSEARCH_STORE_RECORDS_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "ksearch/evaluation.h"
#include "ksearch/status.h"

namespace ksearch::internal {

// Parses Evaluation::ToJson() output. Unknown fields are ignored and missing
// ones keep their defaults (records written by older versions stay readable).
// Errors: kInvalidArgument naming `origin` and the field.
StatusOr<Evaluation> EvaluationFromJson(std::string_view json, std::string_view origin);

// ["a","b"] and back. Errors: kInvalidArgument.
std::string StringListToJson(const std::vector<std::string>& items);
StatusOr<std::vector<std::string>> StringListFromJson(std::string_view json, std::string_view origin);

// A JSON string literal (quotes included) for `text`.
std::string JsonQuote(std::string_view text);

// Milliseconds since the Unix epoch, now.
int64_t NowUnixMs();
// This machine's host name ("" when unknown).
std::string HostName();

// "sm_90" → (9, 0); "sm_100" → (10, 0). False when not of that form.
bool ParseArch(std::string_view arch, int* major, int* minor);

}  // namespace ksearch::internal

#endif  // KSEARCH_STORE_RECORDS_H_
