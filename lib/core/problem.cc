#include "ksearch/problem.h"

#include <sys/stat.h>

#include <algorithm>
#include <boost/json.hpp>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <dirent.h>

#include "core/baseline_settings.h"
#include "core/file_util.h"
#include "core/hash.h"
#include "core/json_util.h"
#include "core/plan_resolve.h"

namespace ksearch {

namespace internal {
StatusOr<LaunchPlan> ParsePlanNode(const JsonNode& node);
boost::json::object PlanToJsonObject(const LaunchPlan& plan);
}  // namespace internal

namespace {

using internal::JsonDocument;
using internal::JsonNode;

// A file error found while reading a field keeps its code (kNotFound,
// kPermissionDenied) and gains the field's location.
Status FileError(const JsonNode& node, const Status& error) {
  return Status(error.code(), node.Error(error.message()).message());
}

bool IsIdentifier(std::string_view name) {
  if (name.empty() || !(std::isalpha(static_cast<unsigned char>(name[0])) || name[0] == '_')) {
    return false;
  }
  return std::all_of(name.begin(), name.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '_';
  });
}

struct DistributionCall {
  std::string kind;
  double a = 0.0;
  double b = 0.0;
};

// "KIND(A,B)" (spaces already removed) of the distribution in `node`.
StatusOr<DistributionCall> ParseCall(const JsonNode& node, const std::string& call) {
  auto open = call.find('('), comma = call.find(','), close = call.find(')');
  if (open == std::string::npos || comma == std::string::npos || close != call.size() - 1 ||
      comma < open) {
    return node.Error("expected 'normal(MEAN, STDDEV)' or 'uniform(LOW, HIGH)', optionally followed "
                      "by '* 10^uniform(LOW, HIGH) per row' (or 'per column'), got " +
                      node.Describe());
  }
  DistributionCall out;
  out.kind = call.substr(0, open);
  std::string a = call.substr(open + 1, comma - open - 1);
  std::string b = call.substr(comma + 1, close - comma - 1);
  char* end_a = nullptr;
  char* end_b = nullptr;
  out.a = std::strtod(a.c_str(), &end_a);
  out.b = std::strtod(b.c_str(), &end_b);
  if (a.empty() || b.empty() || *end_a != '\0' || *end_b != '\0' || !std::isfinite(out.a) ||
      !std::isfinite(out.b)) {
    return node.Error("distribution parameters must be numbers, got " + node.Describe());
  }
  if (out.kind == "uniform" && out.b <= out.a) {
    return node.Error("uniform(LOW, HIGH) needs LOW < HIGH, got " + node.Describe());
  }
  return out;
}

// "normal(0, 1)", "uniform(-1, 1)", "normal(0, 1) * 10^uniform(-4, 0) per row".
StatusOr<Distribution> ParseDistribution(const JsonNode& node) {
  KSEARCH_ASSIGN_OR_RETURN(std::string text, node.String());
  std::string compact;
  for (char c : text) {
    if (!std::isspace(static_cast<unsigned char>(c))) compact += c;
  }
  size_t close = compact.find(')');
  std::string scale = close == std::string::npos ? "" : compact.substr(close + 1);
  KSEARCH_ASSIGN_OR_RETURN(DistributionCall base,
                           ParseCall(node, compact.substr(0, close == std::string::npos ? close : close + 1)));
  Distribution d;
  if (base.kind == "normal") {
    if (base.b <= 0) return node.Error("the standard deviation must be positive, got " + node.Describe());
    d = Distribution::Normal(base.a, base.b);
  } else if (base.kind == "uniform") {
    d = Distribution::Uniform(base.a, base.b);
  } else {
    return node.Error("unknown distribution '" + base.kind + "' (expected normal or uniform)");
  }
  if (scale.empty()) return d;
  // The scale: "*10^uniform(LOW,HIGH)per(row|column)" once spaces are gone.
  constexpr std::string_view kPower = "*10^";
  size_t scale_close = scale.find(')');
  if (!scale.starts_with(kPower) || scale_close == std::string::npos) {
    return node.Error("after the distribution, a scale is written '* 10^uniform(LOW, HIGH) per row' "
                      "or '... per column', got " + node.Describe());
  }
  KSEARCH_ASSIGN_OR_RETURN(DistributionCall exponent,
                           ParseCall(node, scale.substr(kPower.size(), scale_close + 1 - kPower.size())));
  if (exponent.kind != "uniform") {
    return node.Error("a scale's decimal exponent is drawn from uniform(LOW, HIGH), got '" +
                      exponent.kind + "' in " + node.Describe());
  }
  // Beyond 10^±38 every fp32 value is 0 or infinite.
  if (exponent.a < -38 || exponent.b > 38) {
    return node.Error("a scale's decimal exponents must lie in [-38, 38] (fp32's range), got " +
                      node.Describe());
  }
  std::string axis = scale.substr(scale_close + 1);
  if (axis != "perrow" && axis != "percolumn") {
    return node.Error("a scale applies 'per row' or 'per column', got " + node.Describe());
  }
  return d.ScaledPer(axis == "perrow" ? Distribution::ScaleAxis::kRow : Distribution::ScaleAxis::kColumn,
                     exponent.a, exponent.b);
}

StatusOr<KernelSpec> ParseKernel(const JsonNode& node, std::string_view directory) {
  KSEARCH_RETURN_IF_ERROR(node.CheckKeys({"source", "source_text", "plan"}));
  KernelSpec spec;
  KSEARCH_ASSIGN_OR_RETURN(auto text, node.Find("source_text"));
  KSEARCH_ASSIGN_OR_RETURN(auto file, node.Find("source"));
  if (file) {
    KSEARCH_ASSIGN_OR_RETURN(spec.source_file, file->String());
  }
  if (text) {
    KSEARCH_ASSIGN_OR_RETURN(spec.source, text->String());
  } else if (file) {
    std::string path = internal::JoinPath(directory, spec.source_file);
    auto contents = internal::ReadFile(path);
    if (!contents.ok()) return FileError(*file, contents.status());
    spec.source = std::move(*contents);
  } else {
    return node.Error("needs 'source' (a .cu file name) or 'source_text'");
  }
  KSEARCH_ASSIGN_OR_RETURN(JsonNode plan_node, node.Required("plan"));
  if (plan_node.IsString()) {
    KSEARCH_ASSIGN_OR_RETURN(std::string plan_file, plan_node.String());
    std::string path = internal::JoinPath(directory, plan_file);
    auto contents = internal::ReadFile(path);
    if (!contents.ok()) return FileError(plan_node, contents.status());
    auto plan = LaunchPlan::FromJson(*contents, path);
    if (!plan.ok()) return plan.status();
    spec.plan = std::move(*plan);
  } else {
    KSEARCH_ASSIGN_OR_RETURN(spec.plan, internal::ParsePlanNode(plan_node));
  }
  return spec;
}

bool IsArithmeticPath(std::string_view path) {
  return path == "fp32_fma" || path == "tf32_mma" || path == "fp16_mma" || path == "bf16_mma";
}

bool IsProblemName(std::string_view name) {
  return !name.empty() && std::all_of(name.begin(), name.end(), [](char c) {
    return std::islower(static_cast<unsigned char>(c)) ||
           std::isdigit(static_cast<unsigned char>(c)) || c == '_' || c == '-';
  });
}

// "shapes" and "dispatch": types here; what the values mean is Validate's.
Status ParseShapes(const JsonNode& root, Problem* p) {
  KSEARCH_ASSIGN_OR_RETURN(auto shapes, root.Find("shapes"));
  if (shapes) {
    KSEARCH_ASSIGN_OR_RETURN(auto items, shapes->Array());
    if (items.empty()) {
      return shapes->Error("declare at least one shape case, or leave 'shapes' out for the one "
                           "shape of 'dims'");
    }
    for (const JsonNode& item : items) {
      KSEARCH_RETURN_IF_ERROR(item.CheckKeys({"name", "dims", "weight", "timed"}));
      ShapeCase c;
      KSEARCH_ASSIGN_OR_RETURN(JsonNode name, item.Required("name"));
      KSEARCH_ASSIGN_OR_RETURN(c.name, name.String());
      KSEARCH_ASSIGN_OR_RETURN(JsonNode dims, item.Required("dims"));
      KSEARCH_ASSIGN_OR_RETURN(c.dims, dims.IntMembers());
      KSEARCH_ASSIGN_OR_RETURN(auto timed, item.Find("timed"));
      if (timed) {
        KSEARCH_ASSIGN_OR_RETURN(c.timed, timed->Bool());
      }
      KSEARCH_ASSIGN_OR_RETURN(auto weight, item.Find("weight"));
      if (weight) {
        if (!c.timed) {
          return weight->Error("a check-only case (\"timed\": false) is never timed, so it has "
                               "no weight in the objective; drop the weight or time the case");
        }
        KSEARCH_ASSIGN_OR_RETURN(c.weight, weight->Double());
      }
      p->shapes.push_back(std::move(c));
    }
  }
  KSEARCH_ASSIGN_OR_RETURN(auto dispatch, root.Find("dispatch"));
  if (dispatch) {
    KSEARCH_RETURN_IF_ERROR(dispatch->CheckKeys({"dim", "buckets"}));
    KSEARCH_ASSIGN_OR_RETURN(JsonNode dim, dispatch->Required("dim"));
    KSEARCH_ASSIGN_OR_RETURN(p->dispatch.dim, dim.String());
    if (p->dispatch.dim.empty()) return dim.Error("name the dim the buckets are over");
    KSEARCH_ASSIGN_OR_RETURN(JsonNode buckets, dispatch->Required("buckets"));
    KSEARCH_ASSIGN_OR_RETURN(auto bounds, buckets.Array());
    for (const JsonNode& b : bounds) {
      KSEARCH_ASSIGN_OR_RETURN(int64_t v, b.Int());
      p->dispatch.upper_bounds.push_back(v);
    }
  }
  return Status::Ok();
}

StatusOr<Problem> ParseProblem(const JsonNode& root, std::string_view directory) {
  KSEARCH_RETURN_IF_ERROR(root.CheckKeys({"name", "description", "description_file", "torch", "dims",
                                          "tensors", "input_sets", "tolerance", "arithmetic_paths",
                                          "flops", "bytes", "reference", "reference_fp32", "start", "templates",
                                          "baseline", "shapes", "dispatch"}));
  Problem p;
  p.directory = std::string(directory);
  KSEARCH_ASSIGN_OR_RETURN(JsonNode name, root.Required("name"));
  KSEARCH_ASSIGN_OR_RETURN(p.name, name.String());
  if (!IsProblemName(p.name)) {
    return name.Error("a problem name uses a-z, 0-9, '_' and '-' only, got " + name.Describe());
  }
  KSEARCH_ASSIGN_OR_RETURN(auto description, root.Find("description"));
  KSEARCH_ASSIGN_OR_RETURN(auto description_file, root.Find("description_file"));
  if (description && description_file) {
    return description_file->Error(
        "give the description either inline (\"description\") or in a file "
        "(\"description_file\"), not both");
  }
  if (description) {
    KSEARCH_ASSIGN_OR_RETURN(p.description, description->String());
  } else if (description_file) {
    KSEARCH_ASSIGN_OR_RETURN(std::string file, description_file->String());
    auto text = internal::ReadFile(internal::JoinPath(directory, file));
    if (!text.ok()) return FileError(*description_file, text.status());
    p.description = std::move(*text);
  }
  KSEARCH_ASSIGN_OR_RETURN(auto torch, root.Find("torch"));
  if (torch) {
    KSEARCH_ASSIGN_OR_RETURN(p.torch_equivalent, torch->String());
  }

  KSEARCH_ASSIGN_OR_RETURN(JsonNode dims, root.Required("dims"));
  KSEARCH_ASSIGN_OR_RETURN(auto dim_members, dims.Members());
  for (auto& [key, value] : dim_members) {
    if (!IsIdentifier(key)) return value.Error("a dim name must be an identifier");
    KSEARCH_ASSIGN_OR_RETURN(int64_t v, value.Int());
    if (v <= 0) return value.Error("a dim must be a positive integer, got " + value.Describe());
    p.dims.emplace_back(key, v);
  }

  KSEARCH_ASSIGN_OR_RETURN(JsonNode tensors, root.Required("tensors"));
  KSEARCH_ASSIGN_OR_RETURN(auto tensor_items, tensors.Array());
  for (const JsonNode& item : tensor_items) {
    KSEARCH_RETURN_IF_ERROR(item.CheckKeys({"name", "dtype", "shape", "role"}));
    TensorSpec t;
    KSEARCH_ASSIGN_OR_RETURN(JsonNode tname, item.Required("name"));
    KSEARCH_ASSIGN_OR_RETURN(t.name, tname.String());
    KSEARCH_ASSIGN_OR_RETURN(JsonNode dtype, item.Required("dtype"));
    KSEARCH_ASSIGN_OR_RETURN(std::string dtype_text, dtype.String());
    auto parsed = ParseDType(dtype_text);
    if (!parsed.ok()) return dtype.Error(parsed.status().message());
    t.dtype = *parsed;
    KSEARCH_ASSIGN_OR_RETURN(JsonNode shape, item.Required("shape"));
    KSEARCH_ASSIGN_OR_RETURN(auto shape_items, shape.Array());
    for (const JsonNode& s : shape_items) {
      KSEARCH_ASSIGN_OR_RETURN(std::string expr, s.Expression());
      t.shape.push_back(std::move(expr));
    }
    KSEARCH_ASSIGN_OR_RETURN(JsonNode role, item.Required("role"));
    KSEARCH_ASSIGN_OR_RETURN(std::string role_text, role.String());
    if (role_text == "input") {
      t.role = TensorRole::kInput;
    } else if (role_text == "output") {
      t.role = TensorRole::kOutput;
    } else if (role_text == "inout") {
      t.role = TensorRole::kInout;
    } else {
      return role.Error("expected \"input\", \"output\" or \"inout\", got " + role.Describe());
    }
    p.tensors.push_back(std::move(t));
  }

  KSEARCH_ASSIGN_OR_RETURN(auto sets, root.Find("input_sets"));
  if (sets) {
    KSEARCH_ASSIGN_OR_RETURN(auto set_items, sets->Array());
    for (const JsonNode& item : set_items) {
      KSEARCH_RETURN_IF_ERROR(item.CheckKeys({"name", "distribution", "tensors"}));
      InputSet set;
      KSEARCH_ASSIGN_OR_RETURN(JsonNode sname, item.Required("name"));
      KSEARCH_ASSIGN_OR_RETURN(set.name, sname.String());
      KSEARCH_ASSIGN_OR_RETURN(JsonNode dist, item.Required("distribution"));
      KSEARCH_ASSIGN_OR_RETURN(set.fallback, ParseDistribution(dist));
      KSEARCH_ASSIGN_OR_RETURN(auto per, item.Find("tensors"));
      if (per) {
        KSEARCH_ASSIGN_OR_RETURN(auto members, per->Members());
        for (auto& [tensor, value] : members) {
          KSEARCH_ASSIGN_OR_RETURN(Distribution d, ParseDistribution(value));
          set.per_tensor.emplace_back(tensor, d);
        }
      }
      p.input_sets.push_back(std::move(set));
    }
  } else {
    p.input_sets = DefaultInputSets();
  }

  KSEARCH_ASSIGN_OR_RETURN(auto tolerance, root.Find("tolerance"));
  if (tolerance) {
    KSEARCH_RETURN_IF_ERROR(tolerance->CheckKeys(
        {"policy", "strict_multiple", "strict_floor", "atol_rms_fraction", "rtol", "atol", "library_margin",
         "library_worst_margin"}));
    KSEARCH_ASSIGN_OR_RETURN(JsonNode policy, tolerance->Required("policy"));
    KSEARCH_ASSIGN_OR_RETURN(std::string policy_text, policy.String());
    if (policy_text == "strict") {
      p.tolerance.policy = TolerancePolicy::kStrict;
    } else if (policy_text == "relaxed") {
      p.tolerance.policy = TolerancePolicy::kRelaxed;
    } else if (policy_text == "library") {
      p.tolerance.policy = TolerancePolicy::kLibrary;
    } else {
      return policy.Error("expected \"strict\", \"relaxed\" or \"library\", got " + policy.Describe());
    }
    struct Field {
      const char* key;
      double* target;
    } fields[] = {{"strict_multiple", &p.tolerance.strict_multiple},
                  {"strict_floor", &p.tolerance.strict_floor},
                  {"atol_rms_fraction", &p.tolerance.atol_rms_fraction},
                  {"rtol", &p.tolerance.rtol},
                  {"atol", &p.tolerance.atol},
                  {"library_margin", &p.tolerance.library_margin},
                  {"library_worst_margin", &p.tolerance.library_worst_margin}};
    for (const Field& f : fields) {
      KSEARCH_ASSIGN_OR_RETURN(auto node, tolerance->Find(f.key));
      if (node) {
        KSEARCH_ASSIGN_OR_RETURN(*f.target, node->Double());
        if (!(*f.target >= 0)) return node->Error("must not be negative");
      }
    }
    for (const char* margin : {"library_margin", "library_worst_margin"}) {
      KSEARCH_ASSIGN_OR_RETURN(auto node, tolerance->Find(margin));
      if (!node) continue;
      if (p.tolerance.policy != TolerancePolicy::kLibrary) {
        return node->Error("applies only to the \"library\" policy");
      }
      KSEARCH_ASSIGN_OR_RETURN(double value, node->Double());
      if (!(value >= 1.0 && value <= 16.0)) {
        return node->Error("expected a multiple from 1 to 16, got " + node->Describe());
      }
    }
  }

  KSEARCH_ASSIGN_OR_RETURN(auto paths, root.Find("arithmetic_paths"));
  if (paths) {
    KSEARCH_ASSIGN_OR_RETURN(std::vector<JsonNode> items, paths->Array());
    for (const JsonNode& item : items) {
      KSEARCH_ASSIGN_OR_RETURN(std::string path, item.String());
      if (!IsArithmeticPath(path)) {
        return item.Error("expected one of \"fp32_fma\", \"tf32_mma\", \"fp16_mma\", "
                          "\"bf16_mma\", got " + item.Describe());
      }
      p.arithmetic_paths.push_back(std::move(path));
    }
  }
  KSEARCH_ASSIGN_OR_RETURN(JsonNode flops, root.Required("flops"));
  KSEARCH_ASSIGN_OR_RETURN(p.flops, flops.Expression());
  KSEARCH_ASSIGN_OR_RETURN(JsonNode bytes, root.Required("bytes"));
  KSEARCH_ASSIGN_OR_RETURN(p.bytes, bytes.Expression());

  KSEARCH_ASSIGN_OR_RETURN(JsonNode reference, root.Required("reference"));
  KSEARCH_ASSIGN_OR_RETURN(p.reference, ParseKernel(reference, directory));
  KSEARCH_ASSIGN_OR_RETURN(auto reference_fp32, root.Find("reference_fp32"));
  if (reference_fp32) {
    KSEARCH_ASSIGN_OR_RETURN(p.reference_fp32, ParseKernel(*reference_fp32, directory));
  } else if (p.tolerance.policy != TolerancePolicy::kRelaxed) {
    return root.Error("the " + std::string(ToString(p.tolerance.policy)) +
                      " tolerance policy needs 'reference_fp32' (the op in plain fp32, used to measure "
                      "fp32's own error)");
  }
  KSEARCH_ASSIGN_OR_RETURN(auto start, root.Find("start"));
  if (start) {
    KSEARCH_ASSIGN_OR_RETURN(p.start, ParseKernel(*start, directory));
  } else {
    p.start = p.reference_fp32.source.empty() ? p.reference : p.reference_fp32;
  }

  KSEARCH_ASSIGN_OR_RETURN(auto templates, root.Find("templates"));
  if (templates) {
    KSEARCH_ASSIGN_OR_RETURN(auto items, templates->Array());
    for (const JsonNode& item : items) {
      KSEARCH_RETURN_IF_ERROR(
          item.CheckKeys({"name", "source", "source_text", "plan", "space", "constraints"}));
      TemplateSpec t;
      KSEARCH_ASSIGN_OR_RETURN(JsonNode tname, item.Required("name"));
      KSEARCH_ASSIGN_OR_RETURN(t.name, tname.String());
      // The kernel part reuses ParseKernel on the same object minus the extra keys.
      KernelSpec kernel;
      KSEARCH_ASSIGN_OR_RETURN(auto text, item.Find("source_text"));
      KSEARCH_ASSIGN_OR_RETURN(auto file, item.Find("source"));
      if (file) {
        KSEARCH_ASSIGN_OR_RETURN(kernel.source_file, file->String());
      }
      if (text) {
        KSEARCH_ASSIGN_OR_RETURN(kernel.source, text->String());
      } else if (file) {
        auto contents = internal::ReadFile(internal::JoinPath(directory, kernel.source_file));
        if (!contents.ok()) return FileError(*file, contents.status());
        kernel.source = std::move(*contents);
      } else {
        return item.Error("needs 'source' (a .cu file name) or 'source_text'");
      }
      KSEARCH_ASSIGN_OR_RETURN(JsonNode plan, item.Required("plan"));
      KSEARCH_ASSIGN_OR_RETURN(kernel.plan, internal::ParsePlanNode(plan));
      t.kernel = std::move(kernel);
      KSEARCH_ASSIGN_OR_RETURN(JsonNode space, item.Required("space"));
      KSEARCH_ASSIGN_OR_RETURN(auto members, space.Members());
      for (auto& [param, values] : members) {
        KSEARCH_ASSIGN_OR_RETURN(auto value_items, values.Array());
        std::vector<int64_t> list;
        for (const JsonNode& v : value_items) {
          KSEARCH_ASSIGN_OR_RETURN(int64_t x, v.Int());
          list.push_back(x);
        }
        if (list.empty()) return values.Error("a parameter needs at least one value");
        t.space.emplace_back(param, std::move(list));
      }
      KSEARCH_ASSIGN_OR_RETURN(auto constraints, item.Find("constraints"));
      if (constraints) {
        KSEARCH_ASSIGN_OR_RETURN(auto citems, constraints->Array());
        for (const JsonNode& c : citems) {
          KSEARCH_ASSIGN_OR_RETURN(std::string expr, c.String());
          t.constraints.push_back(std::move(expr));
        }
      }
      p.templates.push_back(std::move(t));
    }
  }

  KSEARCH_ASSIGN_OR_RETURN(auto baseline, root.Find("baseline"));
  if (baseline) {
    KSEARCH_RETURN_IF_ERROR(baseline->CheckKeys({"library", "settings"}));
    KSEARCH_ASSIGN_OR_RETURN(JsonNode library, baseline->Required("library"));
    KSEARCH_ASSIGN_OR_RETURN(p.baseline.library, library.String());
    if (!p.baseline.library.empty() && !internal::FindBaselineLibrary(p.baseline.library)) {
      return library.Error("unknown baseline library " + library.Describe() + " (known: " +
                           internal::BaselineLibraryNames() + ")");
    }
    KSEARCH_ASSIGN_OR_RETURN(auto settings, baseline->Find("settings"));
    if (settings) {
      KSEARCH_ASSIGN_OR_RETURN(auto members, settings->Members());
      for (auto& [key, value] : members) {
        if (!value.IsString() && !value.IsInteger()) {
          return value.Error("expected a tensor name, an integer, an expression over the dims or a word, got " +
                             value.Describe());
        }
        KSEARCH_ASSIGN_OR_RETURN(std::string text, value.Expression());
        p.baseline.settings.emplace_back(key, std::move(text));
      }
    }
  }
  KSEARCH_RETURN_IF_ERROR(ParseShapes(root, &p));
  return p;
}

boost::json::object KernelToJson(const KernelSpec& k) {
  boost::json::object o;
  if (!k.source_file.empty()) o["source"] = k.source_file;
  o["source_text"] = k.source;
  o["plan"] = internal::PlanToJsonObject(k.plan);
  return o;
}

boost::json::object ToJsonObject(const Problem& p) {
  boost::json::object root;
  root["name"] = p.name;
  root["description"] = p.description;
  if (!p.torch_equivalent.empty()) root["torch"] = p.torch_equivalent;
  boost::json::object dims;
  for (const auto& [k, v] : p.dims) dims[k] = v;
  root["dims"] = std::move(dims);
  boost::json::array tensors;
  for (const TensorSpec& t : p.tensors) {
    tensors.push_back(boost::json::object{{"name", t.name},
                                          {"dtype", std::string(ToString(t.dtype))},
                                          {"shape", boost::json::array(t.shape.begin(), t.shape.end())},
                                          {"role", std::string(ToString(t.role))}});
  }
  root["tensors"] = std::move(tensors);
  boost::json::array sets;
  for (const InputSet& s : p.input_sets) {
    boost::json::object o{{"name", s.name}, {"distribution", s.fallback.ToString()}};
    if (!s.per_tensor.empty()) {
      boost::json::object per;
      for (const auto& [k, d] : s.per_tensor) per[k] = d.ToString();
      o["tensors"] = std::move(per);
    }
    sets.push_back(std::move(o));
  }
  root["input_sets"] = std::move(sets);
  boost::json::object tolerance{{"policy", std::string(ToString(p.tolerance.policy))},
                                {"strict_multiple", p.tolerance.strict_multiple},
                                {"strict_floor", p.tolerance.strict_floor},
                                {"atol_rms_fraction", p.tolerance.atol_rms_fraction},
                                {"rtol", p.tolerance.rtol},
                                {"atol", p.tolerance.atol}};
  // Only under their policy, so that other problems' JSON (and Fingerprint)
  // stays what it was.
  if (p.tolerance.policy == TolerancePolicy::kLibrary) {
    tolerance["library_margin"] = p.tolerance.library_margin;
    tolerance["library_worst_margin"] = p.tolerance.library_worst_margin;
  }
  root["tolerance"] = std::move(tolerance);
  if (!p.arithmetic_paths.empty()) {
    boost::json::array paths;
    for (const std::string& path : p.arithmetic_paths) paths.emplace_back(path);
    root["arithmetic_paths"] = std::move(paths);
  }
  root["flops"] = p.flops;
  root["bytes"] = p.bytes;
  root["reference"] = KernelToJson(p.reference);
  if (!p.reference_fp32.source.empty()) root["reference_fp32"] = KernelToJson(p.reference_fp32);
  root["start"] = KernelToJson(p.start);
  if (!p.templates.empty()) {
    boost::json::array templates;
    for (const TemplateSpec& t : p.templates) {
      boost::json::object o = KernelToJson(t.kernel);
      o["name"] = t.name;
      boost::json::object space;
      for (const auto& [k, values] : t.space) space[k] = boost::json::array(values.begin(), values.end());
      o["space"] = std::move(space);
      o["constraints"] = boost::json::array(t.constraints.begin(), t.constraints.end());
      templates.push_back(std::move(o));
    }
    root["templates"] = std::move(templates);
  }
  if (!p.baseline.library.empty()) {
    boost::json::object settings;
    for (const auto& [k, v] : p.baseline.settings) settings[k] = v;
    root["baseline"] =
        boost::json::object{{"library", p.baseline.library}, {"settings", std::move(settings)}};
  }
  // Written only when declared, so that the JSON (and the Fingerprint) of a
  // problem with one shape stays what it was.
  if (!p.shapes.empty()) {
    boost::json::array shapes;
    for (const ShapeCase& c : p.shapes) {
      boost::json::object case_dims;
      for (const auto& [k, v] : c.dims) case_dims[k] = v;
      boost::json::object o{{"name", c.name}, {"dims", std::move(case_dims)}};
      if (c.timed) {
        o["weight"] = c.weight;
      } else {
        o["timed"] = false;
      }
      shapes.push_back(std::move(o));
    }
    root["shapes"] = std::move(shapes);
  }
  if (p.dispatch.enabled()) {
    root["dispatch"] = boost::json::object{
        {"dim", p.dispatch.dim},
        {"buckets", boost::json::array(p.dispatch.upper_bounds.begin(), p.dispatch.upper_bounds.end())}};
  }
  return root;
}

// Shape cases and dispatch buckets; the problem at each case's dims is
// validated as a problem of its own.
Status ValidateShapes(const Problem& p) {
  if (p.shapes.empty()) {
    if (p.dispatch.enabled()) {
      return InvalidArgumentError("dispatch: buckets need shape cases to check and time a kernel "
                                  "in each bucket (declare 'shapes')");
    }
    return Status::Ok();
  }
  // Each case is validated, calibrated and judged on its own: a cap keeps a
  // problem from asking for unbounded work before any candidate runs.
  constexpr size_t kMaxCases = 64;
  if (p.shapes.size() > kMaxCases) {
    return InvalidArgumentError("shapes: " + std::to_string(p.shapes.size()) + " cases (at most " +
                                std::to_string(kMaxCases) + ")");
  }
  if (p.dispatch.upper_bounds.size() + 1 > kMaxCases) {
    return InvalidArgumentError("dispatch.buckets: " + std::to_string(p.dispatch.upper_bounds.size()) +
                                " bounds (at most " + std::to_string(kMaxCases - 1) + ")");
  }
  std::string dim_names;
  for (const auto& [name, value] : p.dims) dim_names += (dim_names.empty() ? "" : ", ") + name;
  bool any_timed = false;
  for (size_t i = 0; i < p.shapes.size(); ++i) {
    const ShapeCase& c = p.shapes[i];
    std::string field = "shapes[" + std::to_string(i) + "]";
    if (!IsProblemName(c.name)) {
      return InvalidArgumentError(field + ".name: a case name uses a-z, 0-9, '_' and '-' only, got \"" +
                                  c.name + "\"");
    }
    for (size_t d = 0; d < c.dims.size(); ++d) {
      const auto& [name, value] = c.dims[d];
      if (!p.Dim(name)) {
        return InvalidArgumentError(field + ".dims." + name + ": not a dim of the problem (dims: " +
                                    dim_names + ")");
      }
      if (value <= 0) {
        return InvalidArgumentError(field + ".dims." + name + ": a dim must be a positive integer, got " +
                                    std::to_string(value));
      }
      for (size_t e = 0; e < d; ++e) {
        if (c.dims[e].first == name) return InvalidArgumentError(field + ".dims: duplicate key '" + name + "'");
      }
    }
    if (c.timed && !(std::isfinite(c.weight) && c.weight > 0)) {
      char text[64];
      std::snprintf(text, sizeof(text), "%g", c.weight);
      return InvalidArgumentError(field + ".weight: a weight must be a positive number, got " + text);
    }
    any_timed = any_timed || c.timed;
    for (size_t j = 0; j < i; ++j) {
      if (p.shapes[j].name == c.name) {
        return InvalidArgumentError(field + ".name: duplicate case '" + c.name + "'");
      }
      if (p.CaseDims(j) == p.CaseDims(i)) {
        return InvalidArgumentError(field + " (case '" + c.name + "'): the same dims as shapes[" +
                                    std::to_string(j) + "] (case '" + p.shapes[j].name +
                                    "'); each case is one shape");
      }
    }
    auto at = p.AtCase(i);
    if (!at.ok()) {
      return InvalidArgumentError(field + " (case '" + c.name + "'): " + at.status().message());
    }
  }
  if (!any_timed) {
    return InvalidArgumentError("shapes: no case is timed, so there is no objective (set \"timed\": "
                                "true, the default, on at least one)");
  }
  const DispatchSpec& d = p.dispatch;
  if (!d.enabled()) return Status::Ok();
  if (!p.Dim(d.dim)) {
    return InvalidArgumentError("dispatch.dim: '" + d.dim + "' is not a dim of the problem (dims: " +
                                dim_names + ")");
  }
  if (d.upper_bounds.empty()) {
    return InvalidArgumentError("dispatch.buckets: give at least one upper bound (one bucket is no "
                                "dispatch)");
  }
  for (size_t b = 0; b < d.upper_bounds.size(); ++b) {
    std::string field = "dispatch.buckets[" + std::to_string(b) + "]";
    if (d.upper_bounds[b] <= 0) {
      return InvalidArgumentError(field + ": a bound must be a positive integer, got " +
                                  std::to_string(d.upper_bounds[b]));
    }
    if (b > 0 && d.upper_bounds[b] <= d.upper_bounds[b - 1]) {
      return InvalidArgumentError(field + ": bounds must increase, got " +
                                  std::to_string(d.upper_bounds[b]) + " after " +
                                  std::to_string(d.upper_bounds[b - 1]));
    }
  }
  std::vector<bool> timed_in(d.bucket_count(), false);
  for (size_t i = 0; i < p.shapes.size(); ++i) {
    int64_t value = 0;
    for (const auto& [name, v] : p.CaseDims(i)) {
      if (name == d.dim) value = v;
    }
    if (p.shapes[i].timed) timed_in[d.BucketOf(value)] = true;
  }
  for (size_t b = 0; b < timed_in.size(); ++b) {
    if (!timed_in[b]) {
      return InvalidArgumentError("dispatch.buckets: bucket " + d.BucketName(b) +
                                  " holds no timed shape case, so no kernel could be ranked for it");
    }
  }
  return Status::Ok();
}

Status CheckKernel(const Problem& p, const KernelSpec& k, const std::string& field) {
  if (k.source.empty()) return InvalidArgumentError(field + ": the kernel source is empty");
  auto resolved = internal::ResolvePlan(p, k.plan);
  if (!resolved.ok()) return InvalidArgumentError(field + ".plan." + resolved.status().message());
  return Status::Ok();
}

}  // namespace

