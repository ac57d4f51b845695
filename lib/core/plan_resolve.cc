#include "core/plan_resolve.h"

#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <string>
#include <string_view>

namespace ksearch::internal {

std::vector<std::pair<std::string, int64_t>> PlanValues(const Problem& problem,
                                                        const LaunchPlan& plan) {
  std::vector<std::pair<std::string, int64_t>> values = problem.dims;
  values.insert(values.end(), plan.params.begin(), plan.params.end());
  return values;
}

std::vector<std::string> ParamDefines(const LaunchPlan& plan) {
  std::vector<std::string> out;
  for (const auto& [name, value] : plan.params) {
    out.push_back("-D" + name + "=" + std::to_string(value));
  }
  return out;
}

namespace {

Status FieldError(const std::string& field, const Status& status) {
  return InvalidArgumentError(field + ": " + status.message());
}

Status OverCap(const std::string& field, size_t count, std::string_view what, size_t cap) {
  return InvalidArgumentError(field + ": " + std::to_string(count) + " " + std::string(what) +
                              " (at most " + std::to_string(cap) + ")");
}

// The start of an over-long text, enough to recognize it in a message.
std::string Head(std::string_view text) {
  static constexpr size_t kShown = 40;
  return text.size() <= kShown ? std::string(text) : std::string(text.substr(0, kShown)) + "...";
}

Status CheckLength(const std::string& field, std::string_view text, size_t cap) {
  if (text.size() <= cap) return Status::Ok();
  return InvalidArgumentError(field + ": '" + Head(text) + "' is " + std::to_string(text.size()) +
                              " characters long (at most " + std::to_string(cap) + ")");
}

}  // namespace

Status CheckPlanCaps(const LaunchPlan& plan) {
  if (plan.params.size() > kMaxParams) {
    return OverCap("params", plan.params.size(), "params", kMaxParams);
  }
  for (size_t i = 0; i < plan.params.size(); ++i) {
    KSEARCH_RETURN_IF_ERROR(
        CheckLength("params[" + std::to_string(i) + "]", plan.params[i].first, kMaxNameLength));
  }
  if (plan.workspace.size() > kMaxWorkspaces) {
    return OverCap("workspace", plan.workspace.size(), "workspace buffers", kMaxWorkspaces);
  }
  for (size_t i = 0; i < plan.workspace.size(); ++i) {
    std::string prefix = "workspace[" + std::to_string(i) + "]";
    KSEARCH_RETURN_IF_ERROR(CheckLength(prefix + ".name", plan.workspace[i].name, kMaxNameLength));
    KSEARCH_RETURN_IF_ERROR(
        CheckLength(prefix + ".elements", plan.workspace[i].elements, kMaxExpressionLength));
  }
  if (plan.launches.size() > kMaxLaunches) {
    return OverCap("launches", plan.launches.size(), "launches", kMaxLaunches);
  }
  for (size_t i = 0; i < plan.launches.size(); ++i) {
    const LaunchSpec& spec = plan.launches[i];
    std::string prefix = "launches[" + std::to_string(i) + "]";
    KSEARCH_RETURN_IF_ERROR(CheckLength(prefix + ".kernel", spec.kernel, kMaxNameLength));
    auto check_dim3 = [&](const char* name, const std::vector<std::string>& exprs) {
      for (size_t d = 0; d < exprs.size(); ++d) {
        KSEARCH_RETURN_IF_ERROR(CheckLength(prefix + "." + name + "[" + std::to_string(d) + "]",
                                            exprs[d], kMaxExpressionLength));
      }
      return Status::Ok();
    };
    KSEARCH_RETURN_IF_ERROR(check_dim3("grid", spec.grid));
    KSEARCH_RETURN_IF_ERROR(check_dim3("block", spec.block));
    KSEARCH_RETURN_IF_ERROR(
        CheckLength(prefix + ".shared_bytes", spec.shared_bytes, kMaxExpressionLength));
    if (spec.args.size() > kMaxArgsPerLaunch) {
      return OverCap(prefix + ".args", spec.args.size(), "arguments", kMaxArgsPerLaunch);
    }
    for (size_t a = 0; a < spec.args.size(); ++a) {
      // A scalar is "EXPR:TYPE" (":i32" and the like take 4 characters);
      // anything else names a tensor or workspace.
      const std::string& arg = spec.args[a];
      bool scalar = arg.find(':') != std::string::npos;
      KSEARCH_RETURN_IF_ERROR(CheckLength(prefix + ".args[" + std::to_string(a) + "]", arg,
                                          scalar ? kMaxExpressionLength + 4 : kMaxNameLength));
    }
  }
  return Status::Ok();
}

namespace {

StatusOr<int64_t> Eval(const std::string& field, const std::string& expr,
                       const std::vector<std::pair<std::string, int64_t>>& values) {
  auto v = EvaluateExpression(expr, values);
  if (!v.ok()) return FieldError(field, v.status());
  return *v;
}

}  // namespace

StatusOr<ResolvedPlan> ResolvePlan(const Problem& problem, const LaunchPlan& plan) {
  KSEARCH_RETURN_IF_ERROR(CheckPlanCaps(plan));
  for (const auto& [name, value] : plan.params) {
    if (problem.Dim(name)) {
      return InvalidArgumentError("params." + name + ": a param may not shadow the problem dim '" +
                                  name + "'");
    }
    if (problem.FindTensor(name)) {
      return InvalidArgumentError("params." + name + ": a param may not shadow the tensor '" +
                                  name + "'");
    }
  }
  auto values = PlanValues(problem, plan);
  ResolvedPlan out;
  int64_t workspace_bytes = 0;
  for (size_t i = 0; i < plan.workspace.size(); ++i) {
    const WorkspaceSpec& w = plan.workspace[i];
    std::string field = "workspace[" + std::to_string(i) + "].elements";
    if (problem.FindTensor(w.name)) {
      return InvalidArgumentError("workspace[" + std::to_string(i) + "].name: '" + w.name +
                                  "' is already a tensor of the problem");
    }
    for (size_t j = 0; j < i; ++j) {
      if (plan.workspace[j].name == w.name) {
        return InvalidArgumentError("workspace[" + std::to_string(i) + "].name: duplicate '" +
                                    w.name + "'");
      }
    }
    KSEARCH_ASSIGN_OR_RETURN(int64_t elements, Eval(field, w.elements, values));
    int64_t bytes = 0;
    if (elements <= 0) {
      return InvalidArgumentError(field + ": '" + w.elements + "' = " + std::to_string(elements) +
                                  " (must be positive)");
    }
    if (__builtin_mul_overflow(elements, SizeOf(w.dtype), &bytes) ||
        __builtin_add_overflow(workspace_bytes, bytes, &workspace_bytes) ||
        workspace_bytes > kMaxWorkspaceBytes) {
      return InvalidArgumentError(
          field + ": '" + w.elements + "' = " + std::to_string(elements) + " " +
          std::string(ToString(w.dtype)) + " elements take the plan's workspace past " +
          std::to_string(kMaxWorkspaceBytes) + " bytes (" + std::to_string(kMaxWorkspaceBytes >> 30) +
          " GiB, the cap for all buffers together)");
    }
    out.workspace_elements.push_back(elements);
  }
  for (size_t i = 0; i < plan.launches.size(); ++i) {
    const LaunchSpec& spec = plan.launches[i];
    std::string prefix = "launches[" + std::to_string(i) + "]";
    ResolvedLaunch launch;
    launch.kernel = spec.kernel;
    if (spec.grid.size() != 3 || spec.block.size() != 3) {
      return InvalidArgumentError(prefix + ": grid and block need three entries");
    }
    static constexpr int64_t kGridLimits[3] = {2147483647, 65535, 65535};
    static constexpr int64_t kBlockLimits[3] = {1024, 1024, 64};
    for (int d = 0; d < 3; ++d) {
      std::string gfield = prefix + ".grid[" + std::to_string(d) + "]";
      KSEARCH_ASSIGN_OR_RETURN(int64_t g, Eval(gfield, spec.grid[d], values));
      if (g < 1 || g > kGridLimits[d]) {
        return InvalidArgumentError(gfield + ": '" + spec.grid[d] + "' = " + std::to_string(g) +
                                    " (must be 1.." + std::to_string(kGridLimits[d]) + ")");
      }
      launch.grid[d] = static_cast<uint32_t>(g);
      std::string bfield = prefix + ".block[" + std::to_string(d) + "]";
      KSEARCH_ASSIGN_OR_RETURN(int64_t b, Eval(bfield, spec.block[d], values));
      if (b < 1 || b > kBlockLimits[d]) {
        return InvalidArgumentError(bfield + ": '" + spec.block[d] + "' = " + std::to_string(b) +
                                    " (must be 1.." + std::to_string(kBlockLimits[d]) + ")");
      }
      launch.block[d] = static_cast<uint32_t>(b);
    }
    if (launch.Threads() > 1024) {
      return InvalidArgumentError(prefix + ".block: " + std::to_string(launch.Threads()) +
                                  " threads per block (at most 1024)");
    }
    KSEARCH_ASSIGN_OR_RETURN(launch.shared_bytes,
                             Eval(prefix + ".shared_bytes", spec.shared_bytes, values));
    if (launch.shared_bytes < 0) {
      return InvalidArgumentError(prefix + ".shared_bytes: '" + spec.shared_bytes + "' = " +
                                  std::to_string(launch.shared_bytes) + " (must be >= 0)");
    }
    for (size_t a = 0; a < spec.args.size(); ++a) {
      const std::string& text = spec.args[a];
      std::string field = prefix + ".args[" + std::to_string(a) + "]";
      ResolvedArg arg;
      size_t colon = text.rfind(':');
      if (colon == std::string::npos) {
        bool found = false;
        for (size_t t = 0; t < problem.tensors.size() && !found; ++t) {
          if (problem.tensors[t].name == text) {
            arg.kind = ResolvedArg::Kind::kTensor;
            arg.index = static_cast<int>(t);
            found = true;
          }
        }
        for (size_t w = 0; w < plan.workspace.size() && !found; ++w) {
          if (plan.workspace[w].name == text) {
            arg.kind = ResolvedArg::Kind::kWorkspace;
            arg.index = static_cast<int>(w);
            found = true;
          }
        }
        if (!found) {
          std::string names;
          for (const auto& t : problem.tensors) names += (names.empty() ? "" : ", ") + t.name;
          for (const auto& w : plan.workspace) names += (names.empty() ? "" : ", ") + w.name;
          return InvalidArgumentError(field + ": '" + text +
                                      "' is not a tensor or workspace (known: " + names +
                                      "); scalars are written EXPR:TYPE");
        }
      } else {
        std::string expr = text.substr(0, colon);
        std::string type = text.substr(colon + 1);
        if (type == "f32") {
          arg.kind = ResolvedArg::Kind::kF32;
          auto integer = EvaluateExpression(expr, values);
          if (integer.ok()) {
            arg.float_value = static_cast<float>(*integer);
          } else {
            errno = 0;
            char* end = nullptr;
            double value = std::strtod(expr.c_str(), &end);
            if (end == expr.c_str() || *end != '\0' || errno != 0 || !std::isfinite(value)) {
              // The expression's own error says more than "not a float" when
              // the text was meant as an expression (a limit, an overflow).
              return InvalidArgumentError(field + ": not a float literal, nor an integer " +
                                          integer.status().message());
            }
            if (std::fabs(value) > std::numeric_limits<float>::max()) {
              return InvalidArgumentError(field + ": '" + expr + "' does not fit in f32");
            }
            arg.float_value = static_cast<float>(value);
          }
        } else if (type == "i32" || type == "i64") {
          arg.kind = type == "i32" ? ResolvedArg::Kind::kI32 : ResolvedArg::Kind::kI64;
          KSEARCH_ASSIGN_OR_RETURN(arg.int_value, Eval(field, expr, values));
          if (type == "i32" && (arg.int_value > std::numeric_limits<int32_t>::max() ||
                                arg.int_value < std::numeric_limits<int32_t>::min())) {
            return InvalidArgumentError(field + ": '" + expr + "' = " +
                                        std::to_string(arg.int_value) +
                                        " does not fit in i32; use :i64");
          }
        } else {
          return InvalidArgumentError(field + ": scalar type '" + type +
                                      "' is not one of i32, i64, f32");
        }
      }
      launch.args.push_back(arg);
    }
    out.launches.push_back(std::move(launch));
  }
  return out;
}

}  // namespace ksearch::internal
