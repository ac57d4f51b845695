#include "ksearch/evaluation.h"

#include "core/evaluation_json.h"

#include <boost/json/serialize.hpp>

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

std::string Format(const char* format, double a, double b = 0, double c = 0) {
  char text[160];
  std::snprintf(text, sizeof(text), format, a, b, c);
  return text;
}

// One line per shape case: name, dims, status, time, speedup.
std::string CaseLines(const std::vector<CaseResult>& cases) {
  std::string out;
  for (const CaseResult& c : cases) {
    std::string dims;
    for (const auto& [name, value] : c.dims) {
      dims += (dims.empty() ? "" : " ") + name + "=" + std::to_string(value);
    }
    std::string figures;
    if (c.timed && c.median_ms > 0) {
      figures = Format(", %.4f ms (weight %g)", c.median_ms, c.weight);
      if (c.speedup > 0) {
        figures += Format(", %.3fx vs ", c.speedup) + c.baseline + Format(" (%.4f ms)", c.baseline_median_ms);
      }
    }
    out += "  case " + c.name + " (" + dims + (c.timed ? "" : ", check-only") + "): " +
           std::string(ToString(c.status)) + figures +
           (c.status == EvalStatus::kOk || c.status == EvalStatus::kCompiled ? "" : " — " + c.message) +
           "\n";
  }
  return out;
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
  out += CaseLines(cases);
  if (timing) {
    out += Format("  time: median %.4f ms (95%% CI %.4f–%.4f", timing->median_ms, timing->ci_low_ms,
                  timing->ci_high_ms);
    out += ", min " + Format("%.4f", timing->min_ms) + ", p10 " + Format("%.4f", timing->p10_ms) +
           ", p90 " + Format("%.4f", timing->p90_ms) + ", n=" + std::to_string(timing->repetitions) +
           ")\n";
  }
  if (const Speedup* s = speedup ? &*speedup : nullptr) {
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
  return boost::json::serialize(internal::EvaluationToJson(*this));
}

}  // namespace ksearch
