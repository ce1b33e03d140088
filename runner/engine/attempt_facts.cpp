#include "engine/attempt_facts.h"

#include <algorithm>
#include <fstream>

namespace pto {

std::string attempt_log(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return "";
  in.seekg(0, std::ios::end);
  const std::streamoff size = in.tellg();
  const std::streamoff from = std::max<std::streamoff>(0, size - (1 << 20));
  in.seekg(from);
  std::string text(static_cast<std::size_t>(size - from), '\0');
  in.read(text.data(), static_cast<std::streamsize>(text.size()));
  if (auto at = text.rfind("\npto-runner: attempt "); at != std::string::npos) text.erase(0, at + 1);
  return text;
}

std::vector<int> attempt_cards(const StepRecord& sr) {
  std::vector<int> all = sr.cards;
  for (int c : sr.leased)
    if (!std::count(all.begin(), all.end(), c)) all.push_back(c);
  std::sort(all.begin(), all.end());
  return all;
}

}  // namespace pto
