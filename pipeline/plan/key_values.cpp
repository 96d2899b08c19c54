// "key=value" lists (see key_values.h).
#include "pipeline/plan/key_values.h"

#include <sstream>

#include "tensor/error.h"

namespace brigade::pipeline {

double parse_number(const std::string& text, const std::string& what, const std::string& context) {
  size_t used = 0;
  double number = 0.0;
  try {
    number = std::stod(text, &used);
  } catch (const std::exception&) {
    used = 0;  // std::invalid_argument or std::out_of_range: reported below as not a number
  }
  BRIGADE_CHECK_VALUE(used > 0 && used == text.size(), what, ": '", text, "' in '", context,
                      "' is not a number");
  return number;
}

std::vector<std::pair<std::string, double>> parse_key_values(const std::string& text, const std::string& what,
                                                             const std::string& keys) {
  std::vector<std::pair<std::string, double>> out;
  std::stringstream in(text);
  std::string item;
  while (std::getline(in, item, ',')) {
    if (item.empty()) continue;
    const auto eq = item.find('=');
    BRIGADE_CHECK_VALUE(eq != std::string::npos, what, ": '", item, "' is not key=value (keys: ", keys, ")");
    out.emplace_back(item.substr(0, eq), parse_number(item.substr(eq + 1), what, item));
  }
  return out;
}

}  // namespace brigade::pipeline
