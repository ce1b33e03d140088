#include "importer/model_folding.h"

#include <algorithm>
#include <cctype>
#include <map>
#include <regex>
#include <sstream>

namespace pto::imported {

// Steps running one script command on several examples become a model.
std::vector<Model> fold_models(Job& job, std::set<std::string>& used_model_ids, const std::string& display, Diagnostics& notes) {
  static const std::regex script_re(R"(^([\s\S]*?)python (\S+)/([A-Za-z0-9_.-]+)\.py((?: \S+)*)$)");
  std::map<std::pair<std::string, std::string>, std::vector<Step*>> groups;  // (prefix, dir) -> steps
  for (auto& s : job.steps) {
    std::smatch m;
    if (s.devices > 0 && std::regex_match(s.run, m, script_re)) groups[{m[1].str(), m[2].str()}].push_back(&s);
  }
  // Only steps that differ in nothing but their example and arguments fold (their env, if: and time bound
  // go on the one `models:` step).
  for (auto it = groups.begin(); it != groups.end();) {
    const Step& a = *it->second.front();
    bool same = std::all_of(it->second.begin(), it->second.end(), [&](const Step* b) {
      return b->env == a.env && b->if_expr == a.if_expr && b->timeout == a.timeout && !b->continue_on_error && b->id.empty();
    });
    it = same ? std::next(it) : groups.erase(it);
  }
  std::vector<Model> models;
  for (auto& [key, steps] : groups) {
    if (steps.size() < 2) continue;
    // The arguments every example shares stay in the command; the rest are each example's args.
    std::vector<std::vector<std::string>> args;
    for (Step* s : steps) {
      std::smatch m;
      std::regex_match(s->run, m, script_re);
      s->example = m[3].str();
      std::istringstream in(m[4].str());
      std::vector<std::string> words;
      for (std::string w; in >> w;) words.push_back(w);
      args.push_back(words);
    }
    std::size_t common = args[0].size();
    for (const auto& a : args) {
      std::size_t k = 0;
      while (k < common && k < a.size() && a[k] == args[0][k]) ++k;
      common = k;
    }
    Model model;
    model.dir = key.second;
    std::string shared;
    for (std::size_t k = 0; k < common; ++k) shared += " " + args[0][k];
    model.command = key.first + "python {dir}/{example}.py" + shared + " {args}";
    for (std::size_t i = 0; i < steps.size(); ++i) {
      std::string a;
      for (std::size_t k = common; k < args[i].size(); ++k) a += (a.empty() ? "" : " ") + args[i][k];
      steps[i]->args = a;
    }
    // "Run pypto-lib Qwen3-14B decode_fwd example": the word before the example names the model.
    std::string name = steps[0]->name;
    std::size_t at = name.find(steps[0]->example);
    std::string head = at == std::string::npos ? "" : trim(name.substr(0, at));
    model.display = head.empty() ? key.second.substr(key.second.rfind('/') + 1) : head.substr(head.rfind(' ') + 1);
    model.id.clear();
    for (char c : model.display) model.id += c == '_' || c == ' ' ? '-' : static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    while (used_model_ids.count(model.id)) model.id += "-" + job.id;
    used_model_ids.insert(model.id);
    for (Step* s : steps) s->model = model.id;
    // A copy-pasted step (same example, same arguments) is the same work: one example, the copy reported.
    for (Step* s : steps) {
      const Step* twin = nullptr;
      for (const Step* e : model.examples) twin = e->example == s->example && e->args == s->args ? e : twin;
      if (!twin) model.examples.push_back(s);
      else if ((s->repeat = true))
        notes.warning(display, s->loc.line, s->loc.col, "not-imported",
                                "job '" + job.id + "': step '" + s->name + "' repeats line " + std::to_string(twin->loc.line) +
                                    " (same example, same arguments): imported once");
    }
    models.push_back(model);
  }
  return models;
}

}  // namespace pto::imported
