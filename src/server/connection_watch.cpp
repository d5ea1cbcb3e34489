#include "server/connection_watch.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/types.h>

#include <cerrno>
#include <cstdlib>

namespace pagellm {

namespace {

// The port and numeric host of a socket address; port -1 if not IP.
int port_of(const sockaddr_storage& a, std::string* host) {
  char buf[INET6_ADDRSTRLEN] = {0};
  if (a.ss_family == AF_INET) {
    const auto& in = reinterpret_cast<const sockaddr_in&>(a);
    if (host) *host = inet_ntop(AF_INET, &in.sin_addr, buf, sizeof(buf)) ? buf : "";
    return ntohs(in.sin_port);
  }
  if (a.ss_family == AF_INET6) {
    const auto& in6 = reinterpret_cast<const sockaddr_in6&>(a);
    if (host) *host = inet_ntop(AF_INET6, &in6.sin6_addr, buf, sizeof(buf)) ? buf : "";
    return ntohs(in6.sin6_port);
  }
  return -1;
}

// True if `fd` is a socket on `local_port` with a peer (an accepted
// connection); the peer's address goes to `peer`.
bool accepted_on(int fd, int local_port, sockaddr_storage& peer) {
  sockaddr_storage a{};
  socklen_t len = sizeof(a);
  if (::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) != 0) return false;
  if (port_of(a, nullptr) != local_port) return false;
  len = sizeof(peer);
  return ::getpeername(fd, reinterpret_cast<sockaddr*>(&peer), &len) == 0;
}

bool matches(int fd, int local_port, const std::string& remote_addr, int remote_port) {
  sockaddr_storage a{};
  if (!accepted_on(fd, local_port, a)) return false;
  std::string host;
  if (port_of(a, &host) != remote_port) return false;
  // An IPv4 peer on an IPv6 socket reads "::ffff:a.b.c.d" on one side.
  return remote_addr.empty() || host == remote_addr ||
         host.find(remote_addr) != std::string::npos || remote_addr.find(host) != std::string::npos;
}

// Calls fn(fd) for each of the process's descriptors until it returns true.
template <class Fn>
void for_each_descriptor(Fn fn) {
  DIR* dir = ::opendir("/proc/self/fd");
  if (!dir) return;
  const int own = ::dirfd(dir);
  while (const dirent* e = ::readdir(dir)) {
    char* end = nullptr;
    const long fd = std::strtol(e->d_name, &end, 10);
    if (end == e->d_name || *end != '\0' || fd == own) continue;
    if (fn(static_cast<int>(fd))) break;
  }
  ::closedir(dir);
}

}  // namespace

ConnectionWatch::ConnectionWatch(int local_port, const std::string& remote_addr, int remote_port) {
  if (local_port <= 0 || remote_port <= 0) return;
  for_each_descriptor([&](int fd) {
    if (!matches(fd, local_port, remote_addr, remote_port)) return false;
    fd_ = fd;
    return true;
  });
}

int shut_accepted_connections(int local_port) {
  if (local_port <= 0) return 0;
  int n = 0;
  for_each_descriptor([&](int fd) {
    sockaddr_storage peer{};
    if (accepted_on(fd, local_port, peer)) n += ::shutdown(fd, SHUT_RD) == 0;
    return false;
  });
  return n;
}

bool ConnectionWatch::peer_closed() const {
  if (fd_ < 0) return false;
  pollfd p{fd_, POLLIN | POLLRDHUP, 0};
  if (::poll(&p, 1, 0) <= 0) return false;
  if (p.revents & (POLLRDHUP | POLLHUP | POLLERR)) return true;
  // Readable: either a pipelined next request (data) or the end of stream.
  char byte;
  const ssize_t n = ::recv(fd_, &byte, 1, MSG_PEEK | MSG_DONTWAIT);
  return n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR);
}

}  // namespace pagellm
