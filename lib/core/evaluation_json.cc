#include "core/evaluation_json.h"

#include <boost/json.hpp>
#include <cctype>
#include <cmath>
#include <concepts>
#include <cstdlib>
#include <limits>
#include <optional>
#include <type_traits>

namespace ksearch::internal {
namespace {

template <typename Self, typename T>
concept Is = std::same_as<std::remove_const_t<Self>, T>;

// The field lists: one line per field, in the order they are written. `f` is
// called with the JSON key and the member (const when writing).

template <typename R, typename F>
  requires Is<R, KernelResources>
void Fields(R& r, F&& f) {
  f("kernel", r.kernel);
  f("registers", r.registers);
  f("static_shared_bytes", r.static_shared_bytes);
  f("max_dynamic_shared_bytes", r.max_dynamic_shared_bytes);
  f("local_bytes", r.local_bytes);
  f("spill_store_bytes", r.spill_store_bytes);
  f("spill_load_bytes", r.spill_load_bytes);
  f("max_threads_per_block", r.max_threads_per_block);
}

template <typename M, typename F>
  requires Is<M, Mismatch>
void Fields(M& m, F&& f) {
  f("tensor", m.tensor);
  f("input_set", m.input_set);
  f("phase", m.phase);
  f("bad_count", m.bad_count);
  f("elements", m.elements);
  f("worst_index", m.worst_index);
  f("expected", m.expected);
  f("got", m.got);
  f("max_rel_error", m.max_rel_error);
  f("l2_rel_error", m.l2_rel_error);
  f("allowed_l2_rel_error", m.allowed_l2_rel_error);
}

template <typename T, typename F>
  requires Is<T, TimingStats>
void Fields(T& t, F&& f) {
  f("median_ms", t.median_ms);
  f("min_ms", t.min_ms);
  f("p10_ms", t.p10_ms);
  f("p90_ms", t.p90_ms);
  f("ci_low_ms", t.ci_low_ms);
  f("ci_high_ms", t.ci_high_ms);
  f("repetitions", t.repetitions);
}

template <typename S, typename F>
  requires Is<S, Speedup>
void Fields(S& s, F&& f) {
  f("baseline", s.baseline);
  f("ratio", s.ratio);
  f("ci_low", s.ci_low);
  f("ci_high", s.ci_high);
  f("pairs", s.pairs);
}

// "arch" is written too (DeviceInfo::Arch(), for people and for records
// written before cc_major and cc_minor were): see WriteValue / ReadValue.
template <typename D, typename F>
  requires Is<D, DeviceInfo>
void Fields(D& d, F&& f) {
  f("name", d.name);
  f("ordinal", d.ordinal);
  f("cc_major", d.cc_major);
  f("cc_minor", d.cc_minor);
  f("driver_version", d.driver_version);
  f("nvrtc_version", d.nvrtc_version);
  f("multiprocessors", d.multiprocessors);
  f("l2_bytes", d.l2_bytes);
  f("global_memory_bytes", d.global_memory_bytes);
  f("sm_clock_mhz", d.sm_clock_mhz);
  f("memory_clock_mhz", d.memory_clock_mhz);
  f("peak_bandwidth_gbps", d.peak_bandwidth_gbps);
  f("peak_gflops", d.peak_gflops);
  f("peak_mma_gflops", d.peak_mma_gflops);
  f("baseline_library", d.baseline_library);
}

// One shape case of a shape-set evaluation; "name" and "status" are
// required (ReadValue below). Unknown keys are ignored, as in the rest of an
// evaluation, so a newer worker's cases read here.
template <typename C, typename F>
  requires Is<C, CaseResult>
void Fields(C& c, F&& f) {
  f("name", c.name);
  f("dims", c.dims);
  f("weight", c.weight);
  f("timed", c.timed);
  f("status", c.status);
  f("message", c.message);
  f("median_ms", c.median_ms);
  f("min_ms", c.min_ms);
  f("p10_ms", c.p10_ms);
  f("p90_ms", c.p90_ms);
  f("ci_low_ms", c.ci_low_ms);
  f("ci_high_ms", c.ci_high_ms);
  f("repetitions", c.repetitions);
  f("baseline_median_ms", c.baseline_median_ms);
  f("baseline", c.baseline);
  f("speedup", c.speedup);
  f("speedup_ci_low", c.speedup_ci_low);
  f("speedup_ci_high", c.speedup_ci_high);
  f("floor_ms", c.floor_ms);
  f("max_l2_rel_error", c.max_l2_rel_error);
  f("allowed_l2_rel_error", c.allowed_l2_rel_error);
}

template <typename E, typename F>
  requires Is<E, Evaluation>
void Fields(E& e, F&& f) {
  f("candidate_id", e.candidate_id);
  f("content_hash", e.content_hash);
  f("status", e.status);
  f("message", e.message);
  f("details", e.details);
  f("device_log", e.device_log);
  f("checks_not_run", e.checks_not_run);
  f("relaxed_tolerance", e.relaxed_tolerance);
  f("resources", e.resources);
  f("mismatch", e.mismatch);
  f("max_l2_rel_error", e.max_l2_rel_error);
  f("allowed_l2_rel_error", e.allowed_l2_rel_error);
  f("timing", e.timing);
  f("baseline_timing", e.baseline_timing);
  f("speedup", e.speedup);
  f("floor_ms", e.floor_ms);
  f("roofline_fraction", e.roofline_fraction);
  f("cases", e.cases);
  f("device", e.device);
  f("compile_cached", e.compile_cached);
  f("compile_ms", e.compile_ms);
  f("check_ms", e.check_ms);
  f("timing_ms", e.timing_ms);
  f("total_ms", e.total_ms);
}

template <typename T>
concept Record = requires(T& t) { Fields(t, [](std::string_view, auto&) {}); };

using PeakTable = std::vector<std::pair<std::string, double>>;
using Dims = std::vector<std::pair<std::string, int64_t>>;  // {"M": 4096, …}
// Absent when empty, so a one-shape problem's JSON has no "cases".
using Cases = std::vector<CaseResult>;

// ---- Writing

boost::json::value WriteValue(const std::string& v) { return boost::json::value(v); }
boost::json::value WriteValue(bool v) { return v; }
boost::json::value WriteValue(int v) { return v; }
boost::json::value WriteValue(int64_t v) { return v; }
boost::json::value WriteValue(double v) { return NumberToJson(v); }
boost::json::value WriteValue(EvalStatus v) { return boost::json::value(ToString(v)); }
boost::json::value WriteValue(const PeakTable& table) {
  boost::json::object o;
  for (const auto& [name, value] : table) o[name] = NumberToJson(value);
  return o;
}
boost::json::value WriteValue(const Dims& dims) {
  boost::json::object o;
  for (const auto& [name, value] : dims) o[name] = value;
  return o;
}
template <Record T>
boost::json::value WriteValue(const T& record);
template <typename T>
boost::json::value WriteValue(const std::vector<T>& items) {
  boost::json::array a;
  for (const T& item : items) a.push_back(WriteValue(item));
  return a;
}

template <Record T>
boost::json::object WriteObject(const T& record) {
  boost::json::object o;
  Fields(record, [&o](std::string_view key, const auto& member) {
    using Member = std::remove_cvref_t<decltype(member)>;
    if constexpr (requires { member.has_value(); }) {
      if (member) o[key] = WriteValue(*member);
    } else if constexpr (std::is_same_v<Member, PeakTable> || std::is_same_v<Member, Cases>) {
      if (!member.empty()) o[key] = WriteValue(member);
    } else {
      o[key] = WriteValue(member);
    }
  });
  return o;
}

template <Record T>
boost::json::value WriteValue(const T& record) {
  boost::json::object o = WriteObject(record);
  if constexpr (std::is_same_v<T, DeviceInfo>) o["arch"] = record.Arch();
  return o;
}

// ---- Reading

Status ReadValue(const JsonNode& n, std::string* out) {
  KSEARCH_ASSIGN_OR_RETURN(*out, n.String());
  return Status::Ok();
}
Status ReadValue(const JsonNode& n, bool* out) {
  KSEARCH_ASSIGN_OR_RETURN(*out, n.Bool());
  return Status::Ok();
}
Status ReadValue(const JsonNode& n, int64_t* out) {
  KSEARCH_ASSIGN_OR_RETURN(*out, n.Int());
  return Status::Ok();
}
Status ReadValue(const JsonNode& n, int* out) {
  KSEARCH_ASSIGN_OR_RETURN(int64_t value, n.Int());
  if (value < std::numeric_limits<int>::min() || value > std::numeric_limits<int>::max()) {
    return n.Error(std::to_string(value) + " does not fit in 32 bits");
  }
  *out = static_cast<int>(value);
  return Status::Ok();
}
Status ReadValue(const JsonNode& n, double* out) {
  KSEARCH_ASSIGN_OR_RETURN(*out, NumberFromNode(n));
  return Status::Ok();
}
Status ReadValue(const JsonNode& n, EvalStatus* out) {
  KSEARCH_ASSIGN_OR_RETURN(std::string name, n.String());
  if (!ParseEvalStatus(name, out)) {
    return n.Error("unknown evaluation status " + n.Describe());
  }
  return Status::Ok();
}
Status ReadValue(const JsonNode& n, PeakTable* out) {
  KSEARCH_ASSIGN_OR_RETURN(auto members, n.Members());
  out->clear();
  for (auto& [name, value] : members) {
    KSEARCH_ASSIGN_OR_RETURN(double gflops, NumberFromNode(value));
    out->emplace_back(name, gflops);
  }
  return Status::Ok();
}
Status ReadValue(const JsonNode& n, Dims* out) {
  KSEARCH_ASSIGN_OR_RETURN(*out, n.IntMembers());
  return Status::Ok();
}
template <Record T>
Status ReadValue(const JsonNode& n, T* out);
template <typename T>
Status ReadValue(const JsonNode& n, std::vector<T>* out) {
  KSEARCH_ASSIGN_OR_RETURN(std::vector<JsonNode> items, n.Array());
  out->clear();
  for (const JsonNode& item : items) {
    T value{};
    KSEARCH_RETURN_IF_ERROR(ReadValue(item, &value));
    out->push_back(std::move(value));
  }
  return Status::Ok();
}
template <typename T>
Status ReadValue(const JsonNode& n, std::optional<T>* out) {
  T value{};
  KSEARCH_RETURN_IF_ERROR(ReadValue(n, &value));
  *out = std::move(value);
  return Status::Ok();
}

template <Record T>
Status ReadObject(const JsonNode& n, T* out) {
  if (!n.IsObject()) return n.Error("expected an object, got " + n.Describe());
  Status status;
  Fields(*out, [&](std::string_view key, auto& member) {
    if (!status.ok()) return;
    StatusOr<std::optional<JsonNode>> found = n.Find(key);
    if (!found.ok()) {
      status = found.status();
      return;
    }
    if (!*found) return;
    // null is "absent", except for a double, where it is NaN.
    using Member = std::remove_cvref_t<decltype(member)>;
    if (!std::is_same_v<Member, double> && (*found)->element().is_null()) return;
    status = ReadValue(**found, &member);
  });
  return status;
}

template <Record T>
Status ReadValue(const JsonNode& n, T* out) {
  if constexpr (std::is_same_v<T, CaseResult>) {
    if (!n.IsObject()) return n.Error("expected an object, got " + n.Describe());
    for (std::string_view key : {"name", "status"}) {
      KSEARCH_ASSIGN_OR_RETURN(JsonNode required, n.Required(key));
      if (required.element().is_null()) return required.Error("expected a value, got null");
    }
  }
  if constexpr (std::is_same_v<T, DeviceInfo>) {
    // Read first, so that cc_major and cc_minor win where both are present.
    if (n.IsObject()) {
      std::string arch;
      KSEARCH_RETURN_IF_ERROR(ReadMember(n, "arch", &arch));
      ParseArch(arch, &out->cc_major, &out->cc_minor);
    }
  }
  return ReadObject(n, out);
}

template <Record T>
StatusOr<T> Read(const JsonNode& n) {
  T value{};
  KSEARCH_RETURN_IF_ERROR(ReadValue(n, &value));
  return value;
}

}  // namespace

boost::json::value NumberToJson(double value) {
  if (std::isnan(value)) return "nan";
  if (std::isinf(value)) return value > 0 ? "inf" : "-inf";
  return value;
}

boost::json::object EvaluationToJson(const Evaluation& evaluation) {
  return WriteObject(evaluation);
}

StatusOr<Evaluation> EvaluationFromNode(const JsonNode& node) {
  if (!node.IsObject()) return node.Error("expected an evaluation object, got " + node.Describe());
  // A verdict without its status is no verdict.
  KSEARCH_ASSIGN_OR_RETURN(JsonNode status, node.Required("status"));
  if (status.element().is_null()) return status.Error("expected an evaluation status, got null");
  return Read<Evaluation>(node);
}

StatusOr<Evaluation> EvaluationFromJson(std::string_view json, std::string_view origin) {
  KSEARCH_ASSIGN_OR_RETURN(std::unique_ptr<JsonDocument> doc, JsonDocument::Parse(json, origin));
  return EvaluationFromNode(JsonNode::Root(*doc));
}

boost::json::array ResourcesToJson(const std::vector<KernelResources>& resources) {
  return WriteValue(resources).as_array();
}

StatusOr<std::vector<KernelResources>> ResourcesFromNode(const JsonNode& node) {
  std::vector<KernelResources> out;
  KSEARCH_RETURN_IF_ERROR(ReadValue(node, &out));
  return out;
}

boost::json::object DeviceInfoToJson(const DeviceInfo& device) {
  return WriteValue(device).as_object();
}

StatusOr<DeviceInfo> DeviceInfoFromNode(const JsonNode& node) { return Read<DeviceInfo>(node); }

boost::json::object TimingToJson(const TimingStats& timing) { return WriteObject(timing); }

StatusOr<TimingStats> TimingFromNode(const JsonNode& node) { return Read<TimingStats>(node); }

bool ParseArch(std::string_view arch, int* major, int* minor) {
  if (arch.size() < 5 || arch.substr(0, 3) != "sm_") return false;
  std::string_view digits = arch.substr(3);
  // A suffix such as "sm_90a" names a feature set of the same capability.
  while (!digits.empty() && !std::isdigit(static_cast<unsigned char>(digits.back()))) {
    digits.remove_suffix(1);
  }
  if (digits.size() < 2 || digits.size() > 4) return false;
  for (char c : digits) {
    if (!std::isdigit(static_cast<unsigned char>(c))) return false;
  }
  *major = std::atoi(std::string(digits.substr(0, digits.size() - 1)).c_str());
  *minor = digits.back() - '0';
  return true;
}

}  // namespace ksearch::internal
