// The offline generators: a catalog that phrases parameter moves as ideas in
// the six categories, and a brancher that applies them. Together they let the
// parallel-branch loop run without a language model, as a structured local
// search over a problem's templates.
#include <algorithm>
#include <cctype>
#include <charconv>
#include <random>
#include <set>

#include "core/plan_resolve.h"
#include "ksearch/strategies.h"
#include "search/search_util.h"

namespace ksearch {
namespace {

struct ParamRule {
  const char* token;
  bool exact;  // two-letter names (BM, TN…) would match too much as substrings
  IdeaCategory category;
};

constexpr ParamRule kRules[] = {
    {"VEC", false, IdeaCategory::kMemoryAccess},  {"WIDTH", false, IdeaCategory::kMemoryAccess},
    {"TILE", false, IdeaCategory::kMemoryAccess}, {"SMEM", false, IdeaCategory::kMemoryAccess},
    {"PAD", false, IdeaCategory::kMemoryAccess},  {"LOAD", false, IdeaCategory::kMemoryAccess},
    {"BK", true, IdeaCategory::kMemoryAccess},    {"BM", true, IdeaCategory::kMemoryAccess},
    {"BN", true, IdeaCategory::kMemoryAccess},    {"TM", true, IdeaCategory::kMemoryAccess},
    {"TN", true, IdeaCategory::kMemoryAccess},    {"STAGE", false, IdeaCategory::kAsynchrony},
    {"PIPE", false, IdeaCategory::kAsynchrony},   {"PREFETCH", false, IdeaCategory::kAsynchrony},
    {"DEPTH", false, IdeaCategory::kAsynchrony},  {"BUFFER", false, IdeaCategory::kAsynchrony},
    {"ASYNC", false, IdeaCategory::kAsynchrony},  {"HALF", false, IdeaCategory::kDataTypes},
    {"FP16", false, IdeaCategory::kDataTypes},    {"BF16", false, IdeaCategory::kDataTypes},
    {"TF32", false, IdeaCategory::kDataTypes},    {"ACC", false, IdeaCategory::kDataTypes},
    {"PREC", false, IdeaCategory::kDataTypes},    {"TM", true, IdeaCategory::kCompute},
    {"TN", true, IdeaCategory::kCompute},         {"TK", true, IdeaCategory::kCompute},
    {"OCB", false, IdeaCategory::kCompute},       {"WPT", false, IdeaCategory::kCompute},
    {"ITEMS", false, IdeaCategory::kCompute},     {"PER_THREAD", false, IdeaCategory::kCompute},
    {"WORK", false, IdeaCategory::kCompute},      {"ILP", false, IdeaCategory::kCompute},
    {"BLOCK", false, IdeaCategory::kParallelism}, {"THREADS", false, IdeaCategory::kParallelism},
    {"WARPS", false, IdeaCategory::kParallelism}, {"SPLIT", false, IdeaCategory::kParallelism},
    {"BM", true, IdeaCategory::kParallelism},     {"BN", true, IdeaCategory::kParallelism},
    {"GRID", false, IdeaCategory::kParallelism},  {"CTA", false, IdeaCategory::kParallelism},
    {"OCB", false, IdeaCategory::kParallelism},   {"UNROLL", false, IdeaCategory::kControlFlow},
    {"STEP", false, IdeaCategory::kControlFlow},  {"LOOP", false, IdeaCategory::kControlFlow},
    {"ITER", false, IdeaCategory::kControlFlow},  {"CHUNK", false, IdeaCategory::kControlFlow},
    {"BK", true, IdeaCategory::kControlFlow},
};

std::vector<IdeaCategory> CategoriesOf(std::string_view name) {
  std::string upper(name);
  for (char& c : upper) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  std::vector<IdeaCategory> out;
  for (const ParamRule& r : kRules) {
    bool match = r.exact ? upper == r.token : upper.find(r.token) != std::string::npos;
    if (match && std::find(out.begin(), out.end(), r.category) == out.end()) {
      out.push_back(r.category);
    }
  }
  if (out.empty()) out.push_back(IdeaCategory::kParallelism);
  return out;
}

// Why moving a parameter of this category up (or down) might pay.
const char* Why(IdeaCategory category, bool up) {
  switch (category) {
    case IdeaCategory::kMemoryAccess:
      return up ? "wider accesses and larger tiles mean fewer, wider memory transactions and more "
                  "reuse of data staged on chip"
                : "narrower accesses and smaller tiles need less shared memory and fewer "
                  "registers, so more blocks stay resident";
    case IdeaCategory::kAsynchrony:
      return up ? "a deeper pipeline keeps more loads in flight to hide memory latency"
                : "a shallower pipeline frees shared memory and registers for occupancy";
    case IdeaCategory::kDataTypes:
      return "it changes the precision mode of the arithmetic, within the tolerance";
    case IdeaCategory::kCompute:
      return up ? "more outputs per thread amortize index arithmetic and loads over more FMAs "
                  "and expose instruction-level parallelism"
                : "fewer outputs per thread need fewer registers, so more threads are in flight";
    case IdeaCategory::kParallelism:
      return up ? "more threads per unit of work give the scheduler more warps to hide latency "
                  "with"
                : "smaller blocks let more of them reside per SM and make block-wide "
                  "synchronization cheaper";
    case IdeaCategory::kControlFlow:
      return up ? "longer loop steps mean fewer iterations, branches and index updates"
                : "shorter loop steps give smaller code and fewer live registers";
  }
  return "";
}

// The template whose point `c` is (same source and kernels), or null for a
// kernel with free parameters.
const TemplateSpec* TemplateOf(const Problem& problem, const Candidate& c) {
  for (const TemplateSpec& t : problem.templates) {
    if (t.kernel.source != c.source) continue;
    bool same = t.kernel.plan.launches.size() == c.plan.launches.size();
    for (size_t i = 0; same && i < c.plan.launches.size(); ++i) {
      same = t.kernel.plan.launches[i].kernel == c.plan.launches[i].kernel;
    }
    if (same) return &t;
  }
  return nullptr;
}

const std::vector<int64_t>* SpaceOf(const TemplateSpec* t, const std::string& param) {
  if (!t) return nullptr;
  for (const auto& [name, values] : t->space) {
    if (name == param) return &values;
  }
  return nullptr;
}

// One step of `param` up or down: along the template's list, else ×2 / ÷2.
std::optional<int64_t> Step(const TemplateSpec* t, const std::string& param, int64_t value,
                            bool up) {
  if (const std::vector<int64_t>* values = SpaceOf(t, param)) {
    std::vector<int64_t> sorted = *values;
    std::sort(sorted.begin(), sorted.end());
    if (up) {
      auto it = std::upper_bound(sorted.begin(), sorted.end(), value);
      if (it == sorted.end()) return std::nullopt;
      return *it;
    }
    auto it = std::lower_bound(sorted.begin(), sorted.end(), value);
    if (it == sorted.begin()) return std::nullopt;
    return *(it - 1);
  }
  if (t) return std::nullopt;  // a template param without a declared space is fixed
  if (up) {
    if (value <= 0 || value > (int64_t{1} << 16)) return std::nullopt;
    return value * 2;
  }
  if (value < 2) return std::nullopt;
  return value / 2;
}

bool Valid(const Problem& problem, const TemplateSpec* t, const LaunchPlan& plan) {
  if (t) {
    auto values = internal::PlanValues(problem, plan);
    for (const std::string& c : t->constraints) {
      auto ok = EvaluateCondition(c, values);
      if (!ok.ok() || !*ok) return false;
    }
  }
  return internal::ResolvePlan(problem, plan).ok();
}

std::set<std::string> JudgedHashes(const SearchHistory* history) {
  std::set<std::string> out;
  if (!history) return out;
  for (const HistoryEntry& e : history->entries) {
    out.insert(e.evaluation.content_hash.empty() ? e.candidate.ContentHash()
                                                 : e.evaluation.content_hash);
  }
  return out;
}

// "[move BLOCK=512 VEC=2]" or "[template online]" at the end of an idea.
struct Tag {
  std::string template_name;
  std::vector<std::pair<std::string, int64_t>> moves;
  bool found = false;
};

Tag ParseTag(std::string_view text) {
  Tag tag;
  size_t open = text.rfind('[');
  if (open == std::string_view::npos) return tag;
  size_t close = text.find(']', open);
  if (close == std::string_view::npos) return tag;
  std::string_view body = text.substr(open + 1, close - open - 1);
  auto words = [&] {
    std::vector<std::string> out;
    size_t pos = 0;
    while (pos < body.size()) {
      size_t end = body.find(' ', pos);
      if (end == std::string_view::npos) end = body.size();
      if (end > pos) out.emplace_back(body.substr(pos, end - pos));
      pos = end + 1;
    }
    return out;
  }();
  if (words.size() == 2 && words[0] == "template") {
    tag.template_name = words[1];
    tag.found = true;
    return tag;
  }
  if (words.size() < 2 || words[0] != "move") return tag;
  for (size_t i = 1; i < words.size(); ++i) {
    size_t eq = words[i].find('=');
    if (eq == std::string::npos) return Tag{};
    int64_t value = 0;
    const char* first = words[i].data() + eq + 1;
    const char* last = words[i].data() + words[i].size();
    auto [end, ec] = std::from_chars(first, last, value);
    if (ec != std::errc() || end != last) return Tag{};
    tag.moves.emplace_back(words[i].substr(0, eq), value);
  }
  tag.found = true;
  return tag;
}

struct Move {
  IdeaCategory category = IdeaCategory::kParallelism;
  std::string tag;   // the bracketed part
  std::string text;  // the whole idea
  std::string hash;  // of the candidate the move yields
};

class CatalogIdeaGenerator final : public IdeaGenerator {
 public:
  std::string name() const override { return "catalog"; }

