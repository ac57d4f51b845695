#include <cstdio>
#include <iostream>

#include "commands.h"
#include "ksearch/problem.h"

namespace ksearch::cli {
namespace {

std::string Shape(const Problem& p, const TensorSpec& t) {
  std::string out;
  for (const std::string& e : t.shape) {
    auto v = EvaluateExpression(e, p.dims);
    out += (out.empty() ? "" : "×") + (v.ok() ? std::to_string(*v) : e);
  }
  return out;
}

// A template's points that satisfy its constraints, and all points of its
// space.
std::pair<int64_t, int64_t> CountPoints(const Problem& p, const TemplateSpec& t) {
  int64_t all = 1;
  for (const auto& [name, values] : t.space) all *= static_cast<int64_t>(values.size());
  int64_t valid = 0;
  std::vector<size_t> index(t.space.size(), 0);
  for (int64_t n = 0; n < all; ++n) {
    std::vector<std::pair<std::string, int64_t>> values = p.dims;
    for (const auto& [param, value] : t.kernel.plan.params) {
      int64_t v = value;
      for (size_t d = 0; d < t.space.size(); ++d) {
        if (t.space[d].first == param) v = t.space[d].second[index[d]];
      }
      values.emplace_back(param, v);
    }
    bool ok = true;
    for (const std::string& c : t.constraints) {
      auto holds = EvaluateCondition(c, values);
      ok = ok && holds.ok() && *holds;
    }
    valid += ok ? 1 : 0;
    for (size_t d = 0; d < index.size(); ++d) {  // the next point, odometer order
      if (++index[d] < t.space[d].second.size()) break;
      index[d] = 0;
    }
  }
  return {valid, all};
}

void PrintProblem(const Problem& p) {
  std::cout << p.name << "\n";
  if (!p.torch_equivalent.empty()) std::cout << "  torch:     " << p.torch_equivalent << "\n";
  std::cout << "  dims:     ";
  for (const auto& [k, v] : p.dims) std::cout << " " << k << "=" << v;
  std::cout << "\n";
  // Shape cases (dims that differ from the problem's) and dispatch buckets.
  for (size_t c = 0; c < p.shapes.size(); ++c) {
    const ShapeCase& sc = p.shapes[c];
    std::cout << "  case:      " << sc.name;
    for (const auto& [k, v] : sc.dims) std::cout << " " << k << "=" << v;
    if (sc.timed) {
      std::cout << " (weight " << sc.weight << ")\n";
    } else {
      std::cout << " (check-only)\n";
    }
  }
  if (p.dispatch.enabled()) {
    std::cout << "  buckets:  ";
    for (size_t b = 0; b < p.dispatch.bucket_count(); ++b) std::cout << " " << p.dispatch.BucketName(b);
    std::cout << "\n";
  }
  for (const TensorSpec& t : p.tensors) {
    std::string role = std::string(ToString(t.role)) + ":";
    role.resize(11, ' ');
    std::cout << "  " << role << t.name
              << " " << ToString(t.dtype) << "[" << Shape(p, t) << "]\n";
  }
  std::cout << "  inputs:   ";
  for (const InputSet& s : p.input_sets) {
    std::cout << " " << s.name << "=" << s.fallback.ToString();
    // Per-tensor overrides of the set's distribution.
    for (size_t i = 0; i < s.per_tensor.size(); ++i) {
      std::cout << (i == 0 ? " (" : ", ") << s.per_tensor[i].first << ": "
                << s.per_tensor[i].second.ToString();
    }
    if (!s.per_tensor.empty()) std::cout << ")";
  }
  std::cout << "\n  tolerance: " << ToString(p.tolerance.policy) << "\n";
  auto flops = p.Flops();
  auto bytes = p.Bytes();
  std::printf("  work:      %.3g GFLOP, %.3g GB moved at least\n", flops.ok() ? *flops / 1e9 : 0.0,
              bytes.ok() ? *bytes / 1e9 : 0.0);
  std::cout << "  baseline:  " << (p.baseline.library.empty() ? "reference_fp32 kernel" : p.baseline.library);
  for (size_t i = 0; i < p.baseline.settings.size(); ++i) {
    std::cout << (i == 0 ? " (" : ", ") << p.baseline.settings[i].first << "=" << p.baseline.settings[i].second;
  }
  if (!p.baseline.settings.empty()) std::cout << ")";
  std::cout << "\n  templates: " << p.templates.size();
  for (const TemplateSpec& t : p.templates) {
    auto [valid, all] = CountPoints(p, t);
    std::cout << (&t == &p.templates.front() ? " (" : ", ") << t.name << ": " << valid << " points";
    if (valid != all) std::cout << " of " << all << " before constraints";
  }
  std::cout << (p.templates.empty() ? "" : ")") << "\n  fingerprint: " << p.Fingerprint().substr(0, 16)
            << "\n";
}

}  // namespace

void AddProblemsCommand(CLI::App& app, int* exit_code) {
  auto* cmd = app.add_subcommand("problems", "List the built-in problems, or show one in full");
  cmd->footer(
      "Examples:\n"
      "  ksearch problems                   one line per built-in problem\n"
      "  ksearch problems show matmul       shapes, inputs, tolerance, baseline, templates\n"
      "  ksearch problems show ./my_op --json\n"
      "                                     a problem folder of your own, as self-contained JSON");
  auto* show = cmd->add_subcommand("show", "Show one problem (a built-in name or a path)");
  static std::string name;
  static bool json = false;
  show->add_option("PROBLEM", name, "built-in name or path to a problem folder/JSON")->required();
  show->add_flag("--json", json, "print the self-contained JSON (sources embedded)");
  show->callback([exit_code] {
    auto problem = LoadProblem(name);
    if (!problem.ok()) {
      *exit_code = ReportError(problem.status());
      return;
    }
    if (json) {
      std::cout << problem->ToJson() << "\n";
    } else {
      PrintProblem(*problem);
    }
  });
  cmd->callback([cmd, exit_code] {
    if (!cmd->get_subcommands().empty()) return;
    auto names = BuiltinProblemNames();
    if (names.empty()) {
      std::cerr << "ksearch: no built-in problems found in " << BuiltinProblemsDirectory()
                << " (set KSEARCH_PROBLEMS_DIR)\n";
      *exit_code = kExitFailure;
      return;
    }
    std::printf("%-22s %-10s %-42s %s\n", "NAME", "GFLOP", "TENSORS", "BASELINE");
    for (const std::string& n : names) {
      auto p = LoadProblem(n);
      if (!p.ok()) {
        std::printf("%-22s (does not load: %s)\n", n.c_str(), p.status().message().c_str());
        continue;
      }
      std::string tensors;
      for (const TensorSpec& t : p->tensors) tensors += (tensors.empty() ? "" : " ") + t.name + "[" + Shape(*p, t) + "]";
      auto flops = p->Flops();
      std::printf("%-22s %-10.3g %-42s %s\n", n.c_str(), flops.ok() ? *flops / 1e9 : 0.0, tensors.c_str(),
                  p->baseline.library.empty() ? "reference_fp32" : p->baseline.library.c_str());
    }
  });
}

}  // namespace ksearch::cli
