#include "docs/figures/source_constants.h"

#include <fstream>
#include <regex>
#include <sstream>

#include "tensor/error.h"

namespace brigade::figures {
namespace {

std::string& root() {
  static std::string path = BRIGADE_SOURCE_DIR;
  return path;
}

std::string read_source(const std::string& file) {
  std::ifstream in(root() + "/" + file);
  BRIGADE_CHECK_VALUE(in.good(), "doc figures: cannot read ", root(), "/", file);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

}  // namespace

void set_source_root(const std::string& path) {
  root() = path;
}

int source_constant(const std::string& file, const std::string& name) {
  const std::string text = read_source(file);
  const std::regex assignment("\\b" + name + "\\s*=\\s*(\\d+)\\s*[,;]");
  std::vector<int> values;
  for (auto it = std::sregex_iterator(text.begin(), text.end(), assignment); it != std::sregex_iterator();
       ++it) {
    values.push_back(std::stoi((*it)[1].str()));
  }
  BRIGADE_CHECK_VALUE(values.size() == 1, "doc figures: expected one `", name, " = <integer>` in ", file,
                      ", found ", values.size(), " (was the constant renamed? update docs/figures)");
  return values[0];
}

std::vector<int> source_template_arguments(const std::string& file, const std::string& prefix,
                                           int occurrence) {
  const std::string text = read_source(file);
  const std::regex call("\\b" + prefix + "<\\s*\\w+\\s*,([\\d\\s,]+)>\\s*\\(");
  int seen = 0;
  for (auto it = std::sregex_iterator(text.begin(), text.end(), call); it != std::sregex_iterator(); ++it) {
    if (seen++ != occurrence) continue;
    std::vector<int> values;
    std::istringstream list((*it)[1].str());
    for (std::string item; std::getline(list, item, ',');) values.push_back(std::stoi(item));
    return values;
  }
  BRIGADE_CHECK_VALUE(false, "doc figures: expected at least ", occurrence + 1, " calls `", prefix,
                      "<T, integers...>(` in ", file, ", found ", seen);
  return {};
}

}  // namespace brigade::figures
