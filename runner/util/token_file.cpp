#include "util/token_file.h"

#include <sys/stat.h>

#include <cctype>
#include <cstdio>

#include "util/regular_file.h"

namespace pto {

std::string read_token_file(const std::string& path, std::string& error) {
  std::string text;
  if (!read_regular_file(path, 4096, text, error)) {
    error = "token file: " + error;
    return "";
  }
  std::string t = text.substr(0, text.find('\n'));
  auto space = [](char c) { return std::isspace(static_cast<unsigned char>(c)) != 0; };
  while (!t.empty() && space(t.back())) t.pop_back();
  std::size_t b = 0;
  while (b < t.size() && space(t[b])) ++b;
  t.erase(0, b);
  if (t.empty()) {
    error = "token file " + path + " is empty";
    return "";
  }
  if (t.size() < kMinTokenLength) {
    error = "token file " + path + " holds fewer than " + std::to_string(kMinTokenLength) + " characters";
    return "";
  }
  return t;
}

std::string read_private_token_file(const std::string& path, std::string& error) {
  std::string token = read_token_file(path, error);
  if (token.empty()) return "";
  struct stat st {};
  if (::stat(path.c_str(), &st) == 0 && (st.st_mode & (S_IRWXG | S_IRWXO))) {
    char mode[8];
    std::snprintf(mode, sizeof mode, "%04o", static_cast<unsigned>(st.st_mode & 07777));
    error = "token file " + path + " can be read by other users (mode " + mode + "): chmod 0600 it, and rotate the token";
    return "";
  }
  return token;
}

}  // namespace pto
