#include "core/plan_resolve.h"

#include <boost/json.hpp>

#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <string>
#include <string_view>

#include "core/json_util.h"

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

namespace {

constexpr std::string_view kSwizzles[] = {"none", "32B", "64B", "128B"};
constexpr std::string_view kL2Promotions[] = {"none", "64B", "128B", "256B"};
constexpr std::string_view kOobFills[] = {"zero", "nan"};

template <size_t N>
int IndexOf(const std::string_view (&names)[N], std::string_view name) {
  for (size_t i = 0; i < N; ++i) {
    if (names[i] == name) return static_cast<int>(i);
  }
  return -1;
}

template <size_t N>
std::string OneOf(const std::string_view (&names)[N]) {
  std::string out;
  for (std::string_view name : names) out += (out.empty() ? "" : ", ") + std::string(name);
  return out;
}

template <size_t N>
Status ReadChoice(const JsonNode& object, std::string_view key,
                  const std::string_view (&names)[N], std::string* out) {
  KSEARCH_ASSIGN_OR_RETURN(auto node, object.Find(key));
  if (!node) return Status::Ok();
  KSEARCH_ASSIGN_OR_RETURN(std::string value, node->String());
  if (IndexOf(names, value) < 0) {
    return node->Error("'" + value + "' is not one of " + OneOf(names));
  }
  *out = std::move(value);
  return Status::Ok();
}

StatusOr<std::vector<std::string>> ReadExtents(const JsonNode& node) {
  KSEARCH_ASSIGN_OR_RETURN(std::vector<JsonNode> items, node.Array());
  if (items.empty() || items.size() > 5) {
    return node.Error("a tensor map has 1 to 5 dimensions, got " + std::to_string(items.size()) +
                      " entries");
  }
  std::vector<std::string> out;
  for (const JsonNode& item : items) {
    KSEARCH_ASSIGN_OR_RETURN(std::string expr, item.Expression());
    out.push_back(std::move(expr));
  }
  return out;
}

}  // namespace

StatusOr<TensorMapSpec> ParseTensorMapNode(const JsonNode& node) {
  KSEARCH_RETURN_IF_ERROR(
      node.CheckKeys({"tensor_map", "dims", "box", "swizzle", "l2_promotion", "oob_fill"}));
  TensorMapSpec spec;
  KSEARCH_ASSIGN_OR_RETURN(JsonNode tensor, node.Required("tensor_map"));
  KSEARCH_ASSIGN_OR_RETURN(spec.tensor, tensor.String());
  if (spec.tensor.empty()) return tensor.Error("empty tensor name");
  KSEARCH_ASSIGN_OR_RETURN(auto dims, node.Find("dims"));
  if (dims) {
    KSEARCH_ASSIGN_OR_RETURN(spec.dims, ReadExtents(*dims));
  }
  KSEARCH_ASSIGN_OR_RETURN(JsonNode box, node.Required("box"));
  KSEARCH_ASSIGN_OR_RETURN(spec.box, ReadExtents(box));
  if (dims && spec.dims.size() != spec.box.size()) {
    return box.Error("the box has " + std::to_string(spec.box.size()) + " entries but dims has " +
                     std::to_string(spec.dims.size()));
  }
  KSEARCH_RETURN_IF_ERROR(ReadChoice(node, "swizzle", kSwizzles, &spec.swizzle));
  KSEARCH_RETURN_IF_ERROR(ReadChoice(node, "l2_promotion", kL2Promotions, &spec.l2_promotion));
  KSEARCH_RETURN_IF_ERROR(ReadChoice(node, "oob_fill", kOobFills, &spec.oob_fill));
  return spec;
}

StatusOr<TensorMapSpec> ParseTensorMapArg(std::string_view json, std::string_view origin,
                                          std::string_view path) {
  KSEARCH_ASSIGN_OR_RETURN(auto doc, JsonDocument::Parse(json, origin));
  return ParseTensorMapNode(JsonNode(doc->root(), std::string(path), &doc->origin()));
}

