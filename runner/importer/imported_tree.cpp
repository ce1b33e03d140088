#include "importer/imported_tree.h"

#include <cctype>

namespace pto::imported {

std::string trim(std::string s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.pop_back();
  std::size_t b = s.find_first_not_of(" \t\n");
  return b == std::string::npos ? "" : s.substr(b);
}

}  // namespace pto::imported