std::string_view ToString(TolerancePolicy policy) {
  switch (policy) {
    case TolerancePolicy::kStrict: return "strict";
    case TolerancePolicy::kRelaxed: return "relaxed";
    case TolerancePolicy::kLibrary: return "library";
  }
  return "strict";
}

Candidate KernelSpec::ToCandidate(std::string id, std::string generator) const {
  Candidate c;
  c.id = std::move(id);
  c.source = source;
  c.plan = plan;
  c.provenance.generator = std::move(generator);
  return c;
}

namespace {

// A template's default point is its own kernel (what `eval --kernel
// template:NAME` and a tune's first round judge): in the file as written it
// must satisfy the template's constraints. (Other --dims may exclude it; a
// search then skips it.)
Status CheckTemplateDefaults(const Problem& p) {
  for (size_t i = 0; i < p.templates.size(); ++i) {
    const TemplateSpec& t = p.templates[i];
    auto values = internal::PlanValues(p, t.kernel.plan);
    for (size_t c = 0; c < t.constraints.size(); ++c) {
      auto ok = EvaluateCondition(t.constraints[c], values);
      if (!ok.ok() || *ok) continue;  // Validate reports the errors
      std::string point;
      for (const auto& [param, value] : t.kernel.plan.params) {
        point += (point.empty() ? "" : ", ") + param + "=" + std::to_string(value);
      }
      return InvalidArgumentError("templates[" + std::to_string(i) + "] (template '" + t.name +
                                  "'): its default point (" + point +
                                  ") violates its own constraints[" + std::to_string(c) + "] '" +
                                  t.constraints[c] + "'; change the plan's params or the constraint");
    }
  }
  return Status::Ok();
}

}  // namespace

