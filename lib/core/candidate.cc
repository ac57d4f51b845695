#include "ksearch/candidate.h"

#include <boost/json.hpp>

#include <cctype>

#include "core/hash.h"
#include "core/json_util.h"
#include "core/plan_resolve.h"

namespace ksearch {
namespace {

using internal::JsonDocument;
using internal::JsonNode;

bool IsIdentifier(std::string_view name) {
  if (name.empty() || !(std::isalpha(static_cast<unsigned char>(name[0])) || name[0] == '_')) {
    return false;
  }
  for (char c : name) {
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '_') return false;
  }
  return true;
}

StatusOr<std::vector<std::string>> ParseDim3(const JsonNode& node) {
  KSEARCH_ASSIGN_OR_RETURN(std::vector<JsonNode> items, node.Array());
  if (items.empty() || items.size() > 3) {
    return node.Error("expected 1 to 3 entries [x, y, z], got " + node.Describe());
  }
  std::vector<std::string> out;
  for (const JsonNode& item : items) {
    KSEARCH_ASSIGN_OR_RETURN(std::string expr, item.Expression());
    out.push_back(std::move(expr));
  }
  while (out.size() < 3) out.push_back("1");
  return out;
}

StatusOr<LaunchPlan> ParsePlan(const JsonNode& root) {
  LaunchPlan plan;
  KSEARCH_RETURN_IF_ERROR(root.CheckKeys({"params", "workspace", "launches"}));
  KSEARCH_ASSIGN_OR_RETURN(auto params, root.Find("params"));
  if (params) {
    KSEARCH_ASSIGN_OR_RETURN(auto members, params->Members());
    for (auto& [name, value] : members) {
      if (!IsIdentifier(name)) return value.Error("param name is not an identifier");
      KSEARCH_ASSIGN_OR_RETURN(int64_t v, value.Int());
      plan.params.emplace_back(name, v);
    }
  }
  KSEARCH_ASSIGN_OR_RETURN(auto workspace, root.Find("workspace"));
  if (workspace) {
    KSEARCH_ASSIGN_OR_RETURN(auto items, workspace->Array());
    for (const JsonNode& item : items) {
      KSEARCH_RETURN_IF_ERROR(item.CheckKeys({"name", "dtype", "elements"}));
      WorkspaceSpec spec;
      KSEARCH_ASSIGN_OR_RETURN(JsonNode name, item.Required("name"));
      KSEARCH_ASSIGN_OR_RETURN(spec.name, name.String());
      if (!IsIdentifier(spec.name)) return name.Error("not an identifier: " + name.Describe());
      KSEARCH_ASSIGN_OR_RETURN(auto dtype, item.Find("dtype"));
      if (dtype) {
        KSEARCH_ASSIGN_OR_RETURN(std::string text, dtype->String());
        auto parsed = ParseDType(text);
        if (!parsed.ok()) return dtype->Error(parsed.status().message());
        spec.dtype = *parsed;
      }
      KSEARCH_ASSIGN_OR_RETURN(JsonNode elements, item.Required("elements"));
      KSEARCH_ASSIGN_OR_RETURN(spec.elements, elements.Expression());
      plan.workspace.push_back(std::move(spec));
    }
  }
  KSEARCH_ASSIGN_OR_RETURN(JsonNode launches, root.Required("launches"));
  KSEARCH_ASSIGN_OR_RETURN(auto items, launches.Array());
  if (items.empty()) return launches.Error("a plan needs at least one launch");
  for (const JsonNode& item : items) {
    KSEARCH_RETURN_IF_ERROR(item.CheckKeys({"kernel", "grid", "block", "shared_bytes", "cluster",
                                            "non_portable_cluster_size", "args"}));
    LaunchSpec launch;
    KSEARCH_ASSIGN_OR_RETURN(JsonNode kernel, item.Required("kernel"));
    KSEARCH_ASSIGN_OR_RETURN(launch.kernel, kernel.String());
    if (!IsIdentifier(launch.kernel)) return kernel.Error("not an identifier: " + kernel.Describe());
    KSEARCH_ASSIGN_OR_RETURN(JsonNode grid, item.Required("grid"));
    KSEARCH_ASSIGN_OR_RETURN(launch.grid, ParseDim3(grid));
    KSEARCH_ASSIGN_OR_RETURN(JsonNode block, item.Required("block"));
    KSEARCH_ASSIGN_OR_RETURN(launch.block, ParseDim3(block));
    KSEARCH_ASSIGN_OR_RETURN(auto shared, item.Find("shared_bytes"));
    if (shared) {
      KSEARCH_ASSIGN_OR_RETURN(launch.shared_bytes, shared->Expression());
    }
    KSEARCH_ASSIGN_OR_RETURN(auto cluster, item.Find("cluster"));
    if (cluster) {
      KSEARCH_ASSIGN_OR_RETURN(launch.cluster, ParseDim3(*cluster));
    }
    KSEARCH_ASSIGN_OR_RETURN(auto non_portable, item.Find("non_portable_cluster_size"));
    if (non_portable) {
      KSEARCH_ASSIGN_OR_RETURN(launch.non_portable_cluster_size, non_portable->Bool());
      if (launch.non_portable_cluster_size && launch.cluster.empty()) {
        return non_portable->Error("allows clusters above 8 blocks, but the launch has no \"cluster\"");
      }
    }
    KSEARCH_ASSIGN_OR_RETURN(JsonNode args, item.Required("args"));
    KSEARCH_ASSIGN_OR_RETURN(auto arg_items, args.Array());
    for (const JsonNode& arg : arg_items) {
      if (arg.IsObject()) {
        KSEARCH_ASSIGN_OR_RETURN(internal::TensorMapSpec map, internal::ParseTensorMapNode(arg));
        launch.args.push_back(map.ToJson());
        continue;
      }
      KSEARCH_ASSIGN_OR_RETURN(std::string text, arg.String());
      if (text.empty()) return arg.Error("empty argument");
      size_t colon = text.rfind(':');
      if (colon != std::string::npos) {
        std::string type = text.substr(colon + 1);
        if (type != "i32" && type != "i64" && type != "f32") {
          return arg.Error("scalar type '" + type + "' is not one of i32, i64, f32");
        }
      } else if (!IsIdentifier(text)) {
        return arg.Error("expected a tensor or workspace name, EXPR:TYPE or a tensor map "
                         "{\"tensor_map\": NAME, \"box\": [...]}, got " +
                         arg.Describe());
      }
      launch.args.push_back(std::move(text));
    }
    plan.launches.push_back(std::move(launch));
  }
  return plan;
}

}  // namespace

