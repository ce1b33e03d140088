#include "commands/run_mirror.h"

#include "util/ids.h"

namespace pto {

namespace {

/// A job's `steps`, or an empty array (never a copy: a run's steps are thousands).
const nlohmann::json& steps_of(const nlohmann::json& job) {
  static const nlohmann::json none = nlohmann::json::array();
  auto it = job.find("steps");
  return it != job.end() && it->is_array() ? *it : none;
}

}  // namespace

std::string RunMirror::query() const { return revision_.empty() ? "" : "?since=" + revision_; }

bool RunMirror::take(nlohmann::json answer) {
  if (!answer.is_object() || !answer.contains("jobs") || !answer["jobs"].is_array()) return false;
  std::string revision = answer.contains("revision") && answer["revision"].is_string() ? answer["revision"].get<std::string>() : "";
  if (answer.value("delta", false)) {
    if (!merge(answer)) {
      revision_.clear();  // the next answer is whole
      return false;
    }
    merged_ = true;
  } else {
    run_ = std::move(answer);  // whole: hundreds of kilobytes for a run of 1,000 steps, moved not copied
    merged_ = false;
    with_queue_.clear();
    for (std::size_t k = 0; k < run_["jobs"].size(); ++k) {
      const nlohmann::json& steps = steps_of(run_["jobs"][k]);
      for (std::size_t s = 0; s < steps.size(); ++s)
        if (steps[s].is_object() && steps[s].contains("queue")) with_queue_.insert({k, s});
    }
  }
  revision_ = std::move(revision);
  return true;
}

bool RunMirror::merge(nlohmann::json& delta) {
  nlohmann::json& jobs = run_["jobs"];
  if (!jobs.is_array() || jobs.size() != delta["jobs"].size()) return false;
  for (const auto& j : delta["jobs"]) {  // fits only if each step it carries is one the mirror has
    if (!j.is_object()) return false;
    for (const auto& s : steps_of(j)) {
      auto id = s.is_object() && s.contains("id") && s["id"].is_string() ? StepId::parse(s["id"].get<std::string>()) : std::nullopt;
      if (!id || id->job >= jobs.size() || !jobs[id->job].contains("steps") || id->step >= jobs[id->job]["steps"].size()) return false;
    }
  }
  // A place in the queue is only as good as its answer: the ones not carried again are dropped.
  for (const auto& [k, s] : with_queue_) jobs[k]["steps"][s].erase("queue");
  with_queue_.clear();
  changed_.clear();
  for (auto it = delta.begin(); it != delta.end(); ++it)
    if (it.key() != "jobs" && it.key() != "delta") run_[it.key()] = std::move(it.value());
  for (std::size_t k = 0; k < jobs.size(); ++k) {
    nlohmann::json& j = delta["jobs"][k];
    for (auto it = j.begin(); it != j.end(); ++it)
      if (it.key() != "steps") jobs[k][it.key()] = std::move(it.value());
    if (!j.contains("steps") || !j["steps"].is_array()) continue;
    for (auto& s : j["steps"]) {
      const StepId id = *StepId::parse(s["id"].get<std::string>());
      if (s.contains("queue")) with_queue_.insert({id.job, id.step});
      changed_.insert({id.job, id.step});
      jobs[id.job]["steps"][id.step] = std::move(s);
    }
  }
  return true;
}

}  // namespace pto