StatusOr<Problem> Problem::FromJson(std::string_view json, std::string_view directory,
                                    std::string_view origin) {
  KSEARCH_ASSIGN_OR_RETURN(auto doc, JsonDocument::Parse(json, origin));
  KSEARCH_ASSIGN_OR_RETURN(Problem p, ParseProblem(JsonNode::Root(*doc), directory));
  Status valid = p.Validate();
  if (!valid.ok()) return valid.WithContext(origin);
  return p;
}

StatusOr<Problem> Problem::Load(std::string_view path_view) {
  std::string path(path_view);
  struct stat info {};
  if (::stat(path.c_str(), &info) == 0 && S_ISDIR(info.st_mode)) {
    path = internal::JoinPath(path, "problem.json");
  }
  KSEARCH_ASSIGN_OR_RETURN(std::string text, internal::ReadFile(path));
  std::string directory = ".";
  if (auto slash = path.rfind('/'); slash != std::string::npos) {
    directory = slash == 0 ? "/" : path.substr(0, slash);
  }
  KSEARCH_ASSIGN_OR_RETURN(Problem p, FromJson(text, directory, path));
  KSEARCH_RETURN_IF_ERROR(CheckTemplateDefaults(p).WithContext(path));
  return p;
}

std::string Problem::ToJson() const { return boost::json::serialize(ToJsonObject(*this)); }