  StatusOr<IdeaResult> Propose(const IdeaRequest& request) override {
    if (!request.problem || !request.parent) {
      return InvalidArgumentError("IdeaRequest needs a problem and a parent");
    }
    const Problem& problem = *request.problem;
    const Candidate& parent = request.parent->candidate;
    const TemplateSpec* t = TemplateOf(problem, parent);
    std::vector<Move> moves;
    for (const auto& [param, value] : parent.plan.params) {
      for (bool up : {true, false}) {
        std::optional<int64_t> next = Step(t, param, value, up);
        if (!next) continue;
        Candidate c = parent;
        c.plan.SetParam(param, *next);
        if (!Valid(problem, t, c.plan)) continue;
        for (IdeaCategory category : CategoriesOf(param)) {
          Move m;
          m.category = category;
          m.tag = "move " + param + "=" + std::to_string(*next);
          m.text = std::string(up ? "Raise " : "Lower ") + param + " from " +
                   std::to_string(value) + " to " + std::to_string(*next) + ": " +
                   Why(category, up) + ". [" + m.tag + "]";
          m.hash = c.ContentHash();
          moves.push_back(std::move(m));
        }
      }
    }
    for (const TemplateSpec& other : problem.templates) {
      if (&other == t || !Valid(problem, &other, other.kernel.plan)) continue;
      Candidate c = other.kernel.ToCandidate("", "template");
      Move m;
      // A template is another algorithm for the op: its first gain is usually
      // in how much work each instruction does.
      m.category = IdeaCategory::kCompute;
      m.tag = "template " + other.name;
      std::string point;
      for (const auto& [param, value] : other.kernel.plan.params) {
        point += (point.empty() ? "" : " ") + param + "=" + std::to_string(value);
      }
      m.text = "Switch to the '" + other.name + "' template at its default point (" + point +
               "): a different implementation of the op, whose parameters can then be tuned. [" +
               m.tag + "]";
      m.hash = c.ContentHash();
      moves.push_back(std::move(m));
    }
    // Moves already proposed on this parent, or leading to a judged kernel,
    // would only repeat the past.
    std::set<std::string> tried;
    if (request.history) {
      for (const Idea& idea : request.history->ideas) {
        if (idea.parent_id != parent.id) continue;
        size_t open = idea.text.rfind('[');
        if (open != std::string::npos) {
          tried.insert(idea.text.substr(open + 1, idea.text.size() - open - 2));
        }
      }
    }
    std::set<std::string> judged = JudgedHashes(request.history);
    std::vector<const Move*> fresh;
    for (const Move& m : moves) {
      if (!tried.count(m.tag) && !judged.count(m.hash)) fresh.push_back(&m);
    }
    std::mt19937_64 rng(request.seed);
    std::shuffle(fresh.begin(), fresh.end(), rng);
    std::vector<const Move*> chosen(static_cast<size_t>(std::max(0, request.count)), nullptr);
    std::set<std::string> used;
    auto take = [&](size_t slot, std::optional<IdeaCategory> category) {
      for (const Move* m : fresh) {
        if (used.count(m->tag) || (category && m->category != *category)) continue;
        chosen[slot] = m;
        used.insert(m->tag);
        return;
      }
    };
    for (size_t j = 0; j < chosen.size(); ++j) {
      if (!request.categories.empty()) take(j, request.categories[j % request.categories.size()]);
    }
    for (size_t j = 0; j < chosen.size(); ++j) {
      if (!chosen[j]) take(j, std::nullopt);
    }
    IdeaResult result;
    for (const Move* m : chosen) {
      if (!m) continue;
      Idea idea;
      idea.category = m->category;
      idea.text = m->text;
      idea.generator = name();
      result.ideas.push_back(std::move(idea));
    }
    if (static_cast<int>(result.ideas.size()) < request.count) {
      result.notes = "the catalog has " + std::to_string(result.ideas.size()) +
                     " untried moves from " + parent.id + " (of " + std::to_string(request.count) +
                     " asked)";
    }
    return result;
  }
};

class ParameterMutationBrancher final : public Brancher {
 public:
  std::string name() const override { return "mutation"; }

