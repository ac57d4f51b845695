#include "core/case_results.h"

#include "core/evaluation_json.h"
#include "core/json_util.h"

#include <boost/json.hpp>
#include <cmath>
#include <cstdio>

namespace ksearch::internal {
namespace {

// Non-finite figures (an overflowing speedup, a NaN time) are written as
// "nan"/"inf" (NumberToJson) and read back as themselves, as in the rest of
// an evaluation.
Status ReadNumber(const JsonNode& o, std::string_view key, double* out) {
  KSEARCH_ASSIGN_OR_RETURN(std::optional<JsonNode> node, o.Find(key));
  if (!node) return Status::Ok();
  KSEARCH_ASSIGN_OR_RETURN(*out, NumberFromNode(*node));
  return Status::Ok();
}

}  // namespace

boost::json::value CaseResultsToJson(const std::vector<CaseResult>& cases) {
  boost::json::array out;
  for (const CaseResult& c : cases) {
    boost::json::object dims;
    for (const auto& [name, value] : c.dims) dims[name] = value;
    out.push_back(boost::json::object{{"name", c.name},
                                      {"dims", std::move(dims)},
                                      {"weight", NumberToJson(c.weight)},
                                      {"timed", c.timed},
                                      {"status", std::string(ToString(c.status))},
                                      {"message", c.message},
                                      {"median_ms", NumberToJson(c.median_ms)},
                                      {"min_ms", NumberToJson(c.min_ms)},
                                      {"p10_ms", NumberToJson(c.p10_ms)},
                                      {"p90_ms", NumberToJson(c.p90_ms)},
                                      {"ci_low_ms", NumberToJson(c.ci_low_ms)},
                                      {"ci_high_ms", NumberToJson(c.ci_high_ms)},
                                      {"repetitions", c.repetitions},
                                      {"baseline_median_ms", NumberToJson(c.baseline_median_ms)},
                                      {"baseline", c.baseline},
                                      {"speedup", NumberToJson(c.speedup)},
                                      {"speedup_ci_low", NumberToJson(c.speedup_ci_low)},
                                      {"speedup_ci_high", NumberToJson(c.speedup_ci_high)},
                                      {"floor_ms", NumberToJson(c.floor_ms)},
                                      {"max_l2_rel_error", NumberToJson(c.max_l2_rel_error)},
                                      {"allowed_l2_rel_error", NumberToJson(c.allowed_l2_rel_error)}});
  }
  return out;
}

StatusOr<std::vector<CaseResult>> CaseResultsFromNode(const JsonNode& node) {
  KSEARCH_ASSIGN_OR_RETURN(std::vector<JsonNode> items, node.Array());
  std::vector<CaseResult> out;
  for (const JsonNode& item : items) {
    KSEARCH_RETURN_IF_ERROR(item.CheckKeys(
        {"name", "dims", "weight", "timed", "status", "message", "median_ms", "min_ms", "p10_ms", "p90_ms", "ci_low_ms",
         "ci_high_ms", "repetitions", "baseline_median_ms", "baseline", "speedup", "speedup_ci_low",
         "speedup_ci_high", "floor_ms", "max_l2_rel_error", "allowed_l2_rel_error"}));
    CaseResult c;
    KSEARCH_ASSIGN_OR_RETURN(JsonNode name, item.Required("name"));
    KSEARCH_ASSIGN_OR_RETURN(c.name, name.String());
    KSEARCH_ASSIGN_OR_RETURN(auto dims, item.Find("dims"));
    if (dims) {
      KSEARCH_ASSIGN_OR_RETURN(c.dims, dims->IntMembers());
    }
    KSEARCH_ASSIGN_OR_RETURN(auto timed, item.Find("timed"));
    if (timed) {
      KSEARCH_ASSIGN_OR_RETURN(c.timed, timed->Bool());
    }
    KSEARCH_ASSIGN_OR_RETURN(JsonNode status, item.Required("status"));
    KSEARCH_ASSIGN_OR_RETURN(std::string status_text, status.String());
    if (!ParseEvalStatus(status_text, &c.status)) {
      return status.Error("unknown status '" + status_text + "'");
    }
    KSEARCH_ASSIGN_OR_RETURN(auto message, item.Find("message"));
    if (message) {
      KSEARCH_ASSIGN_OR_RETURN(c.message, message->String());
    }
    KSEARCH_ASSIGN_OR_RETURN(auto baseline, item.Find("baseline"));
    if (baseline) {
      KSEARCH_ASSIGN_OR_RETURN(c.baseline, baseline->String());
    }
    KSEARCH_ASSIGN_OR_RETURN(auto repetitions, item.Find("repetitions"));
    if (repetitions) {
      KSEARCH_ASSIGN_OR_RETURN(int64_t r, repetitions->Int());
      if (r < 0 || r > 1'000'000'000) return repetitions->Error("out of range");
      c.repetitions = static_cast<int>(r);
    }
    struct Field {
      const char* key;
      double* target;
    } fields[] = {{"weight", &c.weight},
                  {"median_ms", &c.median_ms},
                  {"min_ms", &c.min_ms},
                  {"p10_ms", &c.p10_ms},
                  {"p90_ms", &c.p90_ms},
                  {"ci_low_ms", &c.ci_low_ms},
                  {"ci_high_ms", &c.ci_high_ms},
                  {"baseline_median_ms", &c.baseline_median_ms},
                  {"speedup", &c.speedup},
                  {"speedup_ci_low", &c.speedup_ci_low},
                  {"speedup_ci_high", &c.speedup_ci_high},
                  {"floor_ms", &c.floor_ms},
                  {"max_l2_rel_error", &c.max_l2_rel_error},
                  {"allowed_l2_rel_error", &c.allowed_l2_rel_error}};
    for (const Field& f : fields) KSEARCH_RETURN_IF_ERROR(ReadNumber(item, f.key, f.target));
    out.push_back(std::move(c));
  }
  return out;
}

Status ReadCaseResults(const JsonNode& evaluation, std::vector<CaseResult>* out) {
  KSEARCH_ASSIGN_OR_RETURN(std::optional<JsonNode> cases, evaluation.Find("cases"));
  if (!cases) return Status::Ok();
  KSEARCH_ASSIGN_OR_RETURN(*out, CaseResultsFromNode(*cases));
  return Status::Ok();
}

std::string CaseResultsReport(const std::vector<CaseResult>& cases) {
  std::string out;
  for (const CaseResult& c : cases) {
    std::string dims;
    for (const auto& [name, value] : c.dims) {
      dims += (dims.empty() ? "" : " ") + name + "=" + std::to_string(value);
    }
    char figures[200] = "";
    if (c.timed && c.median_ms > 0) {
      std::snprintf(figures, sizeof(figures), ", %.4f ms (weight %g)", c.median_ms, c.weight);
      if (c.speedup > 0) {
        size_t used = std::char_traits<char>::length(figures);
        std::snprintf(figures + used, sizeof(figures) - used, ", %.3fx vs %s (%.4f ms)", c.speedup,
                      c.baseline.c_str(), c.baseline_median_ms);
      }
    }
    out += "  case " + c.name + " (" + dims + (c.timed ? "" : ", check-only") + "): " +
           std::string(ToString(c.status)) + figures +
           (c.status == EvalStatus::kOk || c.status == EvalStatus::kCompiled ? "" : " — " + c.message) +
           "\n";
  }
  return out;
}

}  // namespace ksearch::internal