Status Problem::Validate() const {
  if (name.empty()) return InvalidArgumentError("name: empty");
  for (size_t i = 0; i < arithmetic_paths.size(); ++i) {
    if (!IsArithmeticPath(arithmetic_paths[i])) {
      return InvalidArgumentError("arithmetic_paths[" + std::to_string(i) + "]: unknown path '" +
                                  arithmetic_paths[i] + "'");
    }
  }
  for (size_t i = 0; i < dims.size(); ++i) {
    if (dims[i].second <= 0) {
      return InvalidArgumentError("dims." + dims[i].first + ": must be positive, got " +
                                  std::to_string(dims[i].second));
    }
    for (size_t j = 0; j < i; ++j) {
      if (dims[j].first == dims[i].first) return InvalidArgumentError("dims: duplicate '" + dims[i].first + "'");
    }
  }
  bool has_input = false, has_output = false;
  for (size_t i = 0; i < tensors.size(); ++i) {
    const TensorSpec& t = tensors[i];
    std::string field = "tensors[" + std::to_string(i) + "]";
    if (!IsIdentifier(t.name)) {
      return InvalidArgumentError(field + ".name: '" + t.name + "' is not an identifier");
    }
    if (Dim(t.name)) return InvalidArgumentError(field + ".name: '" + t.name + "' is also a dim");
    for (size_t j = 0; j < i; ++j) {
      if (tensors[j].name == t.name) return InvalidArgumentError(field + ".name: duplicate '" + t.name + "'");
    }
    if (t.shape.empty()) return InvalidArgumentError(field + ".shape: empty (scalars are 1-element shapes [1])");
    int64_t bytes = SizeOf(t.dtype);
    for (size_t d = 0; d < t.shape.size(); ++d) {
      std::string sfield = field + ".shape[" + std::to_string(d) + "]";
      auto v = EvaluateExpression(t.shape[d], dims);
      if (!v.ok()) return InvalidArgumentError(sfield + ": " + v.status().message());
      if (*v <= 0) {
        return InvalidArgumentError(sfield + ": '" + t.shape[d] + "' = " + std::to_string(*v) +
                                    " (sizes must be positive)");
      }
      if (__builtin_mul_overflow(bytes, *v, &bytes)) {
        return InvalidArgumentError(field + ".shape: the byte count of '" + t.name +
                                    "' overflows 64 bits");
      }
    }
    if (IsGenerated(t.role)) has_input = true;
    if (IsWritten(t.role)) {
      has_output = true;
      if (!IsFloating(t.dtype)) {
        return InvalidArgumentError(field + ".dtype: " + std::string(ToString(t.role)) +
                                    " tensors must be floating point, got " + std::string(ToString(t.dtype)));
      }
    }
  }
  if (!has_input) return InvalidArgumentError("tensors: at least one input or inout tensor is needed");
  if (!has_output) return InvalidArgumentError("tensors: at least one output or inout tensor is needed");
  if (input_sets.empty()) return InvalidArgumentError("input_sets: at least one set is needed");
  if (tolerance.policy == TolerancePolicy::kLibrary) {
    if (baseline.library.empty()) {
      return InvalidArgumentError("tolerance.policy: \"library\" judges against the problem's library "
                                  "baseline, but the problem names none (baseline.library)");
    }
    if (reference_fp32.source.empty()) {
      return InvalidArgumentError("tolerance.policy: \"library\" needs reference_fp32 (the strict bound "
                                  "is its floor)");
    }
  }
  for (size_t i = 0; i < input_sets.size(); ++i) {
    for (const auto& [tensor, d] : input_sets[i].per_tensor) {
      const TensorSpec* t = FindTensor(tensor);
      if (!t || !IsGenerated(t->role)) {
        return InvalidArgumentError("input_sets[" + std::to_string(i) + "].tensors." + tensor +
                                    ": not an input or inout tensor of the problem");
      }
    }
  }
  for (auto [field, expr] : {std::pair<const char*, const std::string*>{"flops", &flops},
                             {"bytes", &bytes}}) {
    auto v = EvaluateExpression(*expr, dims);
    if (!v.ok()) return InvalidArgumentError(std::string(field) + ": " + v.status().message());
    if (*v < 0) return InvalidArgumentError(std::string(field) + ": negative");
  }
  auto binding = internal::BindBaseline(*this);
  if (!binding.ok()) return binding.status();
  KSEARCH_RETURN_IF_ERROR(internal::CheckBaselineShapes(*this, *binding));
  KSEARCH_RETURN_IF_ERROR(CheckKernel(*this, reference, "reference"));
  if (!reference_fp32.source.empty()) {
    KSEARCH_RETURN_IF_ERROR(CheckKernel(*this, reference_fp32, "reference_fp32"));
  }
  KSEARCH_RETURN_IF_ERROR(CheckKernel(*this, start, "start"));
  for (size_t i = 0; i < templates.size(); ++i) {
    const TemplateSpec& t = templates[i];
    std::string field = "templates[" + std::to_string(i) + "]";
    KSEARCH_RETURN_IF_ERROR(CheckKernel(*this, t.kernel, field));
    for (const auto& [param, values] : t.space) {
      if (t.kernel.plan.Param(param, INT64_MIN) == INT64_MIN) {
        return InvalidArgumentError(field + ".space." + param +
                                    ": not a param of the template's plan (declare a default there)");
      }
    }
    auto values = internal::PlanValues(*this, t.kernel.plan);
    for (size_t c = 0; c < t.constraints.size(); ++c) {
      auto ok = EvaluateCondition(t.constraints[c], values);
      if (!ok.ok()) {
        return InvalidArgumentError(field + ".constraints[" + std::to_string(c) + "]: " +
                                    ok.status().message());
      }
    }
  }
  return ValidateShapes(*this);
}

