// PriceTable: what models cost, for the money budget and the summary's cost
// (HttpLlmClient::Options::prices).
#ifndef KSEARCH_PRICE_TABLE_H_
#define KSEARCH_PRICE_TABLE_H_

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <string_view>

#include "ksearch/status.h"

namespace ksearch {

// What a model costs, in US dollars per million tokens.
struct ModelPrice {
  double input_usd_per_million_tokens = 0.0;   // prompt tokens
  double output_usd_per_million_tokens = 0.0;  // completion tokens
};

// Prices per model, usually loaded from a JSON file:
//
//   {"models": {
//      "gpt-4o":   {"input_usd_per_million_tokens": 2.5, "output_usd_per_million_tokens": 10},
//      "claude-*": {"input_usd_per_million_tokens": 3,   "output_usd_per_million_tokens": 15}}}
//
// A name ending in '*' matches every model that starts with what precedes it;
// an exact name wins over a pattern, a longer pattern over a shorter one.
// Thread safety: a const PriceTable may be read from many threads.
class PriceTable {
 public:
  // Errors: kNotFound (no such file), kInvalidArgument (not the format above:
  // the message names the file and the field), kDataLoss (not JSON).
  [[nodiscard]] static StatusOr<PriceTable> Load(const std::string& path);
  // Same, from text; `source_name` prefixes error messages.
  [[nodiscard]] static StatusOr<PriceTable> Parse(std::string_view json,
                                                  std::string_view source_name = "price table");

  // Adds or replaces the price of a model name or pattern.
  void Set(std::string model_or_pattern, ModelPrice price);
  // The price that applies to `model`, or nullptr.
  const ModelPrice* Find(std::string_view model) const;
  // Dollars for the given usage; 0 when the model has no price.
  double CostUsd(std::string_view model, int64_t input_tokens, int64_t output_tokens) const;
  bool empty() const { return prices_.empty(); }

 private:
  std::map<std::string, ModelPrice, std::less<>> prices_;
};

}  // namespace ksearch

#endif  // KSEARCH_PRICE_TABLE_H_