namespace internal {
// Used by Problem parsing, where plans appear inside a larger document.
StatusOr<LaunchPlan> ParsePlanNode(const JsonNode& node) { return ParsePlan(node); }

boost::json::object PlanToJsonObject(const LaunchPlan& plan) {
  boost::json::object root;
  boost::json::object params;
  for (const auto& [name, value] : plan.params) params[name] = value;
  root["params"] = std::move(params);
  boost::json::array workspace;
  for (const WorkspaceSpec& w : plan.workspace) {
    workspace.push_back(boost::json::object{
        {"name", w.name}, {"dtype", std::string(ToString(w.dtype))}, {"elements", w.elements}});
  }
  root["workspace"] = std::move(workspace);
  boost::json::array launches;
  for (const LaunchSpec& l : plan.launches) {
    boost::json::array grid(l.grid.begin(), l.grid.end());
    boost::json::array block(l.block.begin(), l.block.end());
    boost::json::array args;
    for (const std::string& arg : l.args) {
      // A tensor map is stored as its JSON text and written back as the
      // object; text that does not parse (a plan built in code) stays a
      // string, which FromJson refuses with its reason.
      boost::system::error_code ec;
      boost::json::value map = internal::IsTensorMapArg(arg) ? boost::json::parse(arg, ec) : nullptr;
      if (internal::IsTensorMapArg(arg) && !ec && map.is_object()) {
        args.push_back(std::move(map));
      } else {
        args.push_back(boost::json::value(arg));
      }
    }
    boost::json::object launch{{"kernel", l.kernel},
                               {"grid", std::move(grid)},
                               {"block", std::move(block)},
                               {"shared_bytes", l.shared_bytes}};
    // Only when set, so that the canonical text (and the content hash) of a
    // plan without a cluster is what it always was.
    if (!l.cluster.empty()) launch["cluster"] = boost::json::array(l.cluster.begin(), l.cluster.end());
    if (l.non_portable_cluster_size) launch["non_portable_cluster_size"] = true;
    launch["args"] = std::move(args);
    launches.push_back(std::move(launch));
  }
  root["launches"] = std::move(launches);
  return root;
}
}  // namespace internal

StatusOr<LaunchPlan> LaunchPlan::FromJson(std::string_view json, std::string_view origin) {
  KSEARCH_ASSIGN_OR_RETURN(auto doc, JsonDocument::Parse(json, origin));
  KSEARCH_ASSIGN_OR_RETURN(LaunchPlan plan, ParsePlan(JsonNode::Root(*doc)));
  // Checked here as well as in ResolvePlan so that an oversized plan from a
  // model's reply is refused before it is stored.
  Status caps = internal::CheckPlanCaps(plan);
  if (!caps.ok()) return caps.WithContext(origin);
  return plan;
}

std::string LaunchPlan::ToJson() const {
  return boost::json::serialize(internal::PlanToJsonObject(*this));
}

int64_t LaunchPlan::Param(std::string_view name, int64_t fallback) const {
  for (const auto& [key, value] : params) {
    if (key == name) return value;
  }
  return fallback;
}

void LaunchPlan::SetParam(std::string_view name, int64_t value) {
  for (auto& [key, v] : params) {
    if (key == name) {
      v = value;
      return;
    }
  }
  params.emplace_back(std::string(name), value);
}

std::string Candidate::ContentHash() const {
  internal::Hasher hasher;
  hasher.Add(source).Add(plan.ToJson());
  for (const std::string& option : compile_options) hasher.Add(option);
  return hasher.HexDigest();
}

}  // namespace ksearch
