// SpendingGate: admission of model requests under a run's token and money
// budgets (see ksearch/generator.h for the contract).
#include <algorithm>
#include <cstdio>

#include "ksearch/generator.h"

namespace ksearch {
namespace {

GeneratorUsage Max(const GeneratorUsage& a, const GeneratorUsage& b) {
  return {std::max(a.input_tokens, b.input_tokens), std::max(a.output_tokens, b.output_tokens),
          std::max(a.cost_usd, b.cost_usd)};
}

void Add(GeneratorUsage* to, const GeneratorUsage& u, int sign) {
  to->input_tokens += sign * u.input_tokens;
  to->output_tokens += sign * u.output_tokens;
  to->cost_usd += sign * u.cost_usd;
}

int64_t Tokens(const GeneratorUsage& u) { return u.input_tokens + u.output_tokens; }

}  // namespace

SpendingGate::SpendingGate(int64_t max_tokens, double max_cost_usd)
    : max_tokens_(max_tokens), max_cost_usd_(max_cost_usd) {}

GeneratorUsage SpendingGate::SpentLocked() const { return Max(settled_, reported_); }

Status SpendingGate::Admit(const GeneratorUsage& worst_case) {
  std::lock_guard<std::mutex> lock(mutex_);
  const GeneratorUsage spent = SpentLocked();
  char text[320];
  if (refused_ == Limit::kNone && max_tokens_ > 0 &&
      Tokens(spent) + Tokens(reserved_) + Tokens(worst_case) > max_tokens_) {
    refused_ = Limit::kTokens;
    std::snprintf(text, sizeof text,
                  "not sent: it could use %lld tokens (prompt about %lld, output at most %lld) "
                  "and the token budget of %lld has %lld left (%lld billed, %lld held for "
                  "requests in flight)",
                  static_cast<long long>(Tokens(worst_case)),
                  static_cast<long long>(worst_case.input_tokens),
                  static_cast<long long>(worst_case.output_tokens),
                  static_cast<long long>(max_tokens_),
                  static_cast<long long>(
                      std::max<int64_t>(0, max_tokens_ - Tokens(spent) - Tokens(reserved_))),
                  static_cast<long long>(Tokens(spent)), static_cast<long long>(Tokens(reserved_)));
    return ResourceExhaustedError(text);
  }
  if (refused_ == Limit::kNone && max_cost_usd_ > 0 &&
      spent.cost_usd + reserved_.cost_usd + worst_case.cost_usd > max_cost_usd_) {
    refused_ = Limit::kCost;
    std::snprintf(text, sizeof text,
                  "not sent: it could cost $%.4f and the money budget of $%.4f has $%.4f left "
                  "($%.4f billed, $%.4f held for requests in flight)",
                  worst_case.cost_usd, max_cost_usd_,
                  std::max(0.0, max_cost_usd_ - spent.cost_usd - reserved_.cost_usd),
                  spent.cost_usd, reserved_.cost_usd);
    return ResourceExhaustedError(text);
  }
  if (refused_ != Limit::kNone) {
    return ResourceExhaustedError(std::string("not sent: the ") +
                                  (refused_ == Limit::kTokens ? "token" : "money") +
                                  " budget has refused a request already, so the run is ending");
  }
  Add(&reserved_, worst_case, 1);
  return Status::Ok();
}

void SpendingGate::Settle(const GeneratorUsage& worst_case, const GeneratorUsage& billed) {
  std::lock_guard<std::mutex> lock(mutex_);
  Add(&reserved_, worst_case, -1);
  reserved_ = Max(reserved_, GeneratorUsage{});  // a Settle without its Admit
  Add(&settled_, billed, 1);
}

void SpendingGate::AtLeastSpent(const GeneratorUsage& total) {
  std::lock_guard<std::mutex> lock(mutex_);
  reported_ = Max(reported_, total);
}

SpendingGate::Limit SpendingGate::refused() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return refused_;
}

GeneratorUsage SpendingGate::spent() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return SpentLocked();
}

int64_t EstimatePromptTokens(std::string_view system,
                             const std::vector<std::string_view>& messages) {
  // Four tokens per message for the role markers, as the chat formats add.
  constexpr int64_t kPerMessage = 4;
  int64_t bytes = static_cast<int64_t>(system.size());
  for (std::string_view m : messages) bytes += static_cast<int64_t>(m.size());
  return (bytes + 2) / 3 + kPerMessage * static_cast<int64_t>(messages.size() + 1);
}

}  // namespace ksearch
