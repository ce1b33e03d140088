#pragma once
// FinishedTexts: the records of the runs that finished last, as their run.json holds them (dump_json's text,
// so an answer's body as it is). A client that followed a run to its end reads the record at once from here,
// not from the disk and parsed again on a worker (a run of 1,000 steps is ~1 MB). Kept by RunHistory with each
// write of a run.json; the newest few only.
#include <cstddef>
#include <deque>
#include <string>
#include <utility>

namespace pto {

class FinishedTexts {
 public:
  static constexpr std::size_t kKept = 4;

  /// Run `id`'s record is `text` now (replacing what was kept of it).
  void keep(const std::string& id, std::string text) {
    forget(id);
    texts_.emplace_front(id, std::move(text));
    if (texts_.size() > kKept) texts_.pop_back();
  }
  /// Its record is not known to be `text` any more (rewritten as running, unwritable, or deleted).
  void forget(const std::string& id) {
    for (auto it = texts_.begin(); it != texts_.end(); ++it)
      if (it->first == id) {
        texts_.erase(it);
        return;
      }
  }
  /// The record's text, or null.
  const std::string* find(const std::string& id) const {
    for (const auto& [run, text] : texts_)
      if (run == id) return &text;
    return nullptr;
  }

 private:
  std::deque<std::pair<std::string, std::string>> texts_;  // newest first
};

}  // namespace pto
