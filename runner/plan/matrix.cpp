#include "plan/matrix.h"

#include <algorithm>

namespace pto {

namespace {
const std::string* find_value(const MatrixLeg& leg, const std::string& key) {
  for (const auto& [k, v] : leg)
    if (k == key) return &v;
  return nullptr;
}
void set_value(MatrixLeg& leg, const std::string& key, const std::string& value) {
  for (auto& [k, v] : leg)
    if (k == key) {
      v = value;
      return;
    }
  leg.emplace_back(key, value);
}
}  // namespace

MatrixExpansion expand_matrix(const MatrixDef& def, std::size_t limit) {
  MatrixExpansion out;
  std::size_t product = def.axes.empty() ? 0 : 1;
  for (const auto& [key, values] : def.axes) {
    if (values.empty()) return out;
    product *= values.size();
    if (product > limit * 64) break;  // even the largest exclude list cannot bring it back under the limit
  }
  if (product > limit + def.exclude.size() * limit) {
    out.error = "matrix has " + std::to_string(product) + "+ combinations; the limit is " + std::to_string(limit);
    return out;
  }
  std::vector<MatrixLeg> legs;
  if (!def.axes.empty()) legs.push_back({});
  for (const auto& [key, values] : def.axes) {
    std::vector<MatrixLeg> next;
    for (const auto& leg : legs)
      for (const auto& v : values) {
        MatrixLeg l = leg;
        l.emplace_back(key, v);
        next.push_back(std::move(l));
      }
    legs = std::move(next);
  }
  auto matches = [](const MatrixLeg& leg, const MatrixLeg& pattern) {
    for (const auto& [k, v] : pattern) {
      const std::string* have = find_value(leg, k);
      if (!have || *have != v) return false;
    }
    return true;
  };
  legs.erase(std::remove_if(legs.begin(), legs.end(),
                            [&](const MatrixLeg& leg) {
                              return std::any_of(def.exclude.begin(), def.exclude.end(),
                                                 [&](const MatrixLeg& ex) { return matches(leg, ex); });
                            }),
             legs.end());
  const std::size_t original_count = legs.size();
  auto is_axis = [&](const std::string& k) {
    return std::any_of(def.axes.begin(), def.axes.end(), [&](const auto& a) { return a.first == k; });
  };
  for (const auto& inc : def.include) {
    bool extended = false;
    for (std::size_t i = 0; i < original_count; ++i) {
      MatrixLeg& leg = legs[i];
      bool compatible = true;
      for (const auto& [k, v] : inc)
        if (is_axis(k)) {
          const std::string* have = find_value(leg, k);
          if (!have || *have != v) compatible = false;
        }
      if (!compatible) continue;
      for (const auto& [k, v] : inc)
        if (!is_axis(k)) set_value(leg, k, v);
      extended = true;
    }
    if (!extended) legs.push_back(inc);
  }
  if (legs.size() > limit) {
    out.error = "matrix has " + std::to_string(legs.size()) + " combinations; the limit is " + std::to_string(limit);
    return out;
  }
  out.legs = std::move(legs);
  return out;
}

std::string leg_display_name(const std::string& base, const MatrixLeg& leg) {
  if (leg.empty()) return base;
  std::string out = base + " (";
  for (std::size_t i = 0; i < leg.size(); ++i) out += (i ? ", " : "") + leg[i].second;
  return out + ")";
}

std::string substitute_matrix(const std::string& text, const MatrixLeg& leg, std::string& error) {
  std::string out;
  std::size_t pos = 0;
  while (true) {
    std::size_t open = text.find("${{", pos);
    if (open == std::string::npos) {
      out += text.substr(pos);
      break;
    }
    std::size_t close = text.find("}}", open + 3);
    if (close == std::string::npos) {
      if (error.empty()) error = "'${{' without a closing '}}'";
      out += text.substr(pos);
      break;
    }
    out += text.substr(pos, open - pos);
    std::string inner = text.substr(open + 3, close - open - 3);
    auto b = inner.find_first_not_of(" \t");
    auto e = inner.find_last_not_of(" \t");
    inner = b == std::string::npos ? "" : inner.substr(b, e - b + 1);
    const std::string* value = nullptr;
    // Only a plain ${{ matrix.NAME }} is replaced here; an expression that uses it waits for run time.
    if (inner.rfind("matrix.", 0) == 0 && inner.find_first_not_of("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-", 7) == std::string::npos) {
      value = find_value(leg, inner.substr(7));
      if (!value && error.empty()) {
        std::string keys;
        for (const auto& [k, _] : leg) keys += (keys.empty() ? "" : ", ") + k;
        error = "${{ " + inner + " }}: the matrix has no key '" + inner.substr(7) + "'" +
                (keys.empty() ? " (this job has no matrix)" : " (keys: " + keys + ")");
      }
    }  // anything else is left for run time (plan/expression), checked by the plan
    out += value ? *value : text.substr(open, close + 2 - open);
    pos = close + 2;
  }
  return out;
}

}  // namespace pto