std::string TensorMapSpec::ToJson() const {
  boost::json::object o;
  o["tensor_map"] = tensor;
  if (!dims.empty()) o["dims"] = boost::json::array(dims.begin(), dims.end());
  o["box"] = boost::json::array(box.begin(), box.end());
  o["swizzle"] = swizzle;
  o["l2_promotion"] = l2_promotion;
  o["oob_fill"] = oob_fill;
  return boost::json::serialize(o);
}

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
    KSEARCH_RETURN_IF_ERROR(check_dim3("cluster", spec.cluster));
    KSEARCH_RETURN_IF_ERROR(
        CheckLength(prefix + ".shared_bytes", spec.shared_bytes, kMaxExpressionLength));
    if (spec.args.size() > kMaxArgsPerLaunch) {
      return OverCap(prefix + ".args", spec.args.size(), "arguments", kMaxArgsPerLaunch);
    }
    for (size_t a = 0; a < spec.args.size(); ++a) {
      // A tensor map is a JSON object; a scalar is "EXPR:TYPE" (":i32" and
      // the like take 4 characters); anything else names a tensor or
      // workspace.
      const std::string& arg = spec.args[a];
      bool scalar = arg.find(':') != std::string::npos;
      KSEARCH_RETURN_IF_ERROR(CheckLength(prefix + ".args[" + std::to_string(a) + "]", arg,
                                          IsTensorMapArg(arg) ? kMaxTensorMapArgLength
                                          : scalar            ? kMaxExpressionLength + 4
                                                              : kMaxNameLength));
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

std::string ElementText(int64_t count, DType dtype) {
  return std::to_string(count) + " " + std::string(ToString(dtype)) +
         (count == 1 ? " element" : " elements");
}

std::string ListText(const std::vector<uint64_t>& values) {
  std::string out;
  for (uint64_t v : values) out += (out.empty() ? "" : ", ") + std::to_string(v);
  return "[" + out + "]";
}

// A tensor-map argument at `values`: the map over its tensor's real extent
// (or the view "dims" gives), checked against what cuTensorMapEncodeTiled
// accepts and against the tensor, so that the driver refuses nothing the
// judge let through but a misaligned address.
StatusOr<ResolvedArg> ResolveTensorMap(const Problem& problem, const LaunchPlan& plan,
                                       const std::vector<std::pair<std::string, int64_t>>& values,
                                       const std::string& field, const std::string& text) {
  auto parsed = ParseTensorMapArg(text, "", field);
  if (!parsed.ok()) {
    // Without an origin the message starts ": FIELD: ...".
    std::string message = parsed.status().message();
    if (message.rfind(": ", 0) == 0) message.erase(0, 2);
    return InvalidArgumentError(message);
  }
  const TensorMapSpec& spec = *parsed;
  ResolvedArg arg;
  arg.kind = ResolvedArg::Kind::kTensorMap;
  const TensorSpec* tensor = problem.FindTensor(spec.tensor);
  if (!tensor) {
    std::string names;
    for (const auto& t : problem.tensors) names += (names.empty() ? "" : ", ") + t.name;
    bool workspace = false;
    for (const auto& w : plan.workspace) workspace = workspace || w.name == spec.tensor;
    return InvalidArgumentError(field + ".tensor_map: '" + spec.tensor + "' is " +
                                (workspace ? "a workspace buffer; a tensor map is over one of the "
                                             "problem's tensors"
                                           : "not a tensor of the problem") +
                                " (tensors: " + names + ")");
  }
  arg.index = static_cast<int>(tensor - problem.tensors.data());
  ResolvedTensorMap& map = arg.tensor_map;
  map.dtype = tensor->dtype;
  const int64_t element_bytes = SizeOf(tensor->dtype);
  // The tensor's extents at these dims, outermost first as the problem
  // writes them.
  std::vector<int64_t> shape;
  int64_t elements = 1;
  for (size_t d = 0; d < tensor->shape.size(); ++d) {
    KSEARCH_ASSIGN_OR_RETURN(int64_t extent, Eval(field + ": tensor '" + tensor->name + "' shape[" +
                                                      std::to_string(d) + "]",
                                                  tensor->shape[d], values));
    shape.push_back(extent);
    if (__builtin_mul_overflow(elements, extent, &elements)) {
      return InvalidArgumentError(field + ": the element count of tensor '" + tensor->name +
                                  "' overflows 64 bits");
    }
  }
  std::string shape_text;
  for (int64_t extent : shape) shape_text += (shape_text.empty() ? "" : ", ") + std::to_string(extent);
  const std::string described = "tensor '" + tensor->name + "' [" + shape_text + "] " +
                                std::string(ToString(tensor->dtype));
  std::vector<uint64_t> dims;  // innermost first
  if (!spec.dims.empty()) {
    int64_t count = 1;
    for (size_t d = 0; d < spec.dims.size(); ++d) {
      std::string dfield = field + ".dims[" + std::to_string(d) + "]";
      KSEARCH_ASSIGN_OR_RETURN(int64_t extent, Eval(dfield, spec.dims[d], values));
      if (extent < 1) {
        return InvalidArgumentError(dfield + ": '" + spec.dims[d] + "' = " + std::to_string(extent) +
                                    " (must be positive)");
      }
      if (__builtin_mul_overflow(count, extent, &count)) {
        return InvalidArgumentError(field + ".dims: the product overflows 64 bits");
      }
      dims.push_back(static_cast<uint64_t>(extent));
    }
    if (count != elements) {
      return InvalidArgumentError(field + ".dims: " + ListText(dims) + " views " +
                                  std::to_string(count) + " elements, but " + described + " has " +
                                  std::to_string(elements) + " (a view must cover the tensor exactly)");
    }
  } else {
    if (shape.empty() || shape.size() > 5) {
      return InvalidArgumentError(field + ": " + described + " has " + std::to_string(shape.size()) +
                                  " dimensions; a tensor map has 1 to 5 (give \"dims\" to view it "
                                  "with another shape)");
    }
    for (size_t d = shape.size(); d-- > 0;) dims.push_back(static_cast<uint64_t>(shape[d]));
  }
  if (spec.box.size() != dims.size()) {
    return InvalidArgumentError(field + ".box: " + std::to_string(spec.box.size()) +
                                " entries, but the map over " + described + " has " +
                                std::to_string(dims.size()) + " dimensions (innermost first)");
  }
  map.rank = static_cast<int>(dims.size());
  static constexpr uint64_t kMaxGlobalDim = uint64_t{1} << 32;
  static constexpr uint64_t kMaxStride = uint64_t{1} << 40;
  for (int d = 0; d < map.rank; ++d) {
    if (dims[d] > kMaxGlobalDim) {
      return InvalidArgumentError(field + ": dimension " + std::to_string(d) + " of the map over " +
                                  described + " is " + std::to_string(dims[d]) +
                                  " elements (TMA takes at most 2^32)");
    }
    map.dims[d] = dims[d];
  }
  // Row-major: each stride is the bytes of everything inside it.
  uint64_t stride = static_cast<uint64_t>(element_bytes);
  for (int d = 1; d < map.rank; ++d) {
    bool overflow = __builtin_mul_overflow(stride, dims[d - 1], &stride);
    if (overflow || stride % 16 != 0 || stride >= kMaxStride) {
      return InvalidArgumentError(
          field + ": the stride of dimension " + std::to_string(d) + " of the map over " + described +
          " (innermost first: " + ListText(dims) + ") is " + std::to_string(stride) + " bytes; TMA needs " +
          (!overflow && stride % 16 != 0 ? "a multiple of 16 bytes" : "less than 2^40 bytes"));
    }
    map.strides[d - 1] = stride;
  }
  for (int d = 0; d < map.rank; ++d) {
    std::string bfield = field + ".box[" + std::to_string(d) + "]";
    KSEARCH_ASSIGN_OR_RETURN(int64_t b, Eval(bfield, spec.box[d], values));
    if (b < 1 || b > 256) {
      return InvalidArgumentError(bfield + ": '" + spec.box[d] + "' = " + std::to_string(b) +
                                  " (must be 1..256)");
    }
    if (static_cast<uint64_t>(b) > dims[d]) {
      return InvalidArgumentError(bfield + ": '" + spec.box[d] + "' = " + std::to_string(b) +
                                  " is larger than dimension " + std::to_string(d) + " of the map over " +
                                  described + " (" + std::to_string(dims[d]) +
                                  "); min(a, b) bounds a box by a dim");
    }
    map.box[d] = static_cast<uint32_t>(b);
  }
  const int64_t inner_bytes = int64_t{map.box[0]} * element_bytes;
  if (inner_bytes % 16 != 0) {
    return InvalidArgumentError(field + ".box[0]: '" + spec.box[0] + "' = " +
                                ElementText(map.box[0], map.dtype) + " = " + std::to_string(inner_bytes) +
                                " bytes; the box's inner dimension must be a multiple of 16 bytes");
  }
  // ParseTensorMapArg accepted only names these lists hold.
  map.swizzle = static_cast<ResolvedTensorMap::Swizzle>(IndexOf(kSwizzles, spec.swizzle));
  map.l2_promotion = static_cast<ResolvedTensorMap::L2Promotion>(IndexOf(kL2Promotions, spec.l2_promotion));
  map.oob_fill = static_cast<ResolvedTensorMap::OobFill>(IndexOf(kOobFills, spec.oob_fill));
  if (map.swizzle != ResolvedTensorMap::Swizzle::kNone) {
    const int64_t span = int64_t{16} << static_cast<int>(map.swizzle);  // 32, 64, 128
    if (inner_bytes > span) {
      return InvalidArgumentError(field + ".swizzle: '" + spec.swizzle +
                                  "' needs the box's inner dimension within " + std::to_string(span) +
                                  " bytes, but box[0] = " + ElementText(map.box[0], map.dtype) + " = " +
                                  std::to_string(inner_bytes) + " bytes");
    }
  }
  if (map.oob_fill == ResolvedTensorMap::OobFill::kNan && !IsFloating(map.dtype)) {
    return InvalidArgumentError(field + ".oob_fill: 'nan' needs a floating-point tensor; " +
                                described + " is not");
  }
  return arg;
}

// The launch's cluster, checked against its grid (which must be resolved).
Status ResolveCluster(const LaunchSpec& spec, const std::vector<std::pair<std::string, int64_t>>& values,
                      const std::string& prefix, ResolvedLaunch* launch) {
  launch->non_portable_cluster_size = spec.non_portable_cluster_size;
  if (spec.cluster.empty()) {
    if (spec.non_portable_cluster_size) {
      return InvalidArgumentError(prefix + ".non_portable_cluster_size: set, but the launch has no cluster");
    }
    return Status::Ok();
  }
  if (spec.cluster.size() != 3) {
    return InvalidArgumentError(prefix + ".cluster: needs three entries [x, y, z]");
  }
  static constexpr const char* kAxis[3] = {"x", "y", "z"};
  for (int d = 0; d < 3; ++d) {
    const std::string field = prefix + ".cluster[" + std::to_string(d) + "]";
    KSEARCH_ASSIGN_OR_RETURN(int64_t c, Eval(field, spec.cluster[d], values));
    if (c < 1 || c > kMaxClusterSize) {
      return InvalidArgumentError(field + ": '" + spec.cluster[d] + "' = " + std::to_string(c) +
                                  " (must be 1.." + std::to_string(kMaxClusterSize) + ")");
    }
    if (launch->grid[d] % c != 0) {
      return InvalidArgumentError(field + ": '" + spec.cluster[d] + "' = " + std::to_string(c) +
                                  " does not divide grid[" + std::to_string(d) + "] = " +
                                  std::to_string(launch->grid[d]) + ": the grid's " + kAxis[d] +
                                  " must be a whole number of clusters");
    }
    launch->cluster[d] = static_cast<uint32_t>(c);
  }
  const int64_t size = launch->ClusterSize();
  const int64_t limit = spec.non_portable_cluster_size ? kMaxClusterSize : kPortableClusterSize;
  if (size > limit) {
    return InvalidArgumentError(
        prefix + ".cluster: " + std::to_string(size) + " blocks per cluster, above the " +
        (spec.non_portable_cluster_size
             ? "largest any GPU allows (" + std::to_string(kMaxClusterSize) + ")"
             : "portable limit of " + std::to_string(kPortableClusterSize) +
                   " (add \"non_portable_cluster_size\": true for up to " +
                   std::to_string(kMaxClusterSize) + " where the GPU allows it)"));
  }
  return Status::Ok();
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
    KSEARCH_RETURN_IF_ERROR(ResolveCluster(spec, values, prefix, &launch));
    for (size_t a = 0; a < spec.args.size(); ++a) {
      const std::string& text = spec.args[a];
      std::string field = prefix + ".args[" + std::to_string(a) + "]";
      ResolvedArg arg;
      size_t colon = text.rfind(':');
      if (IsTensorMapArg(text)) {
        KSEARCH_ASSIGN_OR_RETURN(arg, ResolveTensorMap(problem, plan, values, field, text));
      } else if (colon == std::string::npos) {
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
