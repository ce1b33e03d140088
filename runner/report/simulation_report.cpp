#include "report/simulation_report.h"

#include <algorithm>
#include <cstdio>
#include <map>
#include <sstream>

#include "report/plan_view.h"

namespace pto {

SimulationSummary summarize_simulation(const RunRecord& r, const Plan& p, int cards, double time_scale) {
  SimulationSummary s;
  s.cards = cards;
  double first = -1, last = 0;
  for (std::size_t j = 0; j < p.jobs.size(); ++j)
    for (std::size_t k = 0; k < p.jobs[j].steps.size(); ++k) {
      const StepRecord& sr = r.jobs[j].steps[k];
      if (sr.state == StepState::Deduplicated) ++s.deduplicated;
      for (const auto& iv : sr.intervals) {
        if (first < 0 || iv.start < first) first = iv.start;
        last = std::max(last, iv.end);
        s.serial += iv.end - iv.start;
        s.card_busy += (iv.end - iv.start) * static_cast<double>(iv.cards.size());
        ++s.steps_run;
      }
    }
  s.makespan = first < 0 ? 0 : last - first;
  double scale = time_scale > 0 ? time_scale : 1;
  s.makespan /= scale;
  s.serial /= scale;
  s.card_busy /= scale;
  s.utilisation = s.makespan > 0 && cards > 0 ? s.card_busy / (cards * s.makespan) : 0;
  return s;
}

std::string simulation_report(const RunRecord& r, const Plan& p, const std::vector<int>& card_ids, double time_scale) {
  SimulationSummary s = summarize_simulation(r, p, static_cast<int>(card_ids.size()), time_scale);
  const int width = 64;
  double scale = time_scale > 0 ? time_scale : 1;
  double first = -1;
  for (const auto& jr : r.jobs)
    for (const auto& sr : jr.steps)
      for (const auto& iv : sr.intervals)
        if (first < 0 || iv.start < first) first = iv.start;
  // One letter per step that held cards; the legend maps letters to steps.
  std::map<int, std::string> lane;
  for (int id : card_ids) lane[id] = std::string(width, '.');
  std::vector<std::string> legend;
  int letter = 0;
  for (std::size_t j = 0; j < p.jobs.size(); ++j)
    for (std::size_t k = 0; k < p.jobs[j].steps.size(); ++k) {
      const StepRecord& sr = r.jobs[j].steps[k];
      bool on_cards = false;
      for (const auto& iv : sr.intervals) on_cards |= !iv.cards.empty();
      if (!on_cards) continue;
      char c = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"[letter % 62];
      ++letter;
      char line[512];
      for (const auto& iv : sr.intervals) {
        double a = (iv.start - first) / scale, b = (iv.end - first) / scale;
        int from = s.makespan > 0 ? static_cast<int>(a / s.makespan * width) : 0;
        int to = s.makespan > 0 ? static_cast<int>(b / s.makespan * width + 0.999) : 0;
        for (int id : iv.cards)
          for (int x = std::max(0, from); x < std::min(width, std::max(to, from + 1)); ++x) lane[id][x] = c;
        std::snprintf(line, sizeof(line), "  %c  %7.1f-%7.1f min  cards %-8s %s / %s  [%s]", c, a / 60, b / 60,
                      [&] {
                        std::string ids;
                        for (int id : iv.cards) ids += (ids.empty() ? "" : ",") + std::to_string(id);
                        return ids;
                      }().c_str(),
                      p.jobs[j].id.c_str(), p.jobs[j].steps[k].name.c_str(), estimate_text(p.jobs[j].steps[k]).c_str());
        legend.push_back(line);
      }
    }
  std::ostringstream os;
  char colbuf[96];
  std::snprintf(colbuf, sizeof(colbuf), "\nSimulated timeline (each column is %.2f min):\n", s.makespan / width / 60);
  os << colbuf;
  for (const auto& [id, l] : lane) {
    char head[16];
    std::snprintf(head, sizeof(head), "  card %-3d |", id);
    os << head << l << "|\n";
  }
  for (const auto& l : legend) os << l << "\n";
  char buf[512];
  std::snprintf(buf, sizeof(buf),
                "\nSimulation summary\n"
                "  makespan:              %.1f min\n"
                "  step after step:       %.1f min (the same work run one step at a time)\n"
                "  speed-up:              %.2fx\n"
                "  card utilisation:      %.0f%% of %d cards\n"
                "  steps run:             %d\n"
                "  deduplicated steps:    %d (not run)\n",
                s.makespan / 60, s.serial / 60, s.makespan > 0 ? s.serial / s.makespan : 0, s.utilisation * 100,
                s.cards, s.steps_run, s.deduplicated);
  os << buf;
  int written = 0, learned = 0, none = 0;
  for (const auto& job : p.jobs)
    for (const auto& st : job.steps) {
      if (st.kind != StepKind::Command || st.deduplicated_from) continue;
      (st.expected_source == "history" ? learned : st.expected_source.empty() ? none : written)++;
    }
  os << "  estimates:             " << written << " from expected-minutes, " << learned << " learned from history, " << none
     << " none (simulated as 1 min)\n";
  return os.str();
}

}  // namespace pto
