#include "core/case_results.h"
#include "ksearch/evaluation.h"

#include <boost/json.hpp>

#include <cmath>
#include <cstdio>

namespace ksearch {
namespace {

constexpr std::pair<EvalStatus, std::string_view> kStatusNames[] = {
    {EvalStatus::kOk, "ok"},
    {EvalStatus::kCompiled, "compiled"},
    {EvalStatus::kCompileError, "compile_error"},
    {EvalStatus::kInvalidPlan, "invalid_plan"},
    {EvalStatus::kResourceLimit, "resource_limit"},
    {EvalStatus::kLaunchError, "launch_error"},
    {EvalStatus::kCrashed, "crashed"},
    {EvalStatus::kTimeout, "timeout"},
    {EvalStatus::kWrongResult, "wrong_result"},
    {EvalStatus::kUnwrittenOutput, "unwritten_output"},
    {EvalStatus::kInputModified, "input_modified"},
    {EvalStatus::kOutOfBoundsWrite, "out_of_bounds_write"},
    {EvalStatus::kNondeterministic, "nondeterministic"},
    {EvalStatus::kSuspiciousSpeed, "suspicious_speed"},
    {EvalStatus::kCancelled, "cancelled"},
};

boost::json::object TimingToJson(const TimingStats& t) {
  return {{"median_ms", t.median_ms}, {"min_ms", t.min_ms},       {"p10_ms", t.p10_ms},
          {"p90_ms", t.p90_ms},       {"ci_low_ms", t.ci_low_ms}, {"ci_high_ms", t.ci_high_ms},
          {"repetitions", t.repetitions}};
}

boost::json::object SpeedupToJson(const Speedup& s) {
  return {{"baseline", s.baseline}, {"ratio", s.ratio}, {"ci_low", s.ci_low},
          {"ci_high", s.ci_high},   {"pairs", s.pairs}};
}

// JSON has no NaN or Inf (Boost.JSON would write bare NaN/Infinity): such
// values become null, which readers take as "not a number".
boost::json::value Num(double v) {
  if (!std::isfinite(v)) return nullptr;
  return v;
}

std::string Format(const char* format, double a, double b = 0, double c = 0) {
  char text[160];
  std::snprintf(text, sizeof(text), format, a, b, c);
  return text;
}

}  // namespace

std::string_view ToString(EvalStatus status) {
  for (const auto& [s, name] : kStatusNames) {
    if (s == status) return name;
  }
  return "unknown";
}

bool ParseEvalStatus(std::string_view text, EvalStatus* out) {
  for (const auto& [s, name] : kStatusNames) {
    if (name == text) {
      *out = s;
      return true;
    }
  }
  return false;
}

std::string DeviceInfo::Arch() const {
  return "sm_" + std::to_string(cc_major) + std::to_string(cc_minor);
}

std::string DeviceInfo::CompileArch() const {
  // The capabilities with an "a" feature set (NVRTC 13.0 compiles each).
  switch (cc_major * 10 + cc_minor) {
    case 90: case 100: case 103: case 110: case 120: case 121: return Arch() + "a";
    default: return Arch();
  }
}

std::string Evaluation::Report() const {
  std::string out = std::string(ToString(status));
  if (!candidate_id.empty()) out = candidate_id + ": " + out;
  if (!message.empty()) out += " — " + message;
  out += "\n";
  out += internal::CaseResultsReport(cases);
  if (timing) {
    out += Format("  time: median %.4f ms (95%% CI %.4f–%.4f", timing->median_ms, timing->ci_low_ms,
                  timing->ci_high_ms);
    out += ", min " + Format("%.4f", timing->min_ms) + ", p10 " + Format("%.4f", timing->p10_ms) +
           ", p90 " + Format("%.4f", timing->p90_ms) + ", n=" + std::to_string(timing->repetitions) +
           ")\n";
  }
  for (const auto* s : {speedup ? &*speedup : nullptr,
                        speedup_vs_reference ? &*speedup_vs_reference : nullptr}) {
    if (!s) continue;
    out += "  speedup vs " + s->baseline + ": " +
           Format("%.3fx (95%% CI %.3f–%.3f", s->ratio, s->ci_low, s->ci_high) + ", " +
           std::to_string(s->pairs) + " interleaved pairs)\n";
  }
  if (floor_ms > 0 && timing) {
    out += Format("  roofline: floor %.4f ms, %.1f%% of it\n", floor_ms, 100.0 * roofline_fraction);
  }
  if (max_l2_rel_error > 0 || allowed_l2_rel_error > 0) {
    out += Format("  accuracy: worst L2 relative error %.3g (allowed %.3g)\n", max_l2_rel_error,
                  allowed_l2_rel_error);
    if (relaxed_tolerance) out.insert(out.size() - 1, " [relaxed tolerance]");
  }
  if (mismatch) {
    const Mismatch& m = *mismatch;
    out += "  mismatch: " + m.tensor + " on '" + m.input_set + "' inputs (" + m.phase + "): " +
           std::to_string(m.bad_count) + " of " + std::to_string(m.elements) +
           " elements bad; worst at " + std::to_string(m.worst_index) +
           Format(": expected %.9g, got %.9g; max rel error %.3g", m.expected, m.got,
                  m.max_rel_error) +
           Format(", L2 rel error %.3g (allowed %.3g)\n", m.l2_rel_error, m.allowed_l2_rel_error);
  }
  for (const KernelResources& r : resources) {
    out += "  kernel " + r.kernel + ": " + std::to_string(r.registers) + " registers, " +
           std::to_string(r.static_shared_bytes) + " B static shared, " +
           std::to_string(r.local_bytes) + " B local";
    if (r.spill_store_bytes > 0 || r.spill_load_bytes > 0) {
      out += " (spills: " + std::to_string(r.spill_store_bytes) + " B stored, " +
             std::to_string(r.spill_load_bytes) + " B loaded)";
    }
    if (r.max_threads_per_block > 0) {
      out += ", max " + std::to_string(r.max_threads_per_block) + " threads/block";
    }
    out += "\n";
  }
  if (!device.name.empty()) {
    out += "  device: " + device.name + " (" + device.Arch() + ")";
    if (device.driver_version) out += ", driver " + std::to_string(device.driver_version);
    if (!device.nvrtc_version.empty()) out += ", NVRTC " + device.nvrtc_version;
    if (device.sm_clock_mhz) out += ", SM clock " + std::to_string(device.sm_clock_mhz) + " MHz";
    if (!device.baseline_library.empty()) out += ", baseline " + device.baseline_library;
    out += "\n";
  }
  out += Format("  overhead: compile %.1f ms", compile_ms);
  if (compile_cached) out += " (cached)";
  out += Format(", check %.1f ms", check_ms);
  out += Format(", timing %.1f ms, total %.1f ms\n", timing_ms, total_ms);
  for (const std::string& c : checks_not_run) out += "  not run: " + c + "\n";
  auto indented = [&out](const std::string& title, const std::string& body, size_t limit) {
    out += "  " + title + ":\n";
    std::string text = body.size() > limit ? body.substr(0, limit) + "\n[… cut]" : body;
    size_t start = 0;
    while (start < text.size()) {
      size_t end = text.find('\n', start);
      if (end == std::string::npos) end = text.size();
      out += "    " + text.substr(start, end - start) + "\n";
      start = end + 1;
    }
  };
  if (!details.empty() && status != EvalStatus::kOk) indented("details", details, 4000);
  if (!device_log.empty()) indented("device output (printf)", device_log, 1000);
  return out;
}

std::string Evaluation::ToJson() const {
  boost::json::object o;
  o["candidate_id"] = candidate_id;
  o["content_hash"] = content_hash;
  o["status"] = std::string(ToString(status));
  o["message"] = message;
  o["details"] = details;
  o["device_log"] = device_log;
  o["checks_not_run"] = boost::json::array(checks_not_run.begin(), checks_not_run.end());
  o["relaxed_tolerance"] = relaxed_tolerance;
  boost::json::array res;
  for (const KernelResources& r : resources) {
    res.push_back({{"kernel", r.kernel},
                   {"registers", r.registers},
                   {"static_shared_bytes", r.static_shared_bytes},
                   {"max_dynamic_shared_bytes", r.max_dynamic_shared_bytes},
                   {"local_bytes", r.local_bytes},
                   {"spill_store_bytes", r.spill_store_bytes},
                   {"spill_load_bytes", r.spill_load_bytes},
                   {"max_threads_per_block", r.max_threads_per_block}});
  }
  o["resources"] = std::move(res);
  if (mismatch) {
    const Mismatch& m = *mismatch;
    o["mismatch"] = {{"tensor", m.tensor},           {"input_set", m.input_set},
                     {"phase", m.phase},             {"bad_count", m.bad_count},
                     {"elements", m.elements},       {"worst_index", m.worst_index},
                     {"expected", Num(m.expected)},  {"got", Num(m.got)},
                     {"max_rel_error", Num(m.max_rel_error)}, {"l2_rel_error", Num(m.l2_rel_error)},
                     {"allowed_l2_rel_error", m.allowed_l2_rel_error}};
  }
  o["max_l2_rel_error"] = Num(max_l2_rel_error);
  o["allowed_l2_rel_error"] = allowed_l2_rel_error;
  if (timing) o["timing"] = TimingToJson(*timing);
  if (baseline_timing) o["baseline_timing"] = TimingToJson(*baseline_timing);
  if (speedup) o["speedup"] = SpeedupToJson(*speedup);
  if (speedup_vs_reference) o["speedup_vs_reference"] = SpeedupToJson(*speedup_vs_reference);
  o["floor_ms"] = floor_ms;
  o["roofline_fraction"] = roofline_fraction;
  if (!cases.empty()) o["cases"] = internal::CaseResultsToJson(cases);
  o["device"] = {{"name", device.name},
                 {"ordinal", device.ordinal},
                 {"arch", device.Arch()},
                 {"driver_version", device.driver_version},
                 {"nvrtc_version", device.nvrtc_version},
                 {"multiprocessors", device.multiprocessors},
                 {"l2_bytes", device.l2_bytes},
                 {"sm_clock_mhz", device.sm_clock_mhz},
                 {"memory_clock_mhz", device.memory_clock_mhz},
                 {"peak_bandwidth_gbps", device.peak_bandwidth_gbps},
                 {"peak_gflops", device.peak_gflops},
                 {"baseline_library", device.baseline_library}};
  if (!device.peak_mma_gflops.empty()) {
    boost::json::object peaks;
    for (const auto& [path, gflops] : device.peak_mma_gflops) peaks[path] = gflops;
    o["device"].as_object()["peak_mma_gflops"] = std::move(peaks);
  }
  o["compile_cached"] = compile_cached;
  o["compile_ms"] = compile_ms;
  o["check_ms"] = check_ms;
  o["timing_ms"] = timing_ms;
  o["total_ms"] = total_ms;
  return boost::json::serialize(o);
}

}  // namespace ksearch
