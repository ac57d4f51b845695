// RunReportHtml: one self-contained page about a run. Everything is inline
// (styles, the SVG chart, a few lines of script that only annotate the page
// once it is laid out); nothing is fetched, so the file can be mailed or
// opened offline.
#include <algorithm>
#include <boost/json.hpp>
#include <cmath>
#include <cstdio>
#include <ctime>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <unordered_map>

#include "ksearch/run_report.h"
#include "ksearch/store.h"

namespace ksearch {
namespace {

std::string Escape(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (char c : text) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      case '\'': out += "&#39;"; break;
      default: out += c;
    }
  }
  return out;
}

std::string Format(const char* format, double value) {
  char text[64];
  std::snprintf(text, sizeof(text), format, value);
  return text;
}

std::string Time(int64_t unix_ms) {
  if (unix_ms <= 0) return "—";
  std::time_t seconds = static_cast<std::time_t>(unix_ms / 1000);
  std::tm tm{};
  gmtime_r(&seconds, &tm);
  char text[32];
  std::strftime(text, sizeof(text), "%Y-%m-%d %H:%M:%S UTC", &tm);
  return text;
}

std::string StatusClass(const Evaluation& e) {
  if (e.status == EvalStatus::kCompiled) return "compiled";
  return e.ok() ? "ok" : "fail";
}

// A one-line description of a judged candidate.
std::string Outcome(const Evaluation& e) {
  std::string out = std::string(ToString(e.status));
  if (e.timing) out += " · " + Format("%.4f", e.timing->median_ms) + " ms";
  if (e.speedup) out += " · " + Format("%.3f", e.speedup->ratio) + "× vs " + e.speedup->baseline;
  if (!e.ok() && !e.message.empty()) {
    std::string message = e.message.size() > 160 ? e.message.substr(0, 157) + "…" : e.message;
    out += " — " + message;
  }
  return out;
}

struct Point {
  int round = 0;
  double value = 0.0;
};

// What a per-round chart plots: one value per correct timed kernel, the
// best of each round (dots) and the best so far (line).
struct ChartSpec {
  std::string id;                   // the <svg> id
  std::string label;                // its aria-label
  bool higher_is_better = true;     // speedup: higher; time: lower
  std::optional<double> reference;  // a dashed line (the baseline at 1×)
  std::string reference_title;
  const char* tick_format = "%.2f";  // y-axis labels
  std::string unit;                  // after each y label and value
  std::function<std::optional<double>(const Evaluation&)> value;
};

// How long each recorded round took, for the dots' titles.
std::map<int, double> RoundSeconds(const RunHistory& h) {
  std::map<int, double> seconds;
  for (const RoundRecord& r : h.rounds) {
    if (r.ended_unix_ms > r.started_unix_ms) {
      seconds[r.round] = static_cast<double>(r.ended_unix_ms - r.started_unix_ms) / 1000.0;
    }
  }
  return seconds;
}

