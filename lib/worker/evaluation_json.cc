#include "worker/evaluation_json.h"

#include <boost/json.hpp>
#include <cmath>
#include <cstdlib>
#include <limits>

#include "core/case_results.h"

namespace ksearch::internal::worker {
namespace {

StatusOr<double> NumberFromNode(const JsonNode& node) {
  if (node.IsNumber()) return node.Double();
  if (node.element().is_null()) return std::numeric_limits<double>::quiet_NaN();
  if (node.IsString()) {
    KSEARCH_ASSIGN_OR_RETURN(std::string text, node.String());
    if (text == "nan") return std::numeric_limits<double>::quiet_NaN();
    if (text == "inf") return std::numeric_limits<double>::infinity();
    if (text == "-inf") return -std::numeric_limits<double>::infinity();
  }
  return node.Error("expected a number (or \"nan\", \"inf\", \"-inf\"), got " + node.Describe());
}

boost::json::object SpeedupToJson(const Speedup& s) {
  return {{"baseline", s.baseline},
          {"ratio", NumberToJson(s.ratio)},
          {"ci_low", NumberToJson(s.ci_low)},
          {"ci_high", NumberToJson(s.ci_high)},
          {"pairs", s.pairs}};
}

StatusOr<Speedup> SpeedupFromNode(const JsonNode& node) {
  Speedup s;
  KSEARCH_RETURN_IF_ERROR(ReadMember(node, "baseline", &s.baseline));
  KSEARCH_RETURN_IF_ERROR(ReadMember(node, "ratio", &s.ratio));
  KSEARCH_RETURN_IF_ERROR(ReadMember(node, "ci_low", &s.ci_low));
  KSEARCH_RETURN_IF_ERROR(ReadMember(node, "ci_high", &s.ci_high));
  KSEARCH_RETURN_IF_ERROR(ReadMember(node, "pairs", &s.pairs));
  return s;
}

// "sm_90" -> 9, 0; "sm_100" -> 10, 0 (the minor is always one digit).
void ParseArch(const std::string& arch, DeviceInfo* device) {
  if (arch.rfind("sm_", 0) != 0 || arch.size() < 5) return;
  int digits = std::atoi(arch.c_str() + 3);
  device->cc_major = digits / 10;
  device->cc_minor = digits % 10;
}

}  // namespace

boost::json::value NumberToJson(double value) {
  if (std::isnan(value)) return "nan";
  if (std::isinf(value)) return value > 0 ? "inf" : "-inf";
  return value;
}

Status ReadMember(const JsonNode& object, std::string_view key, std::string* out) {
  KSEARCH_ASSIGN_OR_RETURN(std::optional<JsonNode> node, object.Find(key));
  if (!node) return Status::Ok();
  KSEARCH_ASSIGN_OR_RETURN(*out, node->String());
  return Status::Ok();
}

Status ReadMember(const JsonNode& object, std::string_view key, int64_t* out) {
  KSEARCH_ASSIGN_OR_RETURN(std::optional<JsonNode> node, object.Find(key));
  if (!node) return Status::Ok();
  KSEARCH_ASSIGN_OR_RETURN(*out, node->Int());
  return Status::Ok();
}

Status ReadMember(const JsonNode& object, std::string_view key, int* out) {
  int64_t value = *out;
  KSEARCH_RETURN_IF_ERROR(ReadMember(object, key, &value));
  if (value < std::numeric_limits<int>::min() || value > std::numeric_limits<int>::max()) {
    return object.Error(std::string(key) + ": " + std::to_string(value) +
                        " does not fit in 32 bits");
  }
  *out = static_cast<int>(value);
  return Status::Ok();
}

Status ReadMember(const JsonNode& object, std::string_view key, double* out) {
  KSEARCH_ASSIGN_OR_RETURN(std::optional<JsonNode> node, object.Find(key));
  if (!node) return Status::Ok();
  KSEARCH_ASSIGN_OR_RETURN(*out, NumberFromNode(*node));
  return Status::Ok();
}

Status ReadMember(const JsonNode& object, std::string_view key, bool* out) {
  KSEARCH_ASSIGN_OR_RETURN(std::optional<JsonNode> node, object.Find(key));
  if (!node) return Status::Ok();
  KSEARCH_ASSIGN_OR_RETURN(*out, node->Bool());
  return Status::Ok();
}

boost::json::value TimingToJson(const TimingStats& t) {
  return boost::json::object{{"median_ms", NumberToJson(t.median_ms)},
                             {"min_ms", NumberToJson(t.min_ms)},
                             {"p10_ms", NumberToJson(t.p10_ms)},
                             {"p90_ms", NumberToJson(t.p90_ms)},
                             {"ci_low_ms", NumberToJson(t.ci_low_ms)},
                             {"ci_high_ms", NumberToJson(t.ci_high_ms)},
                             {"repetitions", t.repetitions}};
}

StatusOr<TimingStats> TimingFromNode(const JsonNode& node) {
  TimingStats t;
  KSEARCH_RETURN_IF_ERROR(ReadMember(node, "median_ms", &t.median_ms));
  KSEARCH_RETURN_IF_ERROR(ReadMember(node, "min_ms", &t.min_ms));
  KSEARCH_RETURN_IF_ERROR(ReadMember(node, "p10_ms", &t.p10_ms));
  KSEARCH_RETURN_IF_ERROR(ReadMember(node, "p90_ms", &t.p90_ms));
  KSEARCH_RETURN_IF_ERROR(ReadMember(node, "ci_low_ms", &t.ci_low_ms));
  KSEARCH_RETURN_IF_ERROR(ReadMember(node, "ci_high_ms", &t.ci_high_ms));
  KSEARCH_RETURN_IF_ERROR(ReadMember(node, "repetitions", &t.repetitions));
  return t;
}

boost::json::value DeviceInfoToJson(const DeviceInfo& d) {
  boost::json::object o{{"name", d.name},
                             {"ordinal", d.ordinal},
                             {"arch", d.Arch()},
                             {"cc_major", d.cc_major},
                             {"cc_minor", d.cc_minor},
                             {"driver_version", d.driver_version},
                             {"nvrtc_version", d.nvrtc_version},
                             {"multiprocessors", d.multiprocessors},
                             {"l2_bytes", d.l2_bytes},
                             {"global_memory_bytes", d.global_memory_bytes},
                             {"sm_clock_mhz", d.sm_clock_mhz},
                             {"memory_clock_mhz", d.memory_clock_mhz},
                             {"peak_bandwidth_gbps", NumberToJson(d.peak_bandwidth_gbps)},
                             {"peak_gflops", NumberToJson(d.peak_gflops)},
                             {"baseline_library", d.baseline_library}};
  if (!d.peak_mma_gflops.empty()) {
    boost::json::object peaks;
    for (const auto& [path, gflops] : d.peak_mma_gflops) peaks[path] = NumberToJson(gflops);
    o["peak_mma_gflops"] = std::move(peaks);
  }
  return o;
}

StatusOr<DeviceInfo> DeviceInfoFromNode(const JsonNode& node) {
  DeviceInfo d;
  std::string arch;
  KSEARCH_RETURN_IF_ERROR(ReadMember(node, "name", &d.name));
  KSEARCH_RETURN_IF_ERROR(ReadMember(node, "ordinal", &d.ordinal));
  KSEARCH_RETURN_IF_ERROR(ReadMember(node, "arch", &arch));
  ParseArch(arch, &d);
  KSEARCH_RETURN_IF_ERROR(ReadMember(node, "cc_major", &d.cc_major));
  KSEARCH_RETURN_IF_ERROR(ReadMember(node, "cc_minor", &d.cc_minor));
  KSEARCH_RETURN_IF_ERROR(ReadMember(node, "driver_version", &d.driver_version));
  KSEARCH_RETURN_IF_ERROR(ReadMember(node, "nvrtc_version", &d.nvrtc_version));
  KSEARCH_RETURN_IF_ERROR(ReadMember(node, "multiprocessors", &d.multiprocessors));
  KSEARCH_RETURN_IF_ERROR(ReadMember(node, "l2_bytes", &d.l2_bytes));
  KSEARCH_RETURN_IF_ERROR(ReadMember(node, "global_memory_bytes", &d.global_memory_bytes));
  KSEARCH_RETURN_IF_ERROR(ReadMember(node, "sm_clock_mhz", &d.sm_clock_mhz));
  KSEARCH_RETURN_IF_ERROR(ReadMember(node, "memory_clock_mhz", &d.memory_clock_mhz));
  KSEARCH_RETURN_IF_ERROR(ReadMember(node, "peak_bandwidth_gbps", &d.peak_bandwidth_gbps));
  KSEARCH_RETURN_IF_ERROR(ReadMember(node, "peak_gflops", &d.peak_gflops));
  KSEARCH_RETURN_IF_ERROR(ReadMember(node, "baseline_library", &d.baseline_library));
  KSEARCH_ASSIGN_OR_RETURN(std::optional<JsonNode> peaks, node.Find("peak_mma_gflops"));
  if (peaks) {
    KSEARCH_ASSIGN_OR_RETURN(auto members, peaks->Members());
    for (auto& [path, value] : members) {
      double gflops = 0.0;
      KSEARCH_ASSIGN_OR_RETURN(gflops, value.Double());
      d.peak_mma_gflops.emplace_back(path, gflops);
    }
  }
  return d;
}

std::string EvaluationToWireJson(const Evaluation& e) {
  boost::json::object o;
  o["candidate_id"] = e.candidate_id;
  o["content_hash"] = e.content_hash;
  o["status"] = std::string(ToString(e.status));
  o["message"] = e.message;
  o["details"] = e.details;
  o["device_log"] = e.device_log;
  o["checks_not_run"] = boost::json::array(e.checks_not_run.begin(), e.checks_not_run.end());
  o["relaxed_tolerance"] = e.relaxed_tolerance;
  boost::json::array resources;
  for (const KernelResources& r : e.resources) {
    resources.push_back(
        boost::json::object{{"kernel", r.kernel},
                            {"registers", r.registers},
                            {"static_shared_bytes", r.static_shared_bytes},
                            {"max_dynamic_shared_bytes", r.max_dynamic_shared_bytes},
                            {"local_bytes", r.local_bytes},
                            {"spill_store_bytes", r.spill_store_bytes},
                            {"spill_load_bytes", r.spill_load_bytes},
                            {"max_threads_per_block", r.max_threads_per_block}});
  }
  o["resources"] = std::move(resources);
  if (e.mismatch) {
    const Mismatch& m = *e.mismatch;
    o["mismatch"] =
        boost::json::object{{"tensor", m.tensor},
                            {"input_set", m.input_set},
                            {"phase", m.phase},
                            {"bad_count", m.bad_count},
                            {"elements", m.elements},
                            {"worst_index", m.worst_index},
                            {"expected", NumberToJson(m.expected)},
                            {"got", NumberToJson(m.got)},
                            {"max_rel_error", NumberToJson(m.max_rel_error)},
                            {"l2_rel_error", NumberToJson(m.l2_rel_error)},
                            {"allowed_l2_rel_error", NumberToJson(m.allowed_l2_rel_error)}};
  }
  o["max_l2_rel_error"] = NumberToJson(e.max_l2_rel_error);
  o["allowed_l2_rel_error"] = NumberToJson(e.allowed_l2_rel_error);
  if (e.timing) o["timing"] = TimingToJson(*e.timing);
  if (e.baseline_timing) o["baseline_timing"] = TimingToJson(*e.baseline_timing);
  if (e.speedup) o["speedup"] = SpeedupToJson(*e.speedup);
  if (e.speedup_vs_reference) o["speedup_vs_reference"] = SpeedupToJson(*e.speedup_vs_reference);
  o["floor_ms"] = NumberToJson(e.floor_ms);
  o["roofline_fraction"] = NumberToJson(e.roofline_fraction);
  if (!e.cases.empty()) o["cases"] = CaseResultsToJson(e.cases);
  o["device"] = DeviceInfoToJson(e.device);
  o["compile_cached"] = e.compile_cached;
  o["compile_ms"] = NumberToJson(e.compile_ms);
  o["check_ms"] = NumberToJson(e.check_ms);
  o["timing_ms"] = NumberToJson(e.timing_ms);
  o["total_ms"] = NumberToJson(e.total_ms);
  return boost::json::serialize(o);
}

StatusOr<Evaluation> EvaluationFromNode(const JsonNode& node) {
  if (!node.IsObject()) return node.Error("expected an evaluation object, got " + node.Describe());
  Evaluation e;
  KSEARCH_RETURN_IF_ERROR(ReadMember(node, "candidate_id", &e.candidate_id));
  KSEARCH_RETURN_IF_ERROR(ReadMember(node, "content_hash", &e.content_hash));
  KSEARCH_ASSIGN_OR_RETURN(JsonNode status, node.Required("status"));
  KSEARCH_ASSIGN_OR_RETURN(std::string status_name, status.String());
  if (!ParseEvalStatus(status_name, &e.status)) {
    return status.Error("unknown evaluation status '" + status_name + "'");
  }
  KSEARCH_RETURN_IF_ERROR(ReadMember(node, "message", &e.message));
  KSEARCH_RETURN_IF_ERROR(ReadMember(node, "details", &e.details));
  KSEARCH_RETURN_IF_ERROR(ReadMember(node, "device_log", &e.device_log));
  KSEARCH_ASSIGN_OR_RETURN(std::optional<JsonNode> checks, node.Find("checks_not_run"));
  if (checks) {
    KSEARCH_ASSIGN_OR_RETURN(std::vector<JsonNode> items, checks->Array());
    for (const JsonNode& item : items) {
      KSEARCH_ASSIGN_OR_RETURN(std::string text, item.String());
      e.checks_not_run.push_back(std::move(text));
    }
  }
  KSEARCH_RETURN_IF_ERROR(ReadMember(node, "relaxed_tolerance", &e.relaxed_tolerance));
  KSEARCH_ASSIGN_OR_RETURN(std::optional<JsonNode> resources, node.Find("resources"));
  if (resources) {
    KSEARCH_ASSIGN_OR_RETURN(std::vector<JsonNode> items, resources->Array());
    for (const JsonNode& item : items) {
      KernelResources r;
      KSEARCH_RETURN_IF_ERROR(ReadMember(item, "kernel", &r.kernel));
      KSEARCH_RETURN_IF_ERROR(ReadMember(item, "registers", &r.registers));
      KSEARCH_RETURN_IF_ERROR(ReadMember(item, "static_shared_bytes", &r.static_shared_bytes));
      KSEARCH_RETURN_IF_ERROR(
          ReadMember(item, "max_dynamic_shared_bytes", &r.max_dynamic_shared_bytes));
      KSEARCH_RETURN_IF_ERROR(ReadMember(item, "local_bytes", &r.local_bytes));
      KSEARCH_RETURN_IF_ERROR(ReadMember(item, "spill_store_bytes", &r.spill_store_bytes));
      KSEARCH_RETURN_IF_ERROR(ReadMember(item, "spill_load_bytes", &r.spill_load_bytes));
      KSEARCH_RETURN_IF_ERROR(ReadMember(item, "max_threads_per_block", &r.max_threads_per_block));
      e.resources.push_back(std::move(r));
    }
  }
  KSEARCH_ASSIGN_OR_RETURN(std::optional<JsonNode> mismatch, node.Find("mismatch"));
  if (mismatch) {
    Mismatch m;
    KSEARCH_RETURN_IF_ERROR(ReadMember(*mismatch, "tensor", &m.tensor));
    KSEARCH_RETURN_IF_ERROR(ReadMember(*mismatch, "input_set", &m.input_set));
    KSEARCH_RETURN_IF_ERROR(ReadMember(*mismatch, "phase", &m.phase));
    KSEARCH_RETURN_IF_ERROR(ReadMember(*mismatch, "bad_count", &m.bad_count));
    KSEARCH_RETURN_IF_ERROR(ReadMember(*mismatch, "elements", &m.elements));
    KSEARCH_RETURN_IF_ERROR(ReadMember(*mismatch, "worst_index", &m.worst_index));
    KSEARCH_RETURN_IF_ERROR(ReadMember(*mismatch, "expected", &m.expected));
    KSEARCH_RETURN_IF_ERROR(ReadMember(*mismatch, "got", &m.got));
    KSEARCH_RETURN_IF_ERROR(ReadMember(*mismatch, "max_rel_error", &m.max_rel_error));
    KSEARCH_RETURN_IF_ERROR(ReadMember(*mismatch, "l2_rel_error", &m.l2_rel_error));
    KSEARCH_RETURN_IF_ERROR(ReadMember(*mismatch, "allowed_l2_rel_error", &m.allowed_l2_rel_error));
    e.mismatch = std::move(m);
  }
  KSEARCH_RETURN_IF_ERROR(ReadMember(node, "max_l2_rel_error", &e.max_l2_rel_error));
  KSEARCH_RETURN_IF_ERROR(ReadMember(node, "allowed_l2_rel_error", &e.allowed_l2_rel_error));
  for (auto [key, field] :
       {std::pair{"timing", &e.timing}, std::pair{"baseline_timing", &e.baseline_timing}}) {
    KSEARCH_ASSIGN_OR_RETURN(std::optional<JsonNode> timing, node.Find(key));
    if (!timing) continue;
    KSEARCH_ASSIGN_OR_RETURN(*field, TimingFromNode(*timing));
  }
  for (auto [key, field] : {std::pair{"speedup", &e.speedup},
                            std::pair{"speedup_vs_reference", &e.speedup_vs_reference}}) {
    KSEARCH_ASSIGN_OR_RETURN(std::optional<JsonNode> speedup, node.Find(key));
    if (!speedup) continue;
    KSEARCH_ASSIGN_OR_RETURN(*field, SpeedupFromNode(*speedup));
  }
  KSEARCH_RETURN_IF_ERROR(ReadMember(node, "floor_ms", &e.floor_ms));
  KSEARCH_RETURN_IF_ERROR(ReadMember(node, "roofline_fraction", &e.roofline_fraction));
  KSEARCH_RETURN_IF_ERROR(ReadCaseResults(node, &e.cases));
  KSEARCH_ASSIGN_OR_RETURN(std::optional<JsonNode> device, node.Find("device"));
  if (device) {
    KSEARCH_ASSIGN_OR_RETURN(e.device, DeviceInfoFromNode(*device));
  }
  KSEARCH_RETURN_IF_ERROR(ReadMember(node, "compile_cached", &e.compile_cached));
  KSEARCH_RETURN_IF_ERROR(ReadMember(node, "compile_ms", &e.compile_ms));
  KSEARCH_RETURN_IF_ERROR(ReadMember(node, "check_ms", &e.check_ms));
  KSEARCH_RETURN_IF_ERROR(ReadMember(node, "timing_ms", &e.timing_ms));
  KSEARCH_RETURN_IF_ERROR(ReadMember(node, "total_ms", &e.total_ms));
  return e;
}

StatusOr<Evaluation> EvaluationFromJson(std::string_view json, std::string_view origin) {
  KSEARCH_ASSIGN_OR_RETURN(std::unique_ptr<JsonDocument> doc, JsonDocument::Parse(json, origin));
  return EvaluationFromNode(JsonNode::Root(*doc));
}

}  // namespace ksearch::internal::worker
