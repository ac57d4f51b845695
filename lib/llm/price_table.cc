#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>

#include <simdjson.h>

#include "ksearch/price_table.h"

namespace ksearch {

StatusOr<PriceTable> PriceTable::Load(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    std::string message = "price table \"" + path + "\": " + std::strerror(errno);
    return errno == ENOENT ? NotFoundError(message) : PermissionDeniedError(message);
  }
  std::stringstream contents;
  contents << in.rdbuf();
  return Parse(contents.str(), path);
}

StatusOr<PriceTable> PriceTable::Parse(std::string_view json, std::string_view source_name) {
  namespace dom = simdjson::dom;
  const std::string source(source_name);
  dom::parser parser;
  dom::element root;
  simdjson::error_code error = parser.parse(json.data(), json.size()).get(root);
  if (error != simdjson::SUCCESS) {
    return DataLossError(source + ": not JSON: " + simdjson::error_message(error));
  }
  dom::object models;
  if (root["models"].get_object().get(models) != simdjson::SUCCESS) {
    return InvalidArgumentError(source + ": expected {\"models\": {NAME: PRICE, …}}");
  }
  PriceTable table;
  for (dom::key_value_pair entry : models) {
    const std::string where = source + ": models." + std::string(entry.key);
    if (!entry.value.is_object()) return InvalidArgumentError(where + ": expected an object");
    ModelPrice price;
    bool has_input = false;
    bool has_output = false;
    for (dom::key_value_pair field : dom::object(entry.value)) {
      double value = 0;
      if (field.value.get_double().get(value) != simdjson::SUCCESS || value < 0) {
        return InvalidArgumentError(where + "." + std::string(field.key) +
                                    ": expected a number >= 0");
      }
      if (field.key == "input_usd_per_million_tokens") {
        price.input_usd_per_million_tokens = value;
        has_input = true;
      } else if (field.key == "output_usd_per_million_tokens") {
        price.output_usd_per_million_tokens = value;
        has_output = true;
      } else {
        // A misspelt field would silently price a model at zero.
        return InvalidArgumentError(where + ": unknown field \"" + std::string(field.key) +
                                    "\" (expected input_usd_per_million_tokens and "
                                    "output_usd_per_million_tokens)");
      }
    }
    if (!has_input || !has_output) {
      return InvalidArgumentError(where + ": needs input_usd_per_million_tokens and "
                                          "output_usd_per_million_tokens");
    }
    table.Set(std::string(entry.key), price);
  }
  return table;
}

void PriceTable::Set(std::string model_or_pattern, ModelPrice price) {
  prices_[std::move(model_or_pattern)] = price;
}

const ModelPrice* PriceTable::Find(std::string_view model) const {
  auto exact = prices_.find(model);
  if (exact != prices_.end()) return &exact->second;
  const ModelPrice* best = nullptr;
  size_t best_length = 0;
  for (const auto& [pattern, price] : prices_) {
    if (pattern.empty() || pattern.back() != '*') continue;
    std::string_view prefix(pattern.data(), pattern.size() - 1);
    if (model.substr(0, prefix.size()) == prefix && (best == nullptr || prefix.size() > best_length)) {
      best = &price;
      best_length = prefix.size();
    }
  }
  return best;
}

double PriceTable::CostUsd(std::string_view model, int64_t input_tokens,
                           int64_t output_tokens) const {
  const ModelPrice* price = Find(model);
  if (price == nullptr) return 0.0;
  return (static_cast<double>(input_tokens) * price->input_usd_per_million_tokens +
          static_cast<double>(output_tokens) * price->output_usd_per_million_tokens) /
         1e6;
}

}  // namespace ksearch