// Inline SVG of `spec` over the run's rounds.
std::string Chart(const RunHistory& h, const ChartSpec& spec) {
  auto better = [&](double a, double b) { return spec.higher_is_better ? a > b : a < b; };
  std::map<int, double> round_best;
  int last_round = 0;
  for (const RoundRecord& r : h.rounds) last_round = std::max(last_round, r.round);
  for (const HistoryEntry& e : h.entries) {
    last_round = std::max(last_round, e.candidate.provenance.round);
    if (!e.evaluation.ok()) continue;
    std::optional<double> value = spec.value(e.evaluation);
    if (!value || !std::isfinite(*value) || *value <= 0) continue;
    auto [it, added] = round_best.emplace(e.candidate.provenance.round, *value);
    if (!added && better(*value, it->second)) it->second = *value;
  }
  std::vector<Point> dots, line;
  std::optional<double> so_far;
  double top = spec.reference.value_or(0.0);
  for (int r = 0; r <= last_round; ++r) {
    auto it = round_best.find(r);
    if (it != round_best.end()) {
      dots.push_back({r, it->second});
      if (!so_far || better(it->second, *so_far)) so_far = it->second;
      top = std::max(top, it->second);
    }
    if (so_far) line.push_back({r, *so_far});
  }
  if (top <= 0) top = 1.0;
  top *= 1.15;
  const std::map<int, double> took = RoundSeconds(h);
  const double width = 640, height = 280, left = 56, right = 16, above = 16, below = 40;
  const double plot_w = width - left - right, plot_h = height - above - below;
  auto x = [&](int round) {
    return left + (last_round > 0 ? plot_w * round / last_round : plot_w / 2);
  };
  auto y = [&](double value) { return above + plot_h * (1.0 - value / top); };
  std::string svg = "<svg id=\"" + spec.id +
                    "\" xmlns=\"http://www.w3.org/2000/svg\" width=\"640\" "
                    "height=\"280\" viewBox=\"0 0 640 280\" role=\"img\" aria-label=\"" +
                    spec.label + "\">\n";
  svg += "<rect x=\"" + Format("%.1f", left) + "\" y=\"" + Format("%.1f", above) + "\" width=\"" +
         Format("%.1f", plot_w) + "\" height=\"" + Format("%.1f", plot_h) + "\" class=\"plot\"/>\n";
  for (int i = 0; i <= 4; ++i) {
    double value = top * i / 4;
    svg += "<line class=\"grid\" x1=\"" + Format("%.1f", left) + "\" x2=\"" + Format("%.1f", left + plot_w) +
           "\" y1=\"" + Format("%.1f", y(value)) + "\" y2=\"" + Format("%.1f", y(value)) + "\"/>";
    svg += "<text class=\"tick\" x=\"" + Format("%.1f", left - 6) + "\" y=\"" +
           Format("%.1f", y(value) + 4) + "\" text-anchor=\"end\">" +
           Format(spec.tick_format, value) + spec.unit + "</text>\n";
  }
  int step = std::max(1, (last_round + 1) / 10);
  for (int r = 0; r <= last_round; r += step) {
    svg += "<text class=\"tick\" x=\"" + Format("%.1f", x(r)) + "\" y=\"" + Format("%.1f", above + plot_h + 16) +
           "\" text-anchor=\"middle\">" + std::to_string(r) + "</text>";
  }
  svg += "\n<text class=\"axis\" x=\"" + Format("%.1f", left + plot_w / 2) + "\" y=\"" +
         Format("%.1f", height - 6) + "\" text-anchor=\"middle\">round</text>\n";
  if (spec.reference) {
    svg += "<line class=\"baseline\" x1=\"" + Format("%.1f", left) + "\" x2=\"" +
           Format("%.1f", left + plot_w) + "\" y1=\"" + Format("%.1f", y(*spec.reference)) +
           "\" y2=\"" + Format("%.1f", y(*spec.reference)) + "\"><title>" + spec.reference_title +
           "</title></line>\n";
  }
  if (line.empty()) {
    svg += "<text class=\"empty\" x=\"" + Format("%.1f", left + plot_w / 2) + "\" y=\"" +
           Format("%.1f", above + plot_h / 2) + "\" text-anchor=\"middle\">no timed correct kernel yet</text>\n";
  } else {
    std::string points;
    for (const Point& p : line) points += Format("%.1f", x(p.round)) + "," + Format("%.1f", y(p.value)) + " ";
    svg += "<polyline class=\"best-so-far\" points=\"" + points + "\"/>\n";
    for (const Point& p : dots) {
      std::string title =
          "round " + std::to_string(p.round) + ": " + Format("%.4g", p.value) + spec.unit;
      if (auto it = took.find(p.round); it != took.end()) {
        title += " (the round took " + Format("%.1f", it->second) + " s)";
      }
      svg += "<circle class=\"round-best\" cx=\"" + Format("%.1f", x(p.round)) + "\" cy=\"" +
             Format("%.1f", y(p.value)) + "\" r=\"4\"><title>" + title + "</title></circle>\n";
    }
  }
  return svg + "</svg>\n";
}

ChartSpec SpeedupChart() {
  ChartSpec spec;
  spec.id = "speedup-chart";
  spec.label = "speedup of the best kernel per round";
  spec.reference = 1.0;
  spec.reference_title = "baseline (1×)";
  spec.unit = "×";
  spec.value = [](const Evaluation& e) -> std::optional<double> {
    if (!e.speedup) return std::nullopt;
    return e.speedup->ratio;
  };
  return spec;
}

