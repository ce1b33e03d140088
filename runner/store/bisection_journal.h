#pragma once
// Bisections kept in the journal's SQLite file (their own table and connection), so one goes on after the
// daemon restarts (SPEC "Find the commit"): each bisection's whole record (bisect/bisection's JSON), written
// at every change on the engine thread. Calls never throw (false or empty, with the reason in error()).
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

struct sqlite3;

namespace pto {

class BisectionJournal {
 public:
  static std::unique_ptr<BisectionJournal> open(const std::string& path, std::string& error);
  ~BisectionJournal();
  BisectionJournal(const BisectionJournal&) = delete;
  BisectionJournal& operator=(const BisectionJournal&) = delete;

  bool save(const std::string& id, const std::string& state, const nlohmann::json& record, double now);
  /// The newest `limit` bisections' records, newest first.
  std::vector<nlohmann::json> load(int limit);
  const std::string& error() const { return error_; }

 private:
  explicit BisectionJournal(sqlite3* db) : db_(db) {}
  sqlite3* db_;
  std::string error_;
};

}  // namespace pto
