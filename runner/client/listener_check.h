#pragma once
// Whom a client talks to (SPEC "A step cannot take the daemon's place"). While the daemon restarts, anything on
// the host could try to listen on its address; a client that sent its token there would hand the admin or a
// run's lease token to whoever did. So before a byte is sent, the other end of the connection is checked:
// - loopback TCP: the kernel's record of the server's end of this very connection (util/socket_owner) must be
//   owned by root or by this client's own user (a daemon one started oneself). A connection still in a
//   listener's queue is waited for until it is accepted, since older kernels report root for it;
// - a Unix socket: the listener's credentials (SO_PEERCRED), the same rule.
// Beyond loopback the kernel cannot say; there TLS's certificate is what names the server.
#include <string>

namespace pto {

/// "" when the connected socket `fd` leads to a listener of root or of this user; else why not, naming the uid
/// that owns it (the caller refuses, exits 3 and sends nothing). `wait_seconds` bounds the wait for the
/// listener to accept the connection (a restarting daemon takes up its queue when it is back). With
/// `must_be_accepted` a connection still queued is waited for until a process takes it (a client asking again
/// after its daemon went away wants a daemon, not a listener kept while none runs).
std::string check_listener(int fd, double wait_seconds, bool must_be_accepted = false);

/// The message's start: refusing `where` because its listener is another user's (for callers that say more).
constexpr const char* kListenerRefused = "refusing to talk to ";

}  // namespace pto
