// Whether the client of a request still waits for the answer. The HTTP
// library (cpp-httplib 0.11) hands handlers no socket, so the request's
// socket is found among the process's descriptors by its two ports, and
// watched for the peer's end of stream while a non-streamed reply is made:
// a client that gave up frees its engine work at once, as a stream does.
#pragma once

#include <string>

namespace pagellm {

class ConnectionWatch {
 public:
  // The TCP connection from remote_port to local_port (as the request
  // reports them); watches nothing when it is not found.
  ConnectionWatch(int local_port, const std::string& remote_addr, int remote_port);

  bool found() const { return fd_ >= 0; }
  // True once the peer has closed its side (a read would see end of
  // stream, or the connection is reset). Does not consume data.
  bool peer_closed() const;

 private:
  int fd_ = -1;
};

// Shuts the reading side of every accepted TCP connection on `local_port`
// (sockets of this process with a peer): a connection idling between
// keep-alive requests then ends at once instead of after the library's
// keep-alive timeout, which a stopping server would otherwise wait out.
// Replies being written are not affected. Returns how many it shut.
int shut_accepted_connections(int local_port);

}  // namespace pagellm