size_t DispatchSpec::BucketOf(int64_t value) const {
  size_t b = 0;
  while (b < upper_bounds.size() && value > upper_bounds[b]) ++b;
  return enabled() ? b : 0;
}

std::string DispatchSpec::BucketName(size_t bucket) const {
  if (!enabled()) return "all";
  if (bucket == 0) return dim + "<=" + std::to_string(upper_bounds.front());
  if (bucket >= upper_bounds.size()) return dim + ">" + std::to_string(upper_bounds.back());
  return std::to_string(upper_bounds[bucket - 1]) + "<" + dim + "<=" +
         std::to_string(upper_bounds[bucket]);
}

std::vector<ShapeCase> Problem::Cases() const {
  if (!shapes.empty()) return shapes;
  return {ShapeCase{"default", {}, 1.0, true}};
}

std::vector<std::pair<std::string, int64_t>> Problem::CaseDims(size_t index) const {
  std::vector<std::pair<std::string, int64_t>> out = dims;
  if (index >= shapes.size()) return out;
  for (const auto& [name, value] : shapes[index].dims) {
    for (auto& d : out) {
      if (d.first == name) d.second = value;
    }
  }
  return out;
}

StatusOr<Problem> Problem::AtCase(size_t index) const {
  if (index >= std::max<size_t>(shapes.size(), 1)) {
    return InvalidArgumentError("shape case " + std::to_string(index) + " does not exist (the problem has " +
                                std::to_string(Cases().size()) + ")");
  }
  Problem copy = *this;
  copy.dims = CaseDims(index);
  copy.shapes.clear();
  copy.dispatch = DispatchSpec();
  KSEARCH_RETURN_IF_ERROR(copy.Validate());
  return copy;
}

