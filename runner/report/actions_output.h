#pragma once
// Everything pto-runner prints where a GitHub Actions runner reads it (`run` and `submit` with
// GITHUB_ACTIONS=true), written so that no byte of step output or of a definition file is taken as a
// workflow command.
//
// GitHub's runner trims leading whitespace before it looks for `::cmd::`, and finds the old `##[cmd]` form
// anywhere in a line, so indenting untrusted lines is no defence. Untrusted text goes between
// `::stop-commands::TOKEN` and `::TOKEN::`, with a fresh random token per block: while commands are stopped
// the runner only looks for the token, which a step cannot know. The runner's own commands escape their
// data and properties by GitHub's rules. Outside Actions, text is printed as it is and commands are dropped.
#include <cstdio>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace pto {

/// `%` `\r` `\n` as GitHub's runner unescapes them in command data.
std::string escape_command_data(std::string_view s);
/// The same plus `:` and `,`, for command properties.
std::string escape_command_property(std::string_view s);

using CommandProperties = std::vector<std::pair<std::string, std::string>>;
/// `::name k=v,k=v::message\n` with every part escaped.
std::string workflow_command(std::string_view name, const CommandProperties& props, std::string_view message);

class ActionsOutput {
 public:
  ActionsOutput(std::FILE* out, bool github) : out_(out), github_(github) {}
  bool github() const { return github_; }

  /// A block of untrusted text (one or more lines; a missing final newline is added).
  void text(std::string_view untrusted);
  /// One of the runner's own commands (only inside Actions).
  void command(std::string_view name, const CommandProperties& props, std::string_view message);
  void group(std::string_view title) { command("group", {}, title); }
  void endgroup() { command("endgroup", {}, ""); }
  std::FILE* file() const { return out_; }

  /// A block written piece by piece (a log copied from a file): open, write any bytes, close.
  class Block {
   public:
    explicit Block(ActionsOutput& o);
    ~Block();
    Block(const Block&) = delete;
    Block& operator=(const Block&) = delete;
    void write(std::string_view bytes);

   private:
    ActionsOutput& o_;
    std::string token_;
    bool at_line_start_ = true;
  };

 private:
  std::FILE* out_;
  bool github_;
};

/// A JSON text (as printed by `plan`/`lint --format json`) from which no workflow command can be read, and
/// which parses to the same value: one token per line never starts with `::`, and `##[` can only be inside a
/// string, where `#\u0023[` means the same. (JSON is not wrapped in stop-commands: it is piped to tools.)
std::string json_without_workflow_commands(std::string json);

/// Whether GITHUB_ACTIONS=true in this process's environment.
bool inside_github_actions();

}  // namespace pto
