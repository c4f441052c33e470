// server.hpp — a small HTTP/1.1 server on a libuv loop, for `uvcl serve`.
//
// Sockets are uv_tcp handles on the caller's loop; requests are parsed by
// http_parser (Debian's libhttp-parser). One thread: every callback runs on
// the loop. A request is handed to the Handler complete (headers and body);
// the handler answers through a Responder, at once or later from another
// callback (a job finishing). A Responder whose connection closed meanwhile
// does nothing, so a late answer is always safe.
//
// Per connection, one request is handled at a time; pipelined requests wait
// in the connection's input until the answer before them was sent.
//
// Connection states and their timer:
//   Idle      keep-alive, waiting for the first byte of a request: closed
//             after Limits::idle_timeout_ms.
//   Reading   a request has begun: its request line and headers must be
//             complete within Limits::header_timeout_ms of its first byte,
//             and all of it within Limits::request_timeout_ms (slow clients
//             are answered 408 and closed), whatever the pace of its bytes.
//   Handling  the handler has the request: no timer (a job takes what it
//             takes). The peer closing here closes the connection; the
//             answer is then dropped.
//   Lingering a final answer was sent on a request not read to its end (413,
//             401, 400, 408): the write side is shut down and what the peer
//             still sends is read and discarded for a moment, so that it
//             sees the answer rather than a reset.
//
//   Streaming an answer is being written piece by piece (Responder::stream):
//             the next piece is asked for once the previous one was handed
//             to the socket, so one piece per loop iteration at most, and
//             none while a peer that reads slowly still has one to take.
//             Pipelined requests wait until the answer's last piece.
//
// An answer being written to a peer that stopped reading it is abandoned
// (the connection closed) once the write made no progress for
// Limits::idle_timeout_ms.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include <uv.h>

#include "uvcl/status.hpp"

namespace uvcl::http {

struct Header {
  std::string name;  // lower-cased in requests
  std::string value;
};

struct Request {
  std::string method;  // "GET", "POST", ...
  std::string target;  // as sent: "/v1/run?x=1"
  std::string path;    // "/v1/run"
  std::string query;   // "x=1"
  std::vector<Header> headers;
  std::string body;
  unsigned http_major = 1, http_minor = 1;

  // The value of the first header of that (lower-case) name, or null.
  const std::string* header(std::string_view lower_name) const;
};

struct Response {
  int status = 200;
  std::string content_type = "application/json";
  std::string body;
  std::vector<Header> headers;  // extra headers (Retry-After, Allow, ...)
};

// A body produced as it is written (Responder::stream), so that a large
// answer is never whole in memory.
class BodySource {
 public:
  virtual ~BodySource() = default;
  // The next piece of the body, non-empty; an empty view once the body is
  // complete. The bytes must stay valid until next() is called again or the
  // source is destroyed: the connection asks for a piece only after the
  // previous one was written, so a source may reuse one buffer.
  virtual std::string_view next() = 0;
};

struct StreamedResponse {
  int status = 200;
  std::string content_type = "application/json";
  std::vector<Header> headers;
  // Known up front: sent as Content-Length. Otherwise the body is sent with
  // chunked transfer encoding (HTTP/1.1), or delimited by closing the
  // connection (HTTP/1.0, which has no chunks).
  std::optional<std::uint64_t> content_length;
  std::unique_ptr<BodySource> body;
};

// {"error": {"status": STATUS, "message": MESSAGE}}
Response error_response(int http_status, std::string_view status, std::string_view message);
// Compares in time that depends on the length of `expected` only.
bool constant_time_equal(std::string_view given, std::string_view expected) noexcept;

struct Limits {
  std::size_t max_body_bytes = 8u << 20;      // larger: 413
  std::size_t max_header_bytes = 16u << 10;   // request line + headers; larger: 431
  std::size_t max_connections = 256;          // more are accepted and closed at once
  // Open connections from one client address (IPv4, or IPv6 address); more
  // are accepted and closed at once, so one client cannot take every slot. 0: no cap.
  std::size_t max_connections_per_client = 64;
  std::uint64_t idle_timeout_ms = 10'000;     // keep-alive connection with no request
  std::uint64_t header_timeout_ms = 5'000;    // first byte to the end of the headers
  std::uint64_t request_timeout_ms = 30'000;  // first byte to last byte of one request
  std::uint64_t linger_ms = 1'000;            // see Lingering above
};

class Connection;

// Answers one request. Copyable; the first send() or stream() counts, later ones and
// sends after the connection closed do nothing.
class Responder {
 public:
  void send(Response response) const;
  // Sends the answer piece by piece from `response.body`, which the
  // connection keeps until the last piece was written or it closed.
  void stream(StreamedResponse response) const;
  // Whether the connection is still open and waiting for this answer.
  bool connected() const;
  // Runs once, on the loop, if the connection closes while this answer is
  // still owed: the client went away (or Server::force()). Not after the
  // answer was sent. Replaces an earlier one.
  void on_abandoned(std::function<void()> callback) const;

 private:
  friend class Connection;
  std::weak_ptr<Connection> conn_;
  std::uint64_t request_ = 0;
};

using Handler = std::function<void(Request request, Responder responder)>;

struct ServerStats {
  std::uint64_t connections_active = 0;
  std::uint64_t connections_total = 0;     // accepted
  std::uint64_t connections_rejected = 0;  // over max_connections, or while stopping
  std::uint64_t requests_total = 0;        // complete requests handed to the handler
  std::uint64_t timeouts_idle = 0, timeouts_header = 0, timeouts_request = 0;
  std::uint64_t responses_dropped = 0;     // answers whose connection had closed
  std::uint64_t streams_cut = 0;           // streamed answers whose connection closed before their end
  std::map<int, std::uint64_t> responses;  // status code -> count
};

class Server {
 public:
  Server(uv_loop_t* loop, const Limits& limits, Handler handler);
  // Requires that the server never listened or closed completely (the
  // on_closed callback of shutdown() ran).
  ~Server();
  Server(const Server&) = delete;
  Server& operator=(const Server&) = delete;

  // host: numeric IPv4 or IPv6 (no brackets); port 0 picks a free one.
  Result<void> listen(const std::string& host, int port);
  // The bound address, "127.0.0.1:7070" or "[::1]:7070".
  std::string address() const;
  // Non-empty: every request needs "Authorization: Bearer <token>" (401
  // otherwise, decided on the headers, before any body is read).
  void set_token(std::string token);

  // Stops accepting. Idle and half-read connections close now; one whose
  // request is being handled closes after its answer (sent with
  // "Connection: close"). on_closed runs once every handle of the server is
  // closed. force() closes the rest at once; their answers are dropped.
  void shutdown(std::function<void()> on_closed);
  void force();
  bool stopping() const { return stopping_; }

  const ServerStats& stats() const { return stats_; }
  const Limits& limits() const { return limits_; }

 private:
  friend class Connection;
  static void on_connection(uv_stream_t* listener, int status);
  static void on_listener_closed(uv_handle_t* h);
  void remove(Connection* c);
  void check_closed();

  uv_loop_t* loop_;
  Limits limits_;
  Handler handler_;
  std::string token_;
  uv_tcp_t listener_{};
  bool listening_ = false;
  bool listener_open_ = false;
  bool stopping_ = false;
  std::function<void()> on_closed_;
  std::map<Connection*, std::shared_ptr<Connection>> connections_;
  std::unordered_map<std::string, std::size_t> per_client_;  // open connections by client address
  ServerStats stats_;
  std::vector<char> read_buffer_;  // shared by all connections: one thread
};

}  // namespace uvcl::http