std::string Problem::Fingerprint() const {
  Problem copy = *this;
  copy.description.clear();
  copy.torch_equivalent.clear();
  copy.start = KernelSpec();
  copy.templates.clear();
  copy.directory.clear();
  copy.reference.source_file.clear();
  copy.reference_fp32.source_file.clear();
  return internal::Sha256Hex(copy.ToJson());
}

StatusOr<Problem> Problem::WithDims(
    const std::vector<std::pair<std::string, int64_t>>& new_dims) const {
  Problem copy = *this;
  for (const auto& [name, value] : new_dims) {
    auto it = std::find_if(copy.dims.begin(), copy.dims.end(),
                           // Clang before 16 cannot capture a structured binding.
                           [&dim = name](const auto& d) { return d.first == dim; });
    if (it == copy.dims.end()) return InvalidArgumentError("unknown dim '" + name + "'");
    if (value <= 0) {
      return InvalidArgumentError("dim '" + name + "' must be positive, got " + std::to_string(value));
    }
    it->second = value;
  }
  KSEARCH_RETURN_IF_ERROR(copy.Validate());
  return copy;
}

std::optional<int64_t> Problem::Dim(std::string_view dim) const {
  for (const auto& [k, v] : dims) {
    if (k == dim) return v;
  }
  return std::nullopt;
}

