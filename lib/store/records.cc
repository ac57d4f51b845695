#include "store/records.h"

#include <unistd.h>

#include <boost/json.hpp>

#include <cctype>
#include <chrono>
#include <cstdlib>
#include <limits>
#include <optional>

#include "core/json_util.h"
#include "core/case_results.h"

namespace ksearch::internal {
namespace {

// Lenient readers: a field that is absent keeps the default; one of the wrong
// type is an error naming it.
template <typename T, typename Get>
Status Read(const JsonNode& object, std::string_view key, T* out, Get get) {
  KSEARCH_ASSIGN_OR_RETURN(std::optional<JsonNode> node, object.Find(key));
  if (!node || node->element().is_null()) return Status::Ok();
  auto value = get(*node);
  if (!value.ok()) return value.status();
  *out = static_cast<T>(*value);
  return Status::Ok();
}

Status ReadString(const JsonNode& o, std::string_view key, std::string* out) {
  return Read(o, key, out, [](const JsonNode& n) { return n.String(); });
}
template <typename T>
Status ReadInt(const JsonNode& o, std::string_view key, T* out) {
  return Read(o, key, out, [](const JsonNode& n) { return n.Int(); });
}
// Evaluation::ToJson writes a non-finite number as null (JSON has no NaN).
Status ReadDouble(const JsonNode& o, std::string_view key, double* out) {
  KSEARCH_ASSIGN_OR_RETURN(std::optional<JsonNode> node, o.Find(key));
  if (node && node->element().is_null()) {
    *out = std::numeric_limits<double>::quiet_NaN();
    return Status::Ok();
  }
  return Read(o, key, out, [](const JsonNode& n) { return n.Double(); });
}
Status ReadBool(const JsonNode& o, std::string_view key, bool* out) {
  return Read(o, key, out, [](const JsonNode& n) { return n.Bool(); });
}

StatusOr<std::optional<TimingStats>> ReadTiming(const JsonNode& o, std::string_view key) {
  KSEARCH_ASSIGN_OR_RETURN(std::optional<JsonNode> node, o.Find(key));
  if (!node || node->element().is_null()) return std::optional<TimingStats>();
  TimingStats t;
  KSEARCH_RETURN_IF_ERROR(ReadDouble(*node, "median_ms", &t.median_ms));
  KSEARCH_RETURN_IF_ERROR(ReadDouble(*node, "min_ms", &t.min_ms));
  KSEARCH_RETURN_IF_ERROR(ReadDouble(*node, "p10_ms", &t.p10_ms));
  KSEARCH_RETURN_IF_ERROR(ReadDouble(*node, "p90_ms", &t.p90_ms));
  KSEARCH_RETURN_IF_ERROR(ReadDouble(*node, "ci_low_ms", &t.ci_low_ms));
  KSEARCH_RETURN_IF_ERROR(ReadDouble(*node, "ci_high_ms", &t.ci_high_ms));
  KSEARCH_RETURN_IF_ERROR(ReadInt(*node, "repetitions", &t.repetitions));
  return std::optional<TimingStats>(t);
}

StatusOr<std::optional<Speedup>> ReadSpeedup(const JsonNode& o, std::string_view key) {
  KSEARCH_ASSIGN_OR_RETURN(std::optional<JsonNode> node, o.Find(key));
  if (!node || node->element().is_null()) return std::optional<Speedup>();
  Speedup s;
  KSEARCH_RETURN_IF_ERROR(ReadString(*node, "baseline", &s.baseline));
  KSEARCH_RETURN_IF_ERROR(ReadDouble(*node, "ratio", &s.ratio));
  KSEARCH_RETURN_IF_ERROR(ReadDouble(*node, "ci_low", &s.ci_low));
  KSEARCH_RETURN_IF_ERROR(ReadDouble(*node, "ci_high", &s.ci_high));
  KSEARCH_RETURN_IF_ERROR(ReadInt(*node, "pairs", &s.pairs));
  return std::optional<Speedup>(s);
}

}  // namespace

StatusOr<Evaluation> EvaluationFromJson(std::string_view json, std::string_view origin) {
  KSEARCH_ASSIGN_OR_RETURN(auto doc, JsonDocument::Parse(json, origin));
  JsonNode root = JsonNode::Root(*doc);
  Evaluation e;
  KSEARCH_RETURN_IF_ERROR(ReadString(root, "candidate_id", &e.candidate_id));
  KSEARCH_RETURN_IF_ERROR(ReadString(root, "content_hash", &e.content_hash));
  std::string status = "cancelled";
  KSEARCH_RETURN_IF_ERROR(ReadString(root, "status", &status));
  if (!ParseEvalStatus(status, &e.status)) {
    return InvalidArgumentError(std::string(origin) + ": status: unknown evaluation status '" +
                                status + "'");
  }
  KSEARCH_RETURN_IF_ERROR(ReadString(root, "message", &e.message));
  KSEARCH_RETURN_IF_ERROR(ReadString(root, "details", &e.details));
  KSEARCH_RETURN_IF_ERROR(ReadString(root, "device_log", &e.device_log));
  KSEARCH_ASSIGN_OR_RETURN(std::optional<JsonNode> checks, root.Find("checks_not_run"));
  if (checks) {
    KSEARCH_ASSIGN_OR_RETURN(auto items, checks->Array());
    for (const JsonNode& item : items) {
      KSEARCH_ASSIGN_OR_RETURN(std::string text, item.String());
      e.checks_not_run.push_back(std::move(text));
    }
  }
  KSEARCH_RETURN_IF_ERROR(ReadBool(root, "relaxed_tolerance", &e.relaxed_tolerance));
  KSEARCH_ASSIGN_OR_RETURN(std::optional<JsonNode> resources, root.Find("resources"));
  if (resources) {
    KSEARCH_ASSIGN_OR_RETURN(auto items, resources->Array());
    for (const JsonNode& item : items) {
      KernelResources r;
      KSEARCH_RETURN_IF_ERROR(ReadString(item, "kernel", &r.kernel));
      KSEARCH_RETURN_IF_ERROR(ReadInt(item, "registers", &r.registers));
      KSEARCH_RETURN_IF_ERROR(ReadInt(item, "static_shared_bytes", &r.static_shared_bytes));
      KSEARCH_RETURN_IF_ERROR(ReadInt(item, "max_dynamic_shared_bytes", &r.max_dynamic_shared_bytes));
      KSEARCH_RETURN_IF_ERROR(ReadInt(item, "local_bytes", &r.local_bytes));
      KSEARCH_RETURN_IF_ERROR(ReadInt(item, "spill_store_bytes", &r.spill_store_bytes));
      KSEARCH_RETURN_IF_ERROR(ReadInt(item, "spill_load_bytes", &r.spill_load_bytes));
      KSEARCH_RETURN_IF_ERROR(ReadInt(item, "max_threads_per_block", &r.max_threads_per_block));
      e.resources.push_back(std::move(r));
    }
  }
  KSEARCH_ASSIGN_OR_RETURN(std::optional<JsonNode> mismatch, root.Find("mismatch"));
  if (mismatch && !mismatch->element().is_null()) {
    Mismatch m;
    KSEARCH_RETURN_IF_ERROR(ReadString(*mismatch, "tensor", &m.tensor));
    KSEARCH_RETURN_IF_ERROR(ReadString(*mismatch, "input_set", &m.input_set));
    KSEARCH_RETURN_IF_ERROR(ReadString(*mismatch, "phase", &m.phase));
    KSEARCH_RETURN_IF_ERROR(ReadInt(*mismatch, "bad_count", &m.bad_count));
    KSEARCH_RETURN_IF_ERROR(ReadInt(*mismatch, "elements", &m.elements));
    KSEARCH_RETURN_IF_ERROR(ReadInt(*mismatch, "worst_index", &m.worst_index));
    KSEARCH_RETURN_IF_ERROR(ReadDouble(*mismatch, "expected", &m.expected));
    KSEARCH_RETURN_IF_ERROR(ReadDouble(*mismatch, "got", &m.got));
    KSEARCH_RETURN_IF_ERROR(ReadDouble(*mismatch, "max_rel_error", &m.max_rel_error));
    KSEARCH_RETURN_IF_ERROR(ReadDouble(*mismatch, "l2_rel_error", &m.l2_rel_error));
    KSEARCH_RETURN_IF_ERROR(ReadDouble(*mismatch, "allowed_l2_rel_error", &m.allowed_l2_rel_error));
    e.mismatch = std::move(m);
  }
  KSEARCH_RETURN_IF_ERROR(ReadDouble(root, "max_l2_rel_error", &e.max_l2_rel_error));
  KSEARCH_RETURN_IF_ERROR(ReadDouble(root, "allowed_l2_rel_error", &e.allowed_l2_rel_error));
  KSEARCH_ASSIGN_OR_RETURN(e.timing, ReadTiming(root, "timing"));
  KSEARCH_ASSIGN_OR_RETURN(e.baseline_timing, ReadTiming(root, "baseline_timing"));
  KSEARCH_ASSIGN_OR_RETURN(e.speedup, ReadSpeedup(root, "speedup"));
  KSEARCH_ASSIGN_OR_RETURN(e.speedup_vs_reference, ReadSpeedup(root, "speedup_vs_reference"));
  KSEARCH_RETURN_IF_ERROR(ReadDouble(root, "floor_ms", &e.floor_ms));
  KSEARCH_RETURN_IF_ERROR(ReadDouble(root, "roofline_fraction", &e.roofline_fraction));
  KSEARCH_RETURN_IF_ERROR(ReadCaseResults(root, &e.cases));
  KSEARCH_ASSIGN_OR_RETURN(std::optional<JsonNode> device, root.Find("device"));
  if (device && !device->element().is_null()) {
    DeviceInfo& d = e.device;
    KSEARCH_RETURN_IF_ERROR(ReadString(*device, "name", &d.name));
    KSEARCH_RETURN_IF_ERROR(ReadInt(*device, "ordinal", &d.ordinal));
    std::string arch;
    KSEARCH_RETURN_IF_ERROR(ReadString(*device, "arch", &arch));
    ParseArch(arch, &d.cc_major, &d.cc_minor);
    KSEARCH_RETURN_IF_ERROR(ReadInt(*device, "driver_version", &d.driver_version));
    KSEARCH_RETURN_IF_ERROR(ReadString(*device, "nvrtc_version", &d.nvrtc_version));
    KSEARCH_RETURN_IF_ERROR(ReadInt(*device, "multiprocessors", &d.multiprocessors));
    KSEARCH_RETURN_IF_ERROR(ReadInt(*device, "l2_bytes", &d.l2_bytes));
    KSEARCH_RETURN_IF_ERROR(ReadInt(*device, "sm_clock_mhz", &d.sm_clock_mhz));
    KSEARCH_RETURN_IF_ERROR(ReadInt(*device, "memory_clock_mhz", &d.memory_clock_mhz));
    KSEARCH_RETURN_IF_ERROR(ReadDouble(*device, "peak_bandwidth_gbps", &d.peak_bandwidth_gbps));
    KSEARCH_RETURN_IF_ERROR(ReadDouble(*device, "peak_gflops", &d.peak_gflops));
  }
  KSEARCH_RETURN_IF_ERROR(ReadBool(root, "compile_cached", &e.compile_cached));
  KSEARCH_RETURN_IF_ERROR(ReadDouble(root, "compile_ms", &e.compile_ms));
  KSEARCH_RETURN_IF_ERROR(ReadDouble(root, "check_ms", &e.check_ms));
  KSEARCH_RETURN_IF_ERROR(ReadDouble(root, "timing_ms", &e.timing_ms));
  KSEARCH_RETURN_IF_ERROR(ReadDouble(root, "total_ms", &e.total_ms));
  return e;
}

std::string StringListToJson(const std::vector<std::string>& items) {
  return boost::json::serialize(boost::json::array(items.begin(), items.end()));
}

StatusOr<std::vector<std::string>> StringListFromJson(std::string_view json, std::string_view origin) {
  std::vector<std::string> out;
  if (json.empty()) return out;
  KSEARCH_ASSIGN_OR_RETURN(auto doc, JsonDocument::Parse(json, origin));
  KSEARCH_ASSIGN_OR_RETURN(auto items, JsonNode::Root(*doc).Array());
  for (const JsonNode& item : items) {
    KSEARCH_ASSIGN_OR_RETURN(std::string text, item.String());
    out.push_back(std::move(text));
  }
  return out;
}

std::string JsonQuote(std::string_view text) {
  return boost::json::serialize(boost::json::value(boost::json::string_view(text.data(), text.size())));
}

int64_t NowUnixMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

std::string HostName() {
  char name[256] = {};
  if (::gethostname(name, sizeof(name) - 1) != 0) return "";
  return name;
}

bool ParseArch(std::string_view arch, int* major, int* minor) {
  if (arch.size() < 5 || arch.substr(0, 3) != "sm_") return false;
  std::string_view digits = arch.substr(3);
  // A suffix such as "sm_90a" names a feature set of the same capability.
  while (!digits.empty() && !std::isdigit(static_cast<unsigned char>(digits.back()))) {
    digits.remove_suffix(1);
  }
  if (digits.size() < 2) return false;
  for (char c : digits) {
    if (!std::isdigit(static_cast<unsigned char>(c))) return false;
  }
  *major = std::atoi(std::string(digits.substr(0, digits.size() - 1)).c_str());
  *minor = digits.back() - '0';
  return true;
}

}  // namespace ksearch::internal