  StatusOr<BranchResult> Branch(const BranchRequest& request) override {
    if (!request.problem || !request.parent || !request.idea) {
      return InvalidArgumentError("BranchRequest needs a problem, a parent and an idea");
    }
    BranchResult result;
    if (request.failed) {
      result.notes = "the mutation brancher does not repair: a failing point is a data point";
      return result;
    }
    const Problem& problem = *request.problem;
    const Candidate& parent = request.parent->candidate;
    std::mt19937_64 rng(request.seed);
    Tag tag = ParseTag(request.idea->text);
    const TemplateSpec* t = TemplateOf(problem, parent);
    Candidate base = parent;
    base.provenance = Provenance{};
    if (tag.found && !tag.template_name.empty()) {
      auto it = std::find_if(problem.templates.begin(), problem.templates.end(),
                             [&](const TemplateSpec& s) { return s.name == tag.template_name; });
      if (it == problem.templates.end()) {
        result.notes = "no template named '" + tag.template_name + "'";
        return result;
      }
      t = &*it;
      base = t->kernel.ToCandidate("", "template");
    } else if (tag.found) {
      for (const auto& [param, value] : tag.moves) base.plan.SetParam(param, value);
    } else {
      // An idea from elsewhere (a language model, a person): one random step
      // of a parameter in the idea's category, or of any parameter.
      std::vector<std::pair<std::string, bool>> steps;
      for (bool of_category : {true, false}) {
        for (const auto& [param, value] : parent.plan.params) {
          auto cats = CategoriesOf(param);
          if (of_category &&
              std::find(cats.begin(), cats.end(), request.idea->category) == cats.end()) {
            continue;
          }
          for (bool up : {true, false}) {
            if (Step(t, param, value, up)) steps.emplace_back(param, up);
          }
        }
        if (!steps.empty()) break;
      }
      if (steps.empty()) {
        result.notes = "the parent has no parameter to move";
        return result;
      }
      const auto& [param, up] = steps[rng() % steps.size()];
      base.plan.SetParam(param, *Step(t, param, base.plan.Param(param, 0), up));
    }
    std::set<std::string> seen = JudgedHashes(request.history);
    seen.insert(parent.ContentHash());
    int skipped = 0;
    auto offer = [&](const Candidate& c) {
      if (static_cast<int>(result.candidates.size()) >= request.count) return;
      std::string hash = c.ContentHash();
      if (seen.count(hash)) return;
      seen.insert(hash);
      if (!Valid(problem, t, c.plan)) {
        ++skipped;
        return;
      }
      result.candidates.push_back(c);
    };
    offer(base);
    // Further branches: the idea plus one more step of some parameter.
    std::vector<Candidate> around;
    for (const auto& [param, value] : base.plan.params) {
      for (bool up : {true, false}) {
        std::optional<int64_t> next = Step(t, param, value, up);
        if (!next) continue;
        Candidate c = base;
        c.plan.SetParam(param, *next);
        around.push_back(std::move(c));
      }
    }
    std::shuffle(around.begin(), around.end(), rng);
    for (const Candidate& c : around) offer(c);
    if (static_cast<int>(result.candidates.size()) < request.count) {
      result.notes = std::to_string(result.candidates.size()) + " of " +
                     std::to_string(request.count) + " branches: the other points near the idea " +
                     "were judged before" + (skipped ? " or break a constraint" : "");
    }
    return result;
  }
};

}  // namespace

std::unique_ptr<IdeaGenerator> MakeCatalogIdeaGenerator() {
  return std::make_unique<CatalogIdeaGenerator>();
}

std::unique_ptr<Brancher> MakeParameterMutationBrancher() {
  return std::make_unique<ParameterMutationBrancher>();
}

}  // namespace ksearch