const TensorSpec* Problem::FindTensor(std::string_view tensor) const {
  for (const TensorSpec& t : tensors) {
    if (t.name == tensor) return &t;
  }
  return nullptr;
}

StatusOr<int64_t> Problem::Elements(const TensorSpec& tensor) const {
  int64_t n = 1;
  for (const std::string& expr : tensor.shape) {
    KSEARCH_ASSIGN_OR_RETURN(int64_t v, EvaluateExpression(expr, dims));
    if (__builtin_mul_overflow(n, v, &n)) return OutOfRangeError("element count of " + tensor.name + " overflows");
  }
  return n;
}

StatusOr<double> Problem::Flops() const {
  KSEARCH_ASSIGN_OR_RETURN(int64_t v, EvaluateExpression(flops, dims));
  return static_cast<double>(v);
}

StatusOr<double> Problem::Bytes() const {
  KSEARCH_ASSIGN_OR_RETURN(int64_t v, EvaluateExpression(bytes, dims));
  return static_cast<double>(v);
}

std::string BuiltinProblemsDirectory() {
  if (const char* env = std::getenv("KSEARCH_PROBLEMS_DIR"); env && *env) return env;
  struct stat info {};
  if (::stat(KSEARCH_SOURCE_PROBLEMS_DIR, &info) == 0 && S_ISDIR(info.st_mode)) {
    return KSEARCH_SOURCE_PROBLEMS_DIR;
  }
  return KSEARCH_INSTALL_PROBLEMS_DIR;
}

