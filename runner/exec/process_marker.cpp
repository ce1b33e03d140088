#include "exec/process_marker.h"

#include <charconv>
#include <vector>

namespace pto {

namespace {

std::vector<std::string_view> split(std::string_view s) {
  std::vector<std::string_view> parts;
  for (std::size_t b = 0;;) {
    std::size_t e = s.find('/', b);
    parts.push_back(s.substr(b, e == std::string_view::npos ? std::string_view::npos : e - b));
    if (e == std::string_view::npos) return parts;
    b = e + 1;
  }
}

template <typename T>
bool number(std::string_view s, T& out) {
  if (s.empty() || s.size() > 9) return false;
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), out);
  return ec == std::errc() && end == s.data() + s.size();
}

}  // namespace

ProcessMarker ProcessMarker::for_step(std::string run, std::size_t job, std::size_t step, int attempt) {
  ProcessMarker m;
  m.kind = Kind::Step;
  m.run = std::move(run);
  m.job = job;
  m.step = step;
  m.attempt = attempt;
  return m;
}

ProcessMarker ProcessMarker::for_health_check(std::string run, int card, int check) {
  ProcessMarker m;
  m.kind = Kind::HealthCheck;
  m.run = std::move(run);
  m.card = card;
  m.check = check;
  return m;
}

ProcessMarker ProcessMarker::for_lease(std::string run, std::string lease_id) {
  ProcessMarker m;
  m.kind = Kind::Lease;
  m.run = std::move(run);
  m.lease = std::move(lease_id);
  return m;
}

std::string ProcessMarker::text() const {
  switch (kind) {
    case Kind::Step:
      return run + "/" + std::to_string(job) + "/" + std::to_string(step) + "/" + std::to_string(attempt);
    case Kind::HealthCheck:
      return run + "/health/" + std::to_string(card) + "/" + std::to_string(check);
    case Kind::Lease:
      return (run.empty() ? std::string() : run + "/") + "lease/" + lease;
  }
  return "";
}

std::optional<ProcessMarker> ProcessMarker::parse(std::string_view text) {
  auto p = split(text);
  ProcessMarker m;
  if (p.size() == 2 && p[0] == "lease" && !p[1].empty()) return for_lease("", std::string(p[1]));
  if (p.size() == 3 && p[1] == "lease" && !p[0].empty() && !p[2].empty()) return for_lease(std::string(p[0]), std::string(p[2]));
  if (p.size() == 4 && p[1] == "health" && !p[0].empty() && number(p[2], m.card) && number(p[3], m.check))
    return for_health_check(std::string(p[0]), m.card, m.check);
  if (p.size() == 4 && !p[0].empty() && number(p[1], m.job) && number(p[2], m.step) && number(p[3], m.attempt))
    return for_step(std::string(p[0]), m.job, m.step, m.attempt);
  return std::nullopt;
}

}  // namespace pto
