// "key=value" lists (see key_values.h).
#include "pipeline/plan/key_values.h"

#include <sstream>

#include "tensor/error.h"

namespace brigade::pipeline {

std::vector<std::pair<std::string, double>> parse_key_values(const std::string& text, const std::string& what,
                                                             const std::string& keys) {
  std::vector<std::pair<std::string, double>> out;
  std::stringstream in(text);
  std::string item;
  while (std::getline(in, item, ',')) {
    if (item.empty()) continue;
    const auto eq = item.find('=');
    BRIGADE_CHECK_VALUE(eq != std::string::npos, what, ": '", item, "' is not key=value (keys: ", keys, ")");
    const std::string key = item.substr(0, eq), value = item.substr(eq + 1);
    size_t used = 0;
    double number = 0.0;
    try {
      number = std::stod(value, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    BRIGADE_CHECK_VALUE(used == value.size() && used > 0, what, ": '", value, "' in '", item,
                        "' is not a number");
    out.emplace_back(key, number);
  }
  return out;
}

}  // namespace brigade::pipeline
