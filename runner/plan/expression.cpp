#include "plan/expression.h"

#include "config/yaml_map.h"  // nearest_word

namespace pto {

namespace {

std::vector<std::string> split_dots(const std::string& path) {
  std::vector<std::string> out;
  std::size_t pos = 0;
  while (true) {
    std::size_t dot = path.find('.', pos);
    out.push_back(path.substr(pos, dot == std::string::npos ? std::string::npos : dot - pos));
    if (dot == std::string::npos) break;
    pos = dot + 1;
  }
  return out;
}

std::string join(const std::set<std::string>& s) {
  std::string out;
  for (const auto& x : s) out += (out.empty() ? "" : ", ") + x;
  return out;
}

/// Calls `each(inner, begin, end)` for every ${{ ... }}; returns "" or a syntax problem.
template <typename F>
std::string each_expression(const std::string& text, F&& each) {
  std::size_t pos = 0;
  while (true) {
    std::size_t open = text.find("${{", pos);
    if (open == std::string::npos) return "";
    std::size_t close = text.find("}}", open + 3);
    if (close == std::string::npos) return "'${{' without a closing '}}'";
    each(text.substr(open + 3, close - open - 3), open, close + 2);
    pos = close + 2;
  }
}

}  // namespace

bool has_expression(const std::string& text) { return text.find("${{") != std::string::npos; }

std::string check_context(const std::string& path, const ExpressionScope& scope) {
  auto parts = split_dots(path);
  const std::string& head = parts[0];
  if (head == "env") return parts.size() == 2 ? "" : "'" + path + "': env takes one name (env.NAME)";
  if (head == "matrix") {
    if (parts.size() != 2) return "'" + path + "': matrix takes one key (matrix.NAME)";
    if (!scope.has_matrix) return "'" + path + "': job '" + scope.job + "' has no matrix";
    if (!scope.matrix_keys.count(parts[1]))
      return "'" + path + "': the matrix has no key '" + parts[1] + "' (keys: " + join(scope.matrix_keys) + ")";
    return "";
  }
  if (head == "steps") {
    if (!scope.steps_unavailable.empty()) return "'" + path + "': " + scope.steps_unavailable;
    bool shape = (parts.size() == 4 && parts[2] == "outputs") ||
                 (parts.size() == 3 && (parts[2] == "outcome" || parts[2] == "conclusion"));
    if (!shape) return "'" + path + "': use steps.ID.outputs.NAME, steps.ID.outcome or steps.ID.conclusion";
    if (!scope.step_ids.count(parts[1])) {
      std::string near = nearest_word(parts[1], {scope.step_ids.begin(), scope.step_ids.end()});
      return "'" + path + "': no earlier step of job '" + scope.job + "' has id '" + parts[1] + "'" +
             (near.empty() ? "" : "; did you mean '" + near + "'?");
    }
    return "";
  }
  if (head == "needs") {
    bool shape = (parts.size() == 4 && parts[2] == "outputs") || (parts.size() == 3 && parts[2] == "result");
    if (!shape) return "'" + path + "': use needs.JOB.outputs.NAME or needs.JOB.result";
    auto it = scope.needs_outputs.find(parts[1]);
    if (it == scope.needs_outputs.end())
      return "'" + path + "': job '" + scope.job + "' does not need '" + parts[1] + "' (add it to needs:)";
    if (parts.size() == 4 && !it->second.count(parts[3]))
      return "'" + path + "': job '" + parts[1] + "' declares no output '" + parts[3] + "'" +
             (it->second.empty() ? " (it has no outputs:)" : " (outputs: " + join(it->second) + ")");
    return "";
  }
  return "'" + path + "': unknown context '" + head + "'; pto-runner understands matrix, env, steps and needs";
}

std::string check_expressions(const std::string& text, const ExpressionScope& scope) {
  std::string problem;
  std::string syntax = each_expression(text, [&](const std::string& inner, std::size_t, std::size_t) {
    if (!problem.empty()) return;
    std::string err;
    auto c = Condition::parse(inner, err);
    if (!c) {
      problem = "${{" + inner + "}}: " + err;
      return;
    }
    for (const auto& path : c->contexts())
      if (std::string e = check_context(path, scope); !e.empty()) {
        problem = "${{" + inner + "}}: " + e;
        return;
      }
  });
  return problem.empty() ? syntax : problem;
}

std::string interpolate(const std::string& text, const ConditionContext& ctx) {
  if (!has_expression(text)) return text;
  std::string out;
  std::size_t last = 0;
  each_expression(text, [&](const std::string& inner, std::size_t begin, std::size_t end) {
    out += text.substr(last, begin - last);
    std::string err;
    auto c = Condition::parse(inner, err);
    out += c ? c->value(ctx) : text.substr(begin, end - begin);  // checked at load; never unparsable here
    last = end;
  });
  return out + text.substr(last);
}

}  // namespace pto
