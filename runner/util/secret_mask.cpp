#include "util/secret_mask.h"

#include <algorithm>
#include <cctype>

namespace pto {

std::string base64_encode(std::string_view in) {
  static const char* t = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string out;
  std::size_t i = 0;
  for (; i + 2 < in.size(); i += 3) {
    unsigned v = static_cast<unsigned char>(in[i]) << 16 | static_cast<unsigned char>(in[i + 1]) << 8 | static_cast<unsigned char>(in[i + 2]);
    out += t[v >> 18 & 63];
    out += t[v >> 12 & 63];
    out += t[v >> 6 & 63];
    out += t[v & 63];
  }
  if (i < in.size()) {
    unsigned v = static_cast<unsigned char>(in[i]) << 16 | (i + 1 < in.size() ? static_cast<unsigned char>(in[i + 1]) << 8 : 0);
    out += t[v >> 18 & 63];
    out += t[v >> 12 & 63];
    out += i + 1 < in.size() ? t[v >> 6 & 63] : '=';
    out += '=';
  }
  return out;
}

std::string url_encode(std::string_view in) {
  static const char* hex = "0123456789ABCDEF";
  std::string out;
  for (unsigned char c : in) {
    if (std::isalnum(c) || c == '-' || c == '_' || c == '.' || c == '~') {
      out += static_cast<char>(c);
    } else {
      out += '%';
      out += hex[c >> 4];
      out += hex[c & 15];
    }
  }
  return out;
}

void SecretMask::add_one(std::string v) {
  while (!v.empty() && (v.back() == '\r' || v.back() == '\n')) v.pop_back();
  if (v.size() < kMinLength || std::find(values_.begin(), values_.end(), v) != values_.end()) return;
  values_.push_back(std::move(v));
}

void SecretMask::add(const std::string& value) {
  add_one(value);
  // Its encodings as a step might print them (a token in an Authorization header, in a URL).
  std::string b64 = base64_encode(value);
  add_one(b64);
  while (!b64.empty() && b64.back() == '=') b64.pop_back();
  add_one(b64);
  add_one(url_encode(value));
  // And each line of a multi-line value (a key file), as a log shows it line by line.
  for (std::size_t b = 0; b < value.size();) {
    std::size_t e = value.find('\n', b);
    add_one(value.substr(b, e == std::string::npos ? std::string::npos : e - b));
    if (e == std::string::npos) break;
    b = e + 1;
  }
  std::sort(values_.begin(), values_.end(), [](const std::string& a, const std::string& b) { return a.size() > b.size(); });
}

void SecretMask::add_values(const std::vector<std::string>& values) {
  for (const std::string& v : values) add_one(v);
  std::sort(values_.begin(), values_.end(), [](const std::string& a, const std::string& b) { return a.size() > b.size(); });
}

std::string SecretMask::apply(std::string_view text) const {
  std::string out(text);
  for (const auto& v : values_)
    for (std::size_t p = 0; (p = out.find(v, p)) != std::string::npos;) {
      out.replace(p, v.size(), "***");
      p += 3;
    }
  return out;
}

std::string SecretMask::line(std::string_view text) {
  std::size_t b = text.find_first_not_of(" \t");
  constexpr std::string_view kCommand = "::add-mask::";
  if (b != std::string_view::npos && text.substr(b, kCommand.size()) == kCommand) {
    add(std::string(text.substr(b + kCommand.size())));
    return std::string(text.substr(0, b + kCommand.size())) + "***";
  }
  return apply(text);
}

}  // namespace pto
