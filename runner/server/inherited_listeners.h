#pragma once
// Listening sockets a daemon is given instead of binding them itself (SPEC "A step cannot take the daemon's
// place"). A listener the daemon binds at start is free for anyone to bind while no daemon runs: a step
// could take the API's port and receive the next client's token. So the sockets outlive the daemon:
// - under systemd, socket units hold them (packaging/pto-runner.socket, pto-runner-steps.socket) and pass them
//   to each daemon as descriptors 3.. (LISTEN_FDS, LISTEN_PID, LISTEN_FDNAMES: sd_listen_fds(3));
// - otherwise the step supervisor keeps copies (supervise/, passed with SCM_RIGHTS as the cards' flocks are)
//   and hands them to the next daemon in its greeting.
// The daemon takes the one that is bound where runner.yml says it listens; one bound elsewhere (the settings
// changed) is closed with a warning and the daemon binds the new address itself.
#include <string>
#include <vector>

namespace pto {

/// A listening socket given to this process, with its name (systemd's FileDescriptorName, or the one the
/// daemon gave it: "api", "unix", "steps").
struct GivenListener {
  int fd = -1;
  std::string name;
  bool from_systemd = false;  // its socket unit owns the address (a Unix socket's file is never removed)
};

class InheritedListeners {
 public:
  InheritedListeners() = default;
  InheritedListeners(const InheritedListeners&) = delete;
  InheritedListeners& operator=(const InheritedListeners&) = delete;
  ~InheritedListeners();

  /// systemd's, when LISTEN_PID is this process: descriptors 3..3+LISTEN_FDS-1, made close-on-exec (no child
  /// inherits them), and the variables unset. Anything in them that is not a listening stream socket is closed
  /// and said in `problems`.
  void take_from_systemd(std::vector<std::string>& problems);
  /// One more (the supervisor's copy of the last daemon's); this object owns it from now on.
  void add(GivenListener l);

  /// The listening TCP socket bound to `address`:`port` (the caller owns it), else -1. With `port` 0, the one
  /// named `name` (the steps' endpoint, whose port is whatever it was first given) on that address.
  int take_tcp(const std::string& address, unsigned short port, const std::string& name);
  /// The listening Unix socket bound to `path` whose file is still there (fd -1: none).
  GivenListener take_unix(const std::string& path);
  /// Where each one that nobody took is bound (for a warning); they are closed.
  std::vector<std::string> close_rest();
  bool empty() const { return given_.empty(); }

 private:
  std::vector<GivenListener> given_;
};

/// Where a listening socket is bound: "ADDRESS:PORT" or "unix:PATH"; "" when it is no such socket.
std::string listener_address(int fd);

}  // namespace pto
