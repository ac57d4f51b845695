#include "search/prompts.h"

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <set>
#include <utility>
#include <vector>

#include "core/file_util.h"
#include "core/plan_resolve.h"

namespace ksearch {
namespace {

// The placeholders each template may use. contract and categories are
// inserted verbatim into the others, so they may use none.
const std::set<std::string>& Allowed(std::string_view which) {
  static const std::map<std::string, std::set<std::string>, std::less<>> kAllowed = {
      {"system", {"problem_name", "device", "contract", "categories"}},
      {"ideas",
       {"problem", "problem_name", "device", "contract", "categories", "parent_id", "parent",
        "history", "count", "requested_categories", "round"}},
      {"branch",
       {"problem", "problem_name", "device", "contract", "categories", "parent_id", "parent",
        "history", "idea", "idea_category", "branch", "branches", "design_axis"}},
      {"repair",
       {"problem", "problem_name", "device", "contract", "categories", "parent_id", "parent",
        "history", "idea", "idea_category", "failed_id", "failed", "failure"}},
      {"contract", {}},
      {"categories", {}},
  };
  return kAllowed.find(which)->second;
}

Status CheckTemplate(std::string_view which, std::string_view text) {
  const std::set<std::string>& allowed = Allowed(which);
  size_t pos = 0;
  while ((pos = text.find("{{", pos)) != std::string_view::npos) {
    size_t end = text.find("}}", pos + 2);
    if (end == std::string_view::npos) {
      return InvalidArgumentError(std::string(which) + ".md: '{{' at offset " +
                                  std::to_string(pos) + " is never closed with '}}'");
    }
    std::string name(text.substr(pos + 2, end - pos - 2));
    if (!allowed.count(name)) {
      std::string list;
      for (const std::string& a : allowed) list += (list.empty() ? "" : ", ") + a;
      return InvalidArgumentError(
          std::string(which) + ".md: unknown placeholder {{" + name +
          "}}; this template may use: " + (list.empty() ? std::string("none") : list));
    }
    pos = end + 2;
  }
  return Status::Ok();
}

}  // namespace

PromptTemplates PromptTemplates::Builtin() {
  PromptTemplates t;
  t.system = internal::kBuiltinPrompt_system;
  t.ideas = internal::kBuiltinPrompt_ideas;
  t.branch = internal::kBuiltinPrompt_branch;
  t.repair = internal::kBuiltinPrompt_repair;
  t.contract = internal::kBuiltinPrompt_contract;
  t.categories = internal::kBuiltinPrompt_categories;
  return t;
}

StatusOr<PromptTemplates> PromptTemplates::Load(const std::string& directory) {
  std::error_code ec;
  if (!std::filesystem::is_directory(directory, ec)) {
    return NotFoundError("prompt folder " + directory + ": not a folder");
  }
  PromptTemplates t = Builtin();
  std::pair<const char*, std::string*> files[] = {
      {"system", &t.system}, {"ideas", &t.ideas},       {"branch", &t.branch},
      {"repair", &t.repair}, {"contract", &t.contract}, {"categories", &t.categories}};
  for (auto& [name, field] : files) {
    std::string path = internal::JoinPath(directory, std::string(name) + ".md");
    if (!std::filesystem::exists(path, ec)) continue;
    KSEARCH_ASSIGN_OR_RETURN(*field, internal::ReadFile(path, 1u << 20));
    if (Status s = CheckTemplate(name, *field); !s.ok()) return s.WithContext(directory);
  }
  return t;
}

Status PromptTemplates::Validate() const {
  std::pair<const char*, const std::string*> all[] = {
      {"system", &system}, {"ideas", &ideas},       {"branch", &branch},
      {"repair", &repair}, {"contract", &contract}, {"categories", &categories}};
  for (const auto& [name, text] : all) KSEARCH_RETURN_IF_ERROR(CheckTemplate(name, *text));
  return Status::Ok();
}

namespace internal {

std::string RenderTemplate(std::string_view text,
                           const std::map<std::string, std::string>& values) {
  std::string out;
  out.reserve(text.size() * 2);
  size_t pos = 0;
  for (;;) {
    size_t open = text.find("{{", pos);
    size_t close = open == std::string_view::npos ? open : text.find("}}", open + 2);
    if (close == std::string_view::npos) {
      out.append(text.substr(pos));
      return out;
    }
    out.append(text.substr(pos, open - pos));
    auto it = values.find(std::string(text.substr(open + 2, close - open - 2)));
    if (it != values.end()) out += it->second;
    pos = close + 2;
  }
}

std::string RenderProblem(const Problem& problem) {
  std::string out =
      problem.description.empty() ? "Problem " + problem.name + "." : problem.description;
  while (!out.empty() && out.back() == '\n') out.pop_back();
  out += "\n\nIn short:\nDims:";
  for (const auto& [name, value] : problem.dims) {
    out += " " + name + " = " + std::to_string(value) + ";";
  }
  out.back() = '.';
  out += "\nTensors:";
  for (const TensorSpec& t : problem.tensors) {
    std::string shape;
    for (const std::string& s : t.shape) shape += (shape.empty() ? "" : ", ") + s;
    out += "\n- " + t.name + ": " + std::string(ToString(t.role)) +
           (t.role == TensorRole::kInout ? " (holds the input; overwrite it in place with the result)" : "") +
           ", " + std::string(ToString(t.dtype)) + ", [" + shape + "], contiguous row-major";
  }
  if (!problem.torch_equivalent.empty()) {
    out += "\nPyTorch equivalent: `" + problem.torch_equivalent + "`";
  }
  out += "\nTolerance: " + std::string(ToString(problem.tolerance.policy)) + ".";
  return out;
}

std::string RenderKernel(const Candidate& candidate) {
  std::string source = candidate.source;
  if (!source.empty() && source.back() != '\n') source += '\n';
  std::string out = "```cuda\n" + source + "```\n\nLaunch plan:\n\n```json\n" +
                    candidate.plan.ToJson() + "\n```\n";
  if (!candidate.compile_options.empty()) {
    out += "\nCompile options:";
    for (const std::string& o : candidate.compile_options) out += " " + o;
    out += "\n";
  }
  return out;
}

std::string RenderEvaluation(const Evaluation& e) {
  // Only what the kernel did: no overhead times, which differ from run to run
  // and would make identical searches send different prompts (replay keys on
  // the prompt's hash).
  char text[320];
  std::string out = "Evaluation: " + std::string(ToString(e.status));
  if (!e.message.empty()) out += " (" + e.message + ")";
  out += "\n";
  if (e.timing) {
    std::snprintf(text, sizeof(text), "- time: median %.4f ms (95%% CI %.4f-%.4f ms)\n",
                  e.timing->median_ms, e.timing->ci_low_ms, e.timing->ci_high_ms);
    out += text;
  }
  if (e.speedup) {
    std::snprintf(text, sizeof(text), "- speedup: %.3fx vs %s (>1 is faster)\n", e.speedup->ratio,
                  e.speedup->baseline.c_str());
    out += text;
  }
  if (e.timing && e.floor_ms > 0) {
    std::snprintf(text, sizeof(text),
                  "- roofline: %.1f%% of the floor (%.4f ms from the op's bytes and flops)\n",
                  100.0 * e.roofline_fraction, e.floor_ms);
    out += text;
  }
  if (e.ok() && e.allowed_l2_rel_error > 0) {
    std::snprintf(text, sizeof(text), "- accuracy: L2 relative error %.3g (allowed %.3g)\n",
                  e.max_l2_rel_error, e.allowed_l2_rel_error);
    out += text;
  }
  if (e.mismatch) {
    const Mismatch& m = *e.mismatch;
    std::snprintf(text, sizeof(text),
                  "- mismatch: %s on '%s' inputs (%s): %lld of %lld elements wrong; worst at index "
                  "%lld: expected %.9g, got %.9g; L2 relative error %.3g (allowed %.3g)\n",
                  m.tensor.c_str(), m.input_set.c_str(), m.phase.c_str(),
                  static_cast<long long>(m.bad_count), static_cast<long long>(m.elements),
                  static_cast<long long>(m.worst_index), m.expected, m.got, m.l2_rel_error,
                  m.allowed_l2_rel_error);
    out += text;
  }
  for (const KernelResources& r : e.resources) {
    std::snprintf(text, sizeof(text),
                  "- kernel %s: %d registers/thread, %lld B static shared, %lld B dynamic shared, "
                  "%lld B local",
                  r.kernel.c_str(), r.registers, static_cast<long long>(r.static_shared_bytes),
                  static_cast<long long>(std::max<int64_t>(r.max_dynamic_shared_bytes, 0)),
                  static_cast<long long>(r.local_bytes));
    out += text;
    if (r.spill_store_bytes > 0 || r.spill_load_bytes > 0) {
      std::snprintf(text, sizeof(text), " (spills: %lld B stored, %lld B loaded)",
                    static_cast<long long>(r.spill_store_bytes),
                    static_cast<long long>(r.spill_load_bytes));
      out += text;
    }
    out += "\n";
  }
  for (const std::string& c : e.checks_not_run) out += "- not checked: " + c + "\n";
  if (!e.ok() && !e.details.empty()) {
    // Compile logs can be long; the first errors are what a fix needs.
    constexpr size_t kMaxDetails = 4000;
    std::string details = e.details.substr(0, kMaxDetails);
    if (e.details.size() > kMaxDetails) details += "\n[… log cut]";
    out += "Details:\n```\n" + details + (details.back() == '\n' ? "" : "\n") + "```\n";
  }
  return out;
}


std::string RenderIdeaHistory(const SearchHistory* history, const std::string& parent_id,
                              int max_ideas) {
  if (!history || history->ideas.empty() || max_ideas <= 0) return "(none yet)";
  std::vector<const Idea*> same, other;
  for (auto it = history->ideas.rbegin(); it != history->ideas.rend(); ++it) {
    (it->parent_id == parent_id ? same : other).push_back(&*it);
  }
  std::string out;
  int shown = 0;
  for (const auto* group : {&same, &other}) {
    for (const Idea* idea : *group) {
      if (shown++ >= max_ideas) break;
      out += "- " + idea->id + " [" + std::string(ToString(idea->category)) + "] on " +
             idea->parent_id + ": " + idea->text +
             "\n  Outcome: " + (idea->outcome.empty() ? std::string("not judged") : idea->outcome) +
             "\n";
    }
  }
  int total = static_cast<int>(history->ideas.size());
  if (total > max_ideas) {
    out += "(" + std::to_string(total - max_ideas) + " older ideas not shown)\n";
  }
  return out;
}

namespace {

// What each architecture offers a kernel writer, for the prompts: shared
// memory per SM and the most one block may opt into, resident threads per SM,
// and the features that change how a fast kernel is written. The first entry
// whose cc is at most the device's applies (within the same major version).
struct ArchFacts {
  int cc = 0;  // major * 10 + minor
  int shared_kib_per_sm = 0;
  int shared_kib_per_block = 0;
  int max_threads_per_sm = 0;
  const char* features = "";
};

constexpr ArchFacts kArchFacts[] = {
    {120, 100, 99, 1536,
     "cp.async, TMA and thread-block clusters; mma.sync tensor cores (fp16/bf16/tf32/fp8/fp4); "
     "no wgmma"},
    {100, 228, 227, 2048,
     "thread-block clusters, TMA, distributed shared memory, tcgen05 tensor cores with tensor "
     "memory"},
    {90, 228, 227, 2048,
     "thread-block clusters (up to 8 portable, 16 opt-in), TMA (cp.async.bulk.tensor), "
     "distributed shared memory, wgmma (warpgroup MMA, fp16/bf16/tf32/fp8), mma.sync"},
    {89, 100, 99, 1536, "cp.async, mma.sync tensor cores (fp16/bf16/tf32/fp8); no TMA or wgmma"},
    {86, 100, 99, 1536, "cp.async, mma.sync tensor cores (fp16/bf16/tf32); no TMA or wgmma"},
    {80, 164, 163, 2048, "cp.async, mma.sync tensor cores (fp16/bf16/tf32/fp64); no TMA or wgmma"},
    {75, 64, 64, 1024, "mma.sync tensor cores (fp16); no cp.async"},
    {70, 96, 96, 2048, "wmma tensor cores (fp16); no cp.async"},
};

const ArchFacts* FactsFor(const DeviceInfo& device) {
  const int cc = device.cc_major * 10 + device.cc_minor;
  for (const ArchFacts& f : kArchFacts) {
    if (f.cc <= cc && f.cc / 10 == device.cc_major) return &f;
  }
  return nullptr;
}

}  // namespace

std::string RenderPerformance(const HistoryEntry& entry, const Problem& problem) {
  const Evaluation& e = entry.evaluation;
  const DeviceInfo& device = e.device;
  std::string out;
  char text[320];
  if (e.timing && e.timing->median_ms > 0) {
    const double seconds = e.timing->median_ms * 1e-3;
    if (auto bytes = problem.Bytes(); bytes.ok() && *bytes > 0) {
      const double gbps = *bytes / seconds / 1e9;
      std::snprintf(text, sizeof(text), "- achieved: %.0f GB/s of the op's minimum traffic", gbps);
      out += text;
      if (device.peak_bandwidth_gbps > 0) {
        std::snprintf(text, sizeof(text), " (%.0f%% of the measured bandwidth)",
                      100.0 * gbps / device.peak_bandwidth_gbps);
        out += text;
      }
      out += "\n";
    }
    if (auto flops = problem.Flops(); flops.ok() && *flops > 0) {
      const double gflops = *flops / seconds / 1e9;
      std::snprintf(text, sizeof(text), "- achieved: %.2f TFLOP/s", gflops / 1000.0);
      out += text;
      if (device.peak_gflops > 0) {
        std::snprintf(text, sizeof(text), " (%.0f%% of the fp32 FMA peak", 100.0 * gflops / device.peak_gflops);
        out += text;
        for (const auto& [path, peak] : device.peak_mma_gflops) {
          if (peak <= 0) continue;
          std::snprintf(text, sizeof(text), ", %.0f%% of the %s peak", 100.0 * gflops / peak, path.c_str());
          out += text;
        }
        out += ")";
      }
      out += "\n";
    }
  }
  // Theoretical occupancy of each launch, from the block size the plan gives
  // at the problem's dims and the registers and shared memory the judge read
  // from the kernel (the driver's allocation rules, simplified: registers by
  // 256 per warp, 1 KiB of shared memory reserved per block).
  const ArchFacts* facts = FactsFor(device);
  auto resolved = ResolvePlan(problem, entry.candidate.plan);
  if (!facts || !resolved.ok()) return out;
  for (size_t l = 0; l < resolved->launches.size(); ++l) {
    const ResolvedLaunch& launch = resolved->launches[l];
    auto r = std::find_if(e.resources.begin(), e.resources.end(),
                          [&](const KernelResources& k) { return k.kernel == launch.kernel; });
    if (r == e.resources.end() || r->registers < 0 || launch.Threads() <= 0) continue;
    const int64_t warps = (launch.Threads() + 31) / 32;
    const int64_t regs_per_warp = (std::max(r->registers, 1) * 32 + 255) / 256 * 256;
    const int64_t by_registers = 65536 / std::max<int64_t>(regs_per_warp * warps, 1);
    const int64_t shared = std::max<int64_t>(r->static_shared_bytes, 0) + launch.shared_bytes + 1024;
    const int64_t by_shared = int64_t{facts->shared_kib_per_sm} * 1024 / shared;
    const int64_t by_threads = facts->max_threads_per_sm / (warps * 32);
    const int64_t blocks = std::min({by_registers, by_shared, by_threads, int64_t{32}});
    const char* limit = blocks == by_threads     ? "threads per SM"
                        : blocks == 32            ? "blocks per SM"
                        : blocks == by_registers  ? "registers"
                                                  : "shared memory";
    const int64_t grid_blocks = int64_t{launch.grid[0]} * launch.grid[1] * launch.grid[2];
    std::snprintf(text, sizeof(text),
                  "- launch %zu (%s): %lld blocks of %lld threads; at most %lld resident blocks per SM "
                  "(limited by %s): %.0f%% theoretical occupancy",
                  l, launch.kernel.c_str(), static_cast<long long>(grid_blocks),
                  static_cast<long long>(launch.Threads()), static_cast<long long>(blocks), limit,
                  100.0 * static_cast<double>(blocks * warps * 32) / facts->max_threads_per_sm);
    out += text;
    // Waves need the SM count, which a compile-only evaluator does not know.
    if (device.multiprocessors > 0 && blocks > 0) {
      std::snprintf(text, sizeof(text), "; %.2f waves over %d SMs",
                    static_cast<double>(grid_blocks) /
                        static_cast<double>(blocks * device.multiprocessors),
                    device.multiprocessors);
      out += text;
    }
    out += "\n";
  }
  return out;
}

std::string RenderEntry(const HistoryEntry& entry, const Problem& problem) {
  return RenderKernel(entry.candidate) + "\n" + RenderEvaluation(entry.evaluation) +
         RenderPerformance(entry, problem);
}

std::string RenderDevice(const DeviceInfo& device) {
  // A compile-only evaluator knows the target arch only.
  bool named = !device.name.empty() && device.name.find("compile-only") == std::string::npos;
  if (!named && !device.cc_major) return "an NVIDIA GPU";
  std::string out = named ? device.name + " (" + device.Arch() + ")" : device.Arch();
  char line[256];
  if (device.multiprocessors > 0) {
    std::snprintf(line, sizeof line, "\n- %d SMs", device.multiprocessors);
    out += line;
  }
  if (const ArchFacts* f = FactsFor(device)) {
    std::snprintf(line, sizeof line,
                  "\n- per SM: %d KiB shared memory, 65536 32-bit registers (at most 255 per "
                  "thread), %d resident threads; per block: at most %d KiB shared memory "
                  "(above 48 KiB by opt-in, which the evaluator makes), 1024 threads",
                  f->shared_kib_per_sm, f->max_threads_per_sm, f->shared_kib_per_block);
    out += line;
    out += "\n- features: ";
    out += f->features;
  }
  if (device.l2_bytes > 0) {
    std::snprintf(line, sizeof line, "\n- L2 cache: %.0f MiB",
                  static_cast<double>(device.l2_bytes) / (1 << 20));
    out += line;
  }
  if (device.peak_bandwidth_gbps > 0) {
    std::snprintf(line, sizeof line, "\n- measured DRAM bandwidth: %.0f GB/s",
                  device.peak_bandwidth_gbps);
    out += line;
  }
  if (device.peak_gflops > 0) {
    std::snprintf(line, sizeof line, "\n- measured fp32 FMA peak: %.1f TFLOP/s",
                  device.peak_gflops / 1000.0);
    out += line;
  }
  for (const auto& [path, gflops] : device.peak_mma_gflops) {
    if (gflops <= 0) continue;
    std::snprintf(line, sizeof line, "\n- measured %s tensor-core peak: %.0f TFLOP/s", path.c_str(),
                  gflops / 1000.0);
    out += line;
  }
  return out;
}

std::string DesignAxis(int branch, int branches) {
  static constexpr const char* kAxes[] = {
      "the tiling: how much work each thread and block owns (tile shapes, elements per thread)",
      "the memory path: how data moves (vector widths, shared-memory staging, cp.async/TMA, "
      "caching hints, layout of what is staged)",
      "the parallel decomposition: which dimension maps to threads, warps and blocks (split "
      "along the reduction, one warp per row, persistent blocks…)",
      "the instruction mix: fewer instructions per output (warp shuffles, fused operations, "
      "tensor-core instructions, cheaper math)",
      "latency hiding: more independent work in flight (unrolling, multi-stage pipelines, "
      "double buffering, occupancy)",
      "the boldest variant you believe is correct: a different algorithm for the same result",
  };
  if (branches <= 1) return "your best judgment of every detail";
  return kAxes[static_cast<size_t>(branch) % (sizeof kAxes / sizeof kAxes[0])];
}

}  // namespace internal
}  // namespace ksearch
