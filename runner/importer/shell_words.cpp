#include "importer/shell_words.h"

namespace pto {

std::vector<ShellWord> shell_words(const std::string& s) {
  std::vector<ShellWord> out;
  std::string cur;
  bool have = false;
  auto flush = [&] {
    if (have) out.push_back({cur, false});
    cur.clear();
    have = false;
  };
  for (std::size_t i = 0; i < s.size(); ++i) {
    char c = s[i];
    if (c == '\\' && i + 1 < s.size()) {
      if (s[i + 1] != '\n') cur += s[i + 1], have = true;
      ++i;
    } else if (c == '\'') {
      std::size_t end = s.find('\'', i + 1);
      cur += s.substr(i + 1, end == std::string::npos ? std::string::npos : end - i - 1);
      have = true;
      i = end == std::string::npos ? s.size() : end;
    } else if (c == '"') {
      have = true;
      for (++i; i < s.size() && s[i] != '"'; ++i) {
        if (s[i] == '\\' && i + 1 < s.size() && std::string("$`\"\\\n").find(s[i + 1]) != std::string::npos) {
          if (s[i + 1] != '\n') cur += s[i + 1];
          ++i;
        } else {
          cur += s[i];
        }
      }
    } else if (c == ' ' || c == '\t') {
      flush();
    } else if (c == '\n' || c == ';' || c == '|' || c == '&') {
      flush();
      std::string op(1, c);
      if ((c == '&' || c == '|') && i + 1 < s.size() && s[i + 1] == c) op += s[++i];
      out.push_back({op, true});
    } else if (c == '#' && !have) {
      while (i < s.size() && s[i] != '\n') ++i;
      --i;
    } else {
      cur += c;
      have = true;
    }
  }
  flush();
  return out;
}

}  // namespace pto