ChartSpec TimeChart() {
  ChartSpec spec;
  spec.id = "time-chart";
  spec.label = "time of the best kernel per round";
  spec.higher_is_better = false;
  spec.tick_format = "%.3g";
  spec.unit = " ms";
  spec.value = [](const Evaluation& e) -> std::optional<double> {
    if (!e.timing) return std::nullopt;
    return e.timing->median_ms;
  };
  return spec;
}

// The idea tree: a candidate's children are the ideas applied to it (each
// with its branches) and candidates derived from it without an idea.
class Tree {
 public:
  explicit Tree(const RunHistory& h) : h_(h) {
    for (const HistoryEntry& e : h.entries) candidates_[e.candidate.id] = &e;
    for (const Idea& idea : h.ideas) {
      ideas_by_parent_[idea.parent_id].push_back(&idea);
    }
    for (const HistoryEntry& e : h.entries) {
      const Provenance& p = e.candidate.provenance;
      if (!p.idea_id.empty()) {
        branches_[p.idea_id].push_back(&e);
      } else if (!p.parent_id.empty() && candidates_.count(p.parent_id)) {
        derived_[p.parent_id].push_back(&e);
      }
    }
  }

  std::string Render() {
    std::string out = "<ul id=\"idea-tree\" class=\"tree\">\n";
    std::map<int, std::vector<const HistoryEntry*>> roots_by_round;
    for (const HistoryEntry& e : h_.entries) {
      const Provenance& p = e.candidate.provenance;
      bool has_home = (!p.idea_id.empty() && idea_known(p.idea_id)) ||
                      (!p.parent_id.empty() && candidates_.count(p.parent_id));
      if (!has_home) roots_by_round[p.round].push_back(&e);
    }
    bool grouped = roots_by_round.size() > 1;
    for (const auto& [round, roots] : roots_by_round) {
      if (grouped) {
        out += "<li class=\"round\"><details" + std::string(round == roots_by_round.begin()->first ? " open" : "") +
               "><summary>round " + std::to_string(round) + " — " + std::to_string(roots.size()) +
               " candidate" + (roots.size() == 1 ? "" : "s") + "</summary><ul>\n";
      }
      for (const HistoryEntry* e : roots) out += RenderCandidate(*e, 0);
      if (grouped) out += "</ul></details></li>\n";
    }
    // Ideas whose parent is not a judged candidate of this run.
    for (const auto& [parent, ideas] : ideas_by_parent_) {
      if (candidates_.count(parent)) continue;
      for (const Idea* idea : ideas) out += RenderIdea(*idea, 0);
    }
    if (h_.entries.empty() && h_.ideas.empty()) out += "<li class=\"empty\">nothing recorded yet</li>\n";
    return out + "</ul>\n";
  }

 private:
  bool idea_known(const std::string& id) const {
    for (const Idea& i : h_.ideas) {
      if (i.id == id) return true;
    }
    return false;
  }

  std::string RenderCandidate(const HistoryEntry& e, int depth) {
    if (!visited_.insert(e.candidate.id).second || depth > 64) return "";
    std::string out = "<li class=\"candidate " + StatusClass(e.evaluation) + "\"><span class=\"id\">" +
                      Escape(e.candidate.id) + "</span> <span class=\"gen\">" +
                      Escape(e.candidate.provenance.generator) + "</span> <span class=\"outcome\">" +
                      Escape(Outcome(e.evaluation)) + "</span>";
    // A tuned candidate differs from its template only in its parameters.
    std::string params;
    for (const auto& [name, value] : e.candidate.plan.params) {
      params += (params.empty() ? "" : ", ") + name + "=" + std::to_string(value);
    }
    if (!params.empty()) out += " <span class=\"params\">" + Escape(params) + "</span>";
    std::string children;
    if (auto it = ideas_by_parent_.find(e.candidate.id); it != ideas_by_parent_.end()) {
      for (const Idea* idea : it->second) children += RenderIdea(*idea, depth + 1);
    }
    if (auto it = derived_.find(e.candidate.id); it != derived_.end()) {
      for (const HistoryEntry* child : it->second) children += RenderCandidate(*child, depth + 1);
    }
    if (!children.empty()) out += "\n<ul>\n" + children + "</ul>";
    return out + "</li>\n";
  }