std::vector<std::string> BuiltinProblemNames() {
  std::vector<std::string> names;
  std::string root = BuiltinProblemsDirectory();
  DIR* dir = ::opendir(root.c_str());
  if (!dir) return names;
  while (dirent* entry = ::readdir(dir)) {
    std::string name = entry->d_name;
    if (name.empty() || name[0] == '.') continue;
    struct stat info {};
    std::string file = root + "/" + name + "/problem.json";
    if (::stat(file.c_str(), &info) == 0) names.push_back(name);
  }
  ::closedir(dir);
  std::sort(names.begin(), names.end());
  return names;
}

StatusOr<Problem> LoadProblem(std::string_view name_or_path) {
  std::string arg(name_or_path);
  bool looks_like_path = arg.find('/') != std::string::npos || arg.ends_with(".json");
  if (!looks_like_path) {
    std::string file = BuiltinProblemsDirectory() + "/" + arg + "/problem.json";
    struct stat info {};
    if (::stat(file.c_str(), &info) == 0) return Problem::Load(file);
    struct stat local {};
    if (::stat(arg.c_str(), &local) != 0) {
      std::string names;
      for (const std::string& n : BuiltinProblemNames()) names += (names.empty() ? "" : ", ") + n;
      return NotFoundError("no built-in problem named '" + arg + "' (built-in: " +
                           (names.empty() ? std::string("none found in ") + BuiltinProblemsDirectory() : names) +
                           "); a path to a problem folder or JSON works too");
    }
  }
  return Problem::Load(arg);
}

}  // namespace ksearch
