#pragma once
// Reading a step's log for the API in bounded time and memory, whatever the log holds (a 200 MB line, a
// file still being written): one pread of at most `max_bytes`, never a scan of the whole file. Called on a
// worker thread, never on the engine's.
#include <cstddef>
#include <cstdint>
#include <string>

namespace pto {

constexpr std::size_t kMaxLogRead = 1 << 20;

struct LogSlice {
  std::string data;
  std::uint64_t start = 0;  // file offset of data's first byte
  std::uint64_t end = 0;    // file offset just after it: the `offset` to ask for next
  std::uint64_t size = 0;   // the file's size when read
  bool missing = false;     // no file (a step that printed nothing has none)
  std::string error;        // the file exists but cannot be read
};

/// Bytes [offset, offset + max_bytes) (fewer at the end of the file).
LogSlice read_log_range(const std::string& path, std::uint64_t offset, std::size_t max_bytes);

/// The last `lines` lines, from within the last `max_bytes` bytes. When that window starts inside a line,
/// the slice starts with a `[pto-runner: N earlier bytes of this line not shown]` marker line instead.
LogSlice read_log_tail(const std::string& path, std::size_t lines, std::size_t max_bytes = kMaxLogRead);

}  // namespace pto