  std::string RenderIdea(const Idea& idea, int depth) {
    std::string out = "<li class=\"idea\"><span class=\"category\">" + Escape(ToString(idea.category)) +
                      "</span> <span class=\"text\">" + Escape(idea.text) + "</span>";
    if (!idea.outcome.empty()) out += " <span class=\"idea-outcome\">→ " + Escape(idea.outcome) + "</span>";
    std::string children;
    if (auto it = branches_.find(idea.id); it != branches_.end()) {
      for (const HistoryEntry* branch : it->second) children += RenderCandidate(*branch, depth + 1);
    }
    if (!children.empty()) out += "\n<ul>\n" + children + "</ul>";
    return out + "</li>\n";
  }

  const RunHistory& h_;
  std::unordered_map<std::string, const HistoryEntry*> candidates_;
  std::map<std::string, std::vector<const Idea*>> ideas_by_parent_;
  std::unordered_map<std::string, std::vector<const HistoryEntry*>> branches_;
  std::unordered_map<std::string, std::vector<const HistoryEntry*>> derived_;
  std::set<std::string> visited_;
};

constexpr const char kStyle[] = R"css(
body { font: 14px/1.45 system-ui, sans-serif; margin: 24px auto; max-width: 1040px; color: #1d232b; padding: 0 16px; }
h1 { font-size: 22px; margin-bottom: 4px; } h2 { font-size: 17px; margin-top: 28px; border-bottom: 1px solid #dde2e8; }
.meta { color: #5b6673; } .cards { display: flex; flex-wrap: wrap; gap: 12px; margin: 16px 0; }
.card { border: 1px solid #dde2e8; border-radius: 6px; padding: 8px 14px; min-width: 120px; }
.card b { display: block; font-size: 18px; }
svg .plot { fill: #fbfcfd; stroke: #c9d1da; } svg .grid { stroke: #e7ebef; }
svg .tick, svg .axis, svg .empty { font-size: 11px; fill: #5b6673; }
svg .baseline { stroke: #b44; stroke-dasharray: 4 3; } svg .best-so-far { fill: none; stroke: #2364aa; stroke-width: 2; }
svg .round-best { fill: #2364aa; }
ul.tree, ul.tree ul { list-style: none; padding-left: 18px; border-left: 1px dotted #c9d1da; }
ul.tree { border-left: none; padding-left: 0; } li { margin: 2px 0; }
li.ok > .id { color: #17803d; font-weight: 600; } li.fail > .id { color: #b42318; font-weight: 600; }
li.idea > .category { background: #eef3fb; border-radius: 3px; padding: 0 4px; font-size: 12px; }
.gen, .idea-outcome { color: #5b6673; } .params { font-family: monospace; color: #3a4a8a; } pre { background: #f6f8fa; padding: 12px; overflow: auto; font-size: 12px; }
table { border-collapse: collapse; } td, th { padding: 3px 10px; border-bottom: 1px solid #eef0f2; text-align: left; }
td.n { text-align: right; } .bar { display: inline-block; height: 10px; background: #b42318; }
)css";

// Marks the page once it is laid out: a headless browser's dump then shows
// whether the chart and the tree really rendered (non-zero boxes).
constexpr const char kScript[] = R"js(
window.addEventListener('load', function () {
  var chart = document.getElementById('speedup-chart');
  var tree = document.getElementById('idea-tree');
  var box = chart && chart.getBBox ? chart.getBBox() : {width: 0, height: 0};
  var items = tree ? tree.getElementsByTagName('li').length : 0;
  var body = document.body;
  body.setAttribute('data-chart-width', Math.round(box.width));
  body.setAttribute('data-tree-height', tree ? tree.offsetHeight : 0);
  body.setAttribute('data-tree-items', items);
  body.setAttribute('data-rendered', box.width > 0 && tree && tree.offsetHeight > 0 ? 'yes' : 'no');
});
)js";

}  // namespace

std::string RunReportHtml(const RunHistory& h) {
  const RunInfo& run = h.run;
  std::string title = "ksearch run " + std::to_string(run.id) + " — " + run.problem_name;
  std::string html = "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n<title>" +
                     Escape(title) + "</title>\n<style>" + kStyle + "</style>\n</head>\n<body>\n";
  html += "<h1>" + Escape(title) + "</h1>\n<p class=\"meta\">strategy <b>" + Escape(run.strategy) +
          "</b> · status <b>" + Escape(ToString(run.status)) + "</b>";
  if (!run.termination.empty()) html += " (" + Escape(run.termination) + ")";
  html += " · " + Escape(run.device_name.empty() ? "no device" : run.device_name);
  if (!run.device_arch.empty()) html += " " + Escape(run.device_arch);
  if (run.driver_version) html += " · driver " + std::to_string(run.driver_version);
  html += " · NVRTC " + Escape(run.nvrtc_version) + " · ksearch " + Escape(run.ksearch_version) + "<br>started " +
          Time(run.started_unix_ms) + " · ended " + Time(run.ended_unix_ms) + " · " +
          std::to_string(run.sessions) + " session" + (run.sessions == 1 ? "" : "s") + " · seed " +
          std::to_string(run.seed) + " · problem fingerprint <code>" + Escape(run.problem_fingerprint.substr(0, 16)) +
          "</code></p>\n";
  if (!run.message.empty()) html += "<p class=\"meta\">" + Escape(run.message) + "</p>\n";

  const HistoryEntry* best = h.Best();
  auto by_status = h.CountByStatus();
  int64_t correct = by_status.count("ok") ? by_status["ok"] : 0;
  html += "<div class=\"cards\">";
  auto card = [&](const std::string& label, const std::string& value) {
    html += "<div class=\"card\">" + Escape(label) + "<b>" + Escape(value) + "</b></div>";
  };
  card("candidates", std::to_string(h.entries.size()));
  card("correct", std::to_string(correct));
  card("ideas", std::to_string(h.ideas.size()));
  card("rounds", std::to_string(std::max<size_t>(h.rounds.size(), 0)));
  if (best && best->evaluation.timing) card("best time", Format("%.4f", best->evaluation.timing->median_ms) + " ms");
  if (best && best->evaluation.speedup) card("best speedup", Format("%.3f", best->evaluation.speedup->ratio) + "×");
  int64_t input = 0, output = 0;
  double cost = 0.0;
  for (const LlmExchange& x : h.exchanges) {
    if (!x.response.ok()) continue;
    input += x.response->input_tokens;
    output += x.response->output_tokens;
    cost += x.response->cost_usd;
  }
  card("tokens in / out", std::to_string(input) + " / " + std::to_string(output));
  card("cost", "$" + Format("%.4f", cost));
  html += "</div>\n";

  html += "<h2>Speedup of the best kernel per round</h2>\n" + Chart(h, SpeedupChart());
  html += "<p class=\"meta\">line: best so far; dots: best of each round; dashed: the baseline";
  if (best && best->evaluation.speedup) html += " (" + Escape(best->evaluation.speedup->baseline) + ")";
  html += ".</p>\n";
  html += "<h2>Time of the best kernel per round</h2>\n" + Chart(h, TimeChart());
  html +=
      "<p class=\"meta\">median time in ms (lower is better); line: best so far; dots: "
      "fastest of each round (its title says how long the round took).</p>\n";

  html += "<h2>Ideas and candidates</h2>\n" + Tree(h).Render();

  html += "<h2>Best kernel</h2>\n";
  if (best) {
    html += "<p><b>" + Escape(best->candidate.id) + "</b> (round " + std::to_string(best->candidate.provenance.round) +
            ", " + Escape(best->candidate.provenance.generator) + ")" +
            (best->evaluation.correct() ? "" : ": compile-only, the compiled kernel with the fewest registers; never run") +
            "</p>\n";
    html += "<pre class=\"evaluation\">" + Escape(best->evaluation.Report()) + "</pre>\n";
    html += "<p>Launch plan</p><pre class=\"plan\">" + Escape(IndentJson(best->candidate.plan.ToJson())) + "</pre>\n";
    html += "<p>Source</p><pre class=\"source\"><code>" + Escape(best->candidate.source) + "</code></pre>\n";
  } else {
    html += "<p>No correct kernel in this run.</p>\n";
  }

  html += "<h2>Outcomes by status</h2>\n<table id=\"status-counts\"><tr><th>status</th><th>count</th><th></th></tr>\n";
  int64_t most = 1;
  for (const auto& [status, count] : by_status) most = std::max(most, count);
  for (const auto& [status, count] : by_status) {
    html += "<tr><td>" + Escape(status) + "</td><td class=\"n\">" + std::to_string(count) +
            "</td><td><span class=\"bar\" style=\"width:" + std::to_string(200 * count / most) + "px;" +
            (status == "ok" ? "background:#17803d" : "") + "\"></span></td></tr>\n";
  }
  html += "</table>\n";

  html += "<h2>Tokens and cost</h2>\n";
  if (h.exchanges.empty()) {
    html += "<p>No LLM exchanges in this run.</p>\n";
  } else {
    std::map<std::string, LlmTotals> by_model;
    for (const LlmExchange& x : h.exchanges) {
      std::string model = x.response.ok() && !x.response->model.empty() ? x.response->model : x.request.model;
      by_model[model.empty() ? "(default)" : model] += LlmTotals::Of(x);
    }
    html += "<table id=\"llm-totals\"><tr><th>model</th><th>requests</th><th>failed</th><th>tokens in</th>"
            "<th>tokens out</th><th>cost</th></tr>\n";
    for (const auto& [model, t] : by_model) {
      html += "<tr><td>" + Escape(model) + "</td><td class=\"n\">" + std::to_string(t.requests) +
              "</td><td class=\"n\">" + std::to_string(t.failures) + "</td><td class=\"n\">" +
              std::to_string(t.input_tokens) + "</td><td class=\"n\">" + std::to_string(t.output_tokens) +
              "</td><td class=\"n\">$" + Format("%.4f", t.cost_usd) + "</td></tr>\n";
    }
    html += "<tr><th>total</th><td class=\"n\">" + std::to_string(h.exchanges.size()) + "</td><td></td><td class=\"n\">" +
            std::to_string(input) + "</td><td class=\"n\">" + std::to_string(output) + "</td><td class=\"n\">$" +
            Format("%.4f", cost) + "</td></tr>\n</table>\n";
  }
  html += "<script>" + std::string(kScript) + "</script>\n</body>\n</html>\n";
  return html;
}

namespace {

void Indent(const boost::json::value& v, int depth, std::string* out) {
  const std::string pad(static_cast<size_t>(2 * (depth + 1)), ' ');
  const std::string close(static_cast<size_t>(2 * depth), ' ');
  if (v.is_object() && !v.as_object().empty()) {
    *out += "{\n";
    bool first = true;
    for (const auto& [key, item] : v.as_object()) {
      *out += (first ? "" : ",\n") + pad + boost::json::serialize(boost::json::value(key)) + ": ";
      Indent(item, depth + 1, out);
      first = false;
    }
    *out += "\n" + close + "}";
    return;
  }
  if (v.is_array() && !v.as_array().empty()) {
    const boost::json::array& a = v.as_array();
    bool flat = a.size() <= 8 && std::all_of(a.begin(), a.end(), [](const boost::json::value& x) {
                  return !x.is_object() && !x.is_array();
                });
    if (flat) {
      *out += boost::json::serialize(v);
      return;
    }
    *out += "[\n";
    for (size_t i = 0; i < a.size(); ++i) {
      *out += (i ? ",\n" : "") + pad;
      Indent(a[i], depth + 1, out);
    }
    *out += "\n" + close + "]";
    return;
  }
  *out += boost::json::serialize(v);
}

}  // namespace

std::string IndentJson(std::string_view json) {
  boost::system::error_code ec;
  boost::json::value root = boost::json::parse(json, ec);
  if (ec) return std::string(json);
  std::string out;
  Indent(root, 0, &out);
  return out;
}

}  // namespace ksearch
