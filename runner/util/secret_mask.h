#pragma once
// SecretMask: the values a run must never show, replaced by *** in everything stored or shown (its steps' logs
// as written, hence the log API and `submit`'s output; summaries; outputs), as GitHub masks secrets: each
// value, its base64 and URL-encoded forms, and each line of a multi-line value. A step that prints
// `::add-mask::VALUE` adds VALUE for the rest of its run. One per run, shared by its steps, on the engine thread.
#include <string>
#include <string_view>
#include <vector>

namespace pto {

class SecretMask {
 public:
  /// Shorter values are not masked (they would blank ordinary words out of every log): GitHub's own
  /// minimum-length behaviour differs; said in docs/security.md (Secrets).
  static constexpr std::size_t kMinLength = 3;
  void add(const std::string& value);
  /// `text` with every masked value replaced by ***.
  std::string apply(std::string_view text) const;
  /// A line of a step's output: `::add-mask::VALUE` adds VALUE (the line then shows only the command);
  /// returns the line as it is to be shown.
  std::string line(std::string_view text);
  bool empty() const { return values_.empty(); }
  /// Every value it masks (the added ones and their encodings), longest first: to hand a mask to another
  /// process (a step's supervisor) and back. Secrets: never logged.
  const std::vector<std::string>& values() const { return values_; }
  /// Masks these exact values (from values()), without deriving encodings again.
  void add_values(const std::vector<std::string>& values);

 private:
  void add_one(std::string value);
  std::vector<std::string> values_;  // longest first, so a value containing another is masked whole
};

std::string base64_encode(std::string_view data);
/// RFC 3986 percent-encoding of everything but unreserved characters (what curl and browsers send).
std::string url_encode(std::string_view data);

}  // namespace pto
