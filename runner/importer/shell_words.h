#pragma once
// Splitting shell text into words as bash would for one simple command (for reading a task-submit call out of
// a workflow's run: script): quotes removed, backslash escapes undone ("\\$TASK_DEVICE" inside double quotes
// is the literal $TASK_DEVICE the inner shell expands), line continuations joined, comments dropped.
// Expansions are left as written; && || ; | and newlines are operator words.
#include <string>
#include <vector>

namespace pto {

struct ShellWord {
  std::string text;
  bool op = false;  // && || ; | or a newline: the end of a command
};

std::vector<ShellWord> shell_words(const std::string& s);

}  // namespace pto
