// server.cpp — see server.hpp. Parsing is http_parser's; this file only
// moves bytes between libuv and the parser and keeps each connection's state.
#include "program/http/server.hpp"

#include <http_parser.h>

#include <algorithm>
#include <cassert>
#include <cctype>
#include <cstdint>
#include <cstring>
#include <optional>

#include <arpa/inet.h>

#include "json/text.hpp"

namespace uvcl::http {

namespace {

constexpr std::size_t kReadBufferBytes = 64u << 10;
// Unparsed input kept while a request is handled (pipelining) and output
// queued to a peer that does not read: past these, stop reading the socket.
constexpr std::size_t kMaxPendingInput = 64u << 10;
constexpr std::size_t kMaxWriteQueue = 1u << 20;
constexpr std::size_t kMaxHeaders = 100;

char lower(char c) { return static_cast<char>(std::tolower(static_cast<unsigned char>(c))); }

bool iequals(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (std::size_t i = 0; i < a.size(); ++i)
    if (lower(a[i]) != lower(b[i])) return false;
  return true;
}

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

// RFC 9110 5.6.2: a field name is a token. Debian's http_parser is built
// lenient and lets whitespace into names ("Host : x"), which RFC 9112 5.1
// says a server must answer 400, as a proxy may read the field differently.
bool is_token(std::string_view s) {
  if (s.empty()) return false;
  for (char ch : s) {
    const auto c = static_cast<unsigned char>(ch);
    if (std::isalnum(c) != 0) continue;
    if (std::strchr("!#$%&'*+-.^_`|~", c) == nullptr || c == 0) return false;
  }
  return true;
}

// The peer's address without its port: connections per client are counted by it.
std::string client_key(const uv_tcp_t& tcp) {
  sockaddr_storage addr{};
  int len = sizeof addr;
  if (uv_tcp_getpeername(&tcp, reinterpret_cast<sockaddr*>(&addr), &len) != 0) return {};
  if (addr.ss_family == AF_INET6) {
    const auto* a = reinterpret_cast<const sockaddr_in6*>(&addr);
    return std::string(reinterpret_cast<const char*>(&a->sin6_addr), sizeof a->sin6_addr);
  }
  const auto* a = reinterpret_cast<const sockaddr_in*>(&addr);
  return std::string(reinterpret_cast<const char*>(&a->sin_addr), sizeof a->sin_addr);
}

Response header_too_large(std::size_t limit) {
  return error_response(431, "HeaderTooLarge",
                        "the request line and headers exceed " + std::to_string(limit) + " bytes");
}

}  // namespace

Response error_response(int http_status, std::string_view status, std::string_view message) {
  Response r;
  r.status = http_status;
  r.body = "{\"error\": {\"status\": " + json::quote(status) + ", \"message\": " + json::quote(message) + "}}\n";
  return r;
}

bool constant_time_equal(std::string_view given, std::string_view expected) noexcept {
  // Runs over `expected` whatever `given` holds: the time tells nothing of
  // the secret but its length.
  unsigned diff = given.size() != expected.size() ? 1u : 0u;
  for (std::size_t i = 0; i < expected.size(); ++i) {
    const unsigned char g = i < given.size() ? static_cast<unsigned char>(given[i]) : 0;
    diff |= static_cast<unsigned>(g ^ static_cast<unsigned char>(expected[i]));
  }
  return diff == 0;
}

const std::string* Request::header(std::string_view lower_name) const {
  for (const Header& h : headers)
    if (h.name == lower_name) return &h.value;
  return nullptr;
}

// --- one connection ---------------------------------------------------------

class Connection : public std::enable_shared_from_this<Connection> {
 public:
  enum class State { Idle, Reading, Handling, Streaming, Lingering, Closed };

  explicit Connection(Server& server) : server_(server) {}

  // Initialises the handles and accepts; false if that failed (the handles
  // that were initialised are closing then).
  bool accept(uv_stream_t* listener);
  void start();
  void close();
  // The server stops: close unless a request is being answered.
  void stop() {
    if (state_ != State::Handling && state_ != State::Streaming && state_ != State::Lingering) close();
  }
  void answer(std::uint64_t request, Response r);
  void answer_streamed(std::uint64_t request, StreamedResponse r);
  const uv_tcp_t& tcp() const { return tcp_; }
  // The client address this connection counts against, if counted.
  std::string client;
  bool counted = false;
  bool waiting_for(std::uint64_t request) const {
    return !closing_ && state_ == State::Handling && request == request_;
  }
  void set_abandoned(std::uint64_t request, std::function<void()> callback) {
    if (waiting_for(request)) abandoned_ = std::move(callback);
  }

 private:
  enum class After { KeepAlive, Close, Linger };
  struct WriteReq {
    uv_write_t req{};
    std::string head, body, tail;
    Connection* conn = nullptr;
    bool piece = false;  // a piece of a streamed answer (its bytes are the source's)
  };

  static const http_parser_settings& settings();
  static Connection& of(http_parser* p) { return *static_cast<Connection*>(p->data); }
  static int on_message_begin(http_parser* p);
  static int on_url(http_parser* p, const char* at, std::size_t len);
  static int on_header_field(http_parser* p, const char* at, std::size_t len);
  static int on_header_value(http_parser* p, const char* at, std::size_t len);
  static int on_headers_complete(http_parser* p);
  static int on_body(http_parser* p, const char* at, std::size_t len);
  static int on_message_complete(http_parser* p);

  static void on_alloc(uv_handle_t* h, std::size_t suggested, uv_buf_t* buf);
  static void on_read(uv_stream_t* s, ssize_t nread, const uv_buf_t* buf);
  static void on_write(uv_write_t* req, int status);
  static void on_shutdown(uv_shutdown_t* req, int status);
  static void on_timer(uv_timer_t* t);
  static void on_closed(uv_handle_t* h);

  bool count_header_bytes(std::size_t len);
  int reject(Response r);
  std::optional<Response> header_done(const Header& h) const;
  std::optional<Response> check_token(const std::string* auth) const;
  bool chunk_end_ok(const char* after_data);
  bool pending_crlf_ok();
  void feed();
  void dispatch();
  void parse_failed(http_errno err);
  void respond(Response r, After after);
  void answered(After after);
  std::string status_head(int status, const std::string& content_type, const std::vector<Header>& headers,
                          After after) const;
  void pump();
  void end_stream();
  void write(std::string head, std::string body);
  bool write_bufs(WriteReq* w, std::string_view middle);
  void written(int status);
  void last_written();
  std::uint64_t delivered() const;
  void arm(std::uint64_t ms);
  bool write_blocked() const;
  void update_reading();

  Server& server_;
  uv_tcp_t tcp_{};
  uv_timer_t timer_{};
  uv_shutdown_t shutdown_req_{};
  int open_handles_ = 0;
  bool closing_ = false;
  bool reading_ = false;
  bool read_eof_ = false;
  bool feeding_ = false;
  State state_ = State::Idle;
  http_parser parser_{};
  std::string in_;  // received, not yet parsed
  Request req_;     // being parsed
  bool in_value_ = false;
  std::size_t header_bytes_ = 0;
  std::uint64_t request_start_ms_ = 0;  // uv_now at the request's first byte
  bool headers_done_ = false;
  // The end of the input http_parser_execute runs over, and the bytes of the CRLF that
  // must follow a chunk's data not seen yet ("\r\n" or "\n"): the parser is
  // built lenient and takes any two bytes there.
  const char* exec_end_ = nullptr;
  std::uint8_t crlf_pending_ = 0;
  std::optional<Response> reject_;
  bool keep_alive_ = true;
  bool head_ = false;  // the request being answered is a HEAD
  bool http10_ = false;  // ... is HTTP/1.0: no chunked answers
  std::uint64_t request_ = 0;
  std::size_t writes_pending_ = 0;
  std::uint64_t bytes_queued_ = 0;     // handed to uv_write, ever
  std::uint64_t last_delivered_ = 0;   // delivered() at the last timer check
  std::unique_ptr<BodySource> stream_;  // the answer being streamed (State::Streaming)
  bool chunked_ = false;                // stream_ is sent in chunks
  bool piece_in_flight_ = false;        // a piece of stream_ is being written
  bool final_ = false;  // the last answer was written; closing follows
  std::function<void()> abandoned_;  // Responder::on_abandoned of the request being handled
  After after_ = After::KeepAlive;
};

const http_parser_settings& Connection::settings() {
  static const http_parser_settings s = [] {
    http_parser_settings x;
    http_parser_settings_init(&x);
    x.on_message_begin = on_message_begin;
    x.on_url = on_url;
    x.on_header_field = on_header_field;
    x.on_header_value = on_header_value;
    x.on_headers_complete = on_headers_complete;
    x.on_body = on_body;
    x.on_message_complete = on_message_complete;
    return x;
  }();
  return s;
}

bool Connection::accept(uv_stream_t* listener) {
  uv_loop_t* loop = listener->loop;
  if (uv_tcp_init(loop, &tcp_) != 0) {
    close();  // nothing to close: removes it from the server at once
    return false;
  }
  ++open_handles_;
  tcp_.data = this;
  if (uv_timer_init(loop, &timer_) != 0) {
    close();
    return false;
  }
  ++open_handles_;
  timer_.data = this;
  if (uv_accept(listener, reinterpret_cast<uv_stream_t*>(&tcp_)) != 0) {
    close();
    return false;
  }
  return true;
}

void Connection::start() {
  uv_tcp_nodelay(&tcp_, 1);
  http_parser_init(&parser_, HTTP_REQUEST);
  parser_.data = this;
  state_ = State::Idle;
  arm(server_.limits_.idle_timeout_ms);
  update_reading();
}

void Connection::close() {
  if (closing_) return;
  closing_ = true;
  state_ = State::Closed;
  if (auto abandoned = std::move(abandoned_)) {
    abandoned_ = nullptr;
    abandoned();  // the answer owed will never be sent; `this` lives until its handles closed
  }
  // A streamed answer cut short. The source is kept until the handles are
  // closed: a piece being written still points into it.
  if (stream_) ++server_.stats_.streams_cut;
  if (open_handles_ == 0) {
    server_.remove(this);  // nothing was initialised
    return;
  }
  // tcp_ is initialised first: open_handles_ is 1 (tcp_) or 2 (and timer_).
  uv_close(reinterpret_cast<uv_handle_t*>(&tcp_), on_closed);
  if (open_handles_ == 2) uv_close(reinterpret_cast<uv_handle_t*>(&timer_), on_closed);
}

void Connection::on_closed(uv_handle_t* h) {
  Connection* c = static_cast<Connection*>(h->data);
  if (--c->open_handles_ > 0) return;
  c->stream_.reset();  // the writes were cancelled before this callback: its memory goes back now
  c->server_.remove(c);  // may free c
}

void Connection::arm(std::uint64_t ms) { uv_timer_start(&timer_, on_timer, ms, 0); }

void Connection::on_timer(uv_timer_t* t) {
  Connection& c = *static_cast<Connection*>(t->data);
  if (c.writes_pending_ > 0 && c.state_ != State::Reading) {
    // An answer is still being written: wait while the peer keeps reading
    // it, close once it stalled for a whole period.
    const std::uint64_t now = c.delivered();
    if (now != c.last_delivered_) {
      c.last_delivered_ = now;
      c.arm(c.server_.limits_.idle_timeout_ms);
      return;
    }
    ++c.server_.stats_.timeouts_idle;
    c.close();
    return;
  }
  switch (c.state_) {
    case State::Idle:
      ++c.server_.stats_.timeouts_idle;
      c.close();
      break;
    case State::Reading: {
      const Limits& l = c.server_.limits_;
      const bool headers = !c.headers_done_ && l.header_timeout_ms < l.request_timeout_ms;
      ++(headers ? c.server_.stats_.timeouts_header : c.server_.stats_.timeouts_request);
      c.respond(error_response(408, "RequestTimeout",
                               headers ? "the request line and headers were not complete within " +
                                             std::to_string(l.header_timeout_ms) + " ms"
                                       : "the request was not complete within " +
                                             std::to_string(l.request_timeout_ms) + " ms"),
                After::Linger);
      break;
    }
    case State::Lingering:
      c.close();
      break;
    case State::Streaming:  // between pieces: the next write re-arms
      c.arm(c.server_.limits_.idle_timeout_ms);
      break;
    case State::Handling:
    case State::Closed:
      break;
  }
}

// Bytes the socket took from us: progress of a peer reading an answer.
std::uint64_t Connection::delivered() const {
  return bytes_queued_ - uv_stream_get_write_queue_size(reinterpret_cast<const uv_stream_t*>(&tcp_));
}

bool Connection::write_blocked() const {
  return uv_stream_get_write_queue_size(reinterpret_cast<const uv_stream_t*>(&tcp_)) > kMaxWriteQueue;
}

void Connection::update_reading() {
  if (closing_) return;
  bool want = !read_eof_;
  if (state_ != State::Lingering && (in_.size() > kMaxPendingInput || write_blocked())) want = false;
  auto* s = reinterpret_cast<uv_stream_t*>(&tcp_);
  if (want && !reading_) {
    if (uv_read_start(s, on_alloc, on_read) == 0) reading_ = true;
    else close();
  } else if (!want && reading_) {
    uv_read_stop(s);
    reading_ = false;
  }
}

void Connection::on_alloc(uv_handle_t* h, std::size_t, uv_buf_t* buf) {
  Connection& c = *static_cast<Connection*>(h->data);
  std::vector<char>& b = c.server_.read_buffer_;
  *buf = uv_buf_init(b.data(), static_cast<unsigned>(b.size()));
}

void Connection::on_read(uv_stream_t* s, ssize_t nread, const uv_buf_t* buf) {
  Connection& c = *static_cast<Connection*>(s->data);
  if (c.closing_) return;
  if (nread > 0) {
    if (c.state_ == State::Lingering) return;  // discarded
    c.in_.append(buf->base, static_cast<std::size_t>(nread));
    c.feed();
    c.update_reading();
    return;
  }
  if (nread == 0) return;  // EAGAIN
  // End of stream or an error. A peer that closes while its request is
  // handled has gone away: the answer is dropped (the Responder no-ops).
  c.read_eof_ = true;
  if (c.state_ == State::Lingering && c.writes_pending_ > 0 && nread == UV_EOF) {
    uv_read_stop(s);  // the answer is still being written: close after it
    c.reading_ = false;
    c.after_ = After::Close;
    return;
  }
  c.close();
}

// --- parsing ------------------------------------------------------------------

bool Connection::count_header_bytes(std::size_t len) {
  header_bytes_ += len;
  return header_bytes_ <= server_.limits_.max_header_bytes;
}

int Connection::reject(Response r) {
  reject_ = std::move(r);
  return -1;  // http_parser stops with HPE_CB_*; parse_failed() answers reject_
}

int Connection::on_message_begin(http_parser* p) {
  Connection& c = of(p);
  c.state_ = State::Reading;
  c.req_ = Request{};
  c.in_value_ = false;
  c.header_bytes_ = 0;
  c.reject_.reset();
  c.head_ = false;
  c.headers_done_ = false;
  c.crlf_pending_ = 0;
  // A client trickling header bytes holds a connection slot until the header
  // deadline, shorter than the request's: headers are small.
  const Limits& l = c.server_.limits_;
  c.request_start_ms_ = uv_now(c.tcp_.loop);
  c.arm(std::min(l.header_timeout_ms, l.request_timeout_ms));
  return 0;
}

int Connection::on_url(http_parser* p, const char* at, std::size_t len) {
  Connection& c = of(p);
  if (!c.count_header_bytes(len)) return c.reject(header_too_large(c.server_.limits_.max_header_bytes));
  c.req_.target.append(at, len);
  return 0;
}

int Connection::on_header_field(http_parser* p, const char* at, std::size_t len) {
  Connection& c = of(p);
  if (!c.count_header_bytes(len)) return c.reject(header_too_large(c.server_.limits_.max_header_bytes));
  if (c.in_value_ || c.req_.headers.empty()) {
    // The previous header is complete: check it now, so that a bad token is
    // answered before the client sends (or trickles) the rest.
    if (!c.req_.headers.empty())
      if (auto refused = c.header_done(c.req_.headers.back())) return c.reject(std::move(*refused));
    if (c.req_.headers.size() >= kMaxHeaders)
      return c.reject(error_response(431, "HeaderTooLarge",
                                     "more than " + std::to_string(kMaxHeaders) + " header fields"));
    c.req_.headers.emplace_back();
    c.in_value_ = false;
  }
  c.req_.headers.back().name.append(at, len);
  return 0;
}

int Connection::on_header_value(http_parser* p, const char* at, std::size_t len) {
  Connection& c = of(p);
  if (!c.count_header_bytes(len)) return c.reject(header_too_large(c.server_.limits_.max_header_bytes));
  if (c.req_.headers.empty()) c.req_.headers.emplace_back();
  c.in_value_ = true;
  c.req_.headers.back().value.append(at, len);
  return 0;
}

// A header just completed: its name must be a token (400), and an
// Authorization header must carry the token (401), decided at once.
std::optional<Response> Connection::header_done(const Header& h) const {
  if (!is_token(h.name))
    return error_response(400, "BadRequest",
                          "invalid header name " + json::quote(h.name) +
                              " (a token: no whitespace before the colon, no control characters)");
  if (!server_.token_.empty() && iequals(h.name, "authorization")) return check_token(&h.value);
  return std::nullopt;
}

// 401 unless `auth` (an Authorization value, or null when there is none)
// is "Bearer <token>" with the server's token.
std::optional<Response> Connection::check_token(const std::string* auth) const {
  const std::string& token = server_.token_;
  constexpr std::string_view kBearer = "bearer ";
  const std::string_view value = auth ? trim(*auth) : std::string_view();
  bool ok = false;
  if (auth && value.size() > kBearer.size() && iequals(value.substr(0, kBearer.size()), kBearer))
    ok = constant_time_equal(trim(value.substr(kBearer.size())), token);
  if (ok) return std::nullopt;
  Response resp =
      error_response(401, "Unauthorized", auth ? "invalid bearer token" : "missing \"Authorization: Bearer <token>\"");
  resp.headers.push_back({"WWW-Authenticate", "Bearer"});
  return resp;
}

int Connection::on_headers_complete(http_parser* p) {
  Connection& c = of(p);
  Request& r = c.req_;
  // Only HTTP/1.0 and 1.1 are spoken; http_parser takes any digits.
  if (p->http_major != 1 || p->http_minor > 1)
    return c.reject(error_response(505, "HTTPVersionNotSupported",
                                   "HTTP/" + std::to_string(p->http_major) + "." + std::to_string(p->http_minor) +
                                       " is not supported (HTTP/1.0 and HTTP/1.1 are)"));
  if (!r.headers.empty())
    if (auto refused = c.header_done(r.headers.back())) return c.reject(std::move(*refused));
  for (Header& h : r.headers) {
    std::transform(h.name.begin(), h.name.end(), h.name.begin(), lower);
    h.value = std::string(trim(h.value));
  }
  r.method = http_method_str(static_cast<http_method>(p->method));
  r.http_major = p->http_major;
  r.http_minor = p->http_minor;
  c.keep_alive_ = http_should_keep_alive(p) != 0;
  c.head_ = p->method == HTTP_HEAD;
  c.http10_ = p->http_minor == 0;

  http_parser_url u{};
  http_parser_url_init(&u);
  if (http_parser_parse_url(r.target.data(), r.target.size(), p->method == HTTP_CONNECT, &u) != 0)
    return c.reject(error_response(400, "BadRequest", "invalid request target"));
  if (u.field_set & (1 << UF_PATH)) r.path = r.target.substr(u.field_data[UF_PATH].off, u.field_data[UF_PATH].len);
  else r.path = "/";
  if (u.field_set & (1 << UF_QUERY))
    r.query = r.target.substr(u.field_data[UF_QUERY].off, u.field_data[UF_QUERY].len);

  // Each Authorization header was checked as it completed; none at all is a 401 too.
  if (!c.server_.token_.empty() && !r.header("authorization")) return c.reject(*c.check_token(nullptr));

  const std::size_t max_body = c.server_.limits_.max_body_bytes;
  if ((p->flags & F_CONTENTLENGTH) && p->content_length > max_body)
    return c.reject(error_response(413, "PayloadTooLarge",
                                   "the body has " + std::to_string(p->content_length) + " bytes, the limit is " +
                                       std::to_string(max_body)));
  if (const std::string* expect = r.header("expect")) {
    if (!iequals(*expect, "100-continue"))
      return c.reject(error_response(417, "ExpectationFailed", "unsupported Expect: " + *expect));
    if (r.http_major == 1 && r.http_minor >= 1) c.write("HTTP/1.1 100 Continue\r\n\r\n", {});
  }
  // The headers are in: what is left of the request's own deadline.
  c.headers_done_ = true;
  const std::uint64_t elapsed = uv_now(c.tcp_.loop) - c.request_start_ms_;
  const std::uint64_t total = c.server_.limits_.request_timeout_ms;
  c.arm(elapsed < total ? total - elapsed : 1);
  return 0;
}

// Chunk data must be followed by CRLF; `after_data` is the byte after a
// chunk's last one. Bytes not received yet are checked by pending_crlf_ok.
bool Connection::chunk_end_ok(const char* after_data) {
  static constexpr char kCrlf[] = "\r\n";
  const std::size_t avail = static_cast<std::size_t>(exec_end_ - after_data);
  const std::size_t n = std::min<std::size_t>(avail, 2);
  for (std::size_t k = 0; k < n; ++k)
    if (after_data[k] != kCrlf[k]) return false;
  crlf_pending_ = static_cast<std::uint8_t>(2 - n);
  return true;
}

// The rest of a chunk's CRLF, at the front of the input received since.
bool Connection::pending_crlf_ok() {
  while (crlf_pending_ > 0 && !in_.empty()) {
    const std::size_t seen = in_.size() >= crlf_pending_ ? crlf_pending_ : in_.size();
    const char* expected = crlf_pending_ == 2 ? "\r\n" : "\n";
    if (in_.compare(0, seen, expected, seen) != 0) return false;
    crlf_pending_ = static_cast<std::uint8_t>(crlf_pending_ - seen);
    if (seen < 2) break;
  }
  return true;
}

int Connection::on_body(http_parser* p, const char* at, std::size_t len) {
  Connection& c = of(p);
  const std::size_t max_body = c.server_.limits_.max_body_bytes;
  if (c.req_.body.size() + len > max_body)
    return c.reject(error_response(413, "PayloadTooLarge",
                                   "the body exceeds the limit of " + std::to_string(max_body) + " bytes"));
  c.req_.body.append(at, len);
  if ((p->flags & F_CHUNKED) && p->content_length == 0 && !c.chunk_end_ok(at + len))
    return c.reject(error_response(400, "BadRequest", "malformed chunked body: chunk data not followed by CRLF"));
  return 0;
}

int Connection::on_message_complete(http_parser* p) {
  // Stop here: feed() hands the request over and parses the next one only
  // after this one was answered.
  http_parser_pause(p, 1);
  return 0;
}

void Connection::feed() {
  if (feeding_ || closing_) return;
  feeding_ = true;
  auto self = shared_from_this();  // a handler may close us
  while (!closing_ && (state_ == State::Idle || state_ == State::Reading) && !in_.empty() && !write_blocked()) {
    if (!pending_crlf_ok()) {
      respond(error_response(400, "BadRequest", "malformed chunked body: chunk data not followed by CRLF"),
              After::Linger);
      break;
    }
    exec_end_ = in_.data() + in_.size();
    const std::size_t n = http_parser_execute(&parser_, &settings(), in_.data(), in_.size());
    const http_errno err = HTTP_PARSER_ERRNO(&parser_);
    in_.erase(0, n);
    if (err == HPE_PAUSED) {
      http_parser_pause(&parser_, 0);
      dispatch();
      continue;
    }
    if (err != HPE_OK) {
      parse_failed(err);
      break;
    }
    if (!in_.empty()) {  // stopped without an error: an upgrade we do not speak
      parse_failed(HPE_UNKNOWN);
      break;
    }
  }
  feeding_ = false;
}

void Connection::dispatch() {
  state_ = State::Handling;
  uv_timer_stop(&timer_);
  if (parser_.upgrade) keep_alive_ = false;
  ++request_;
  ++server_.stats_.requests_total;
  Responder responder;
  responder.conn_ = weak_from_this();
  responder.request_ = request_;
  Request req = std::move(req_);
  req_ = Request{};
  server_.handler_(std::move(req), responder);
}

void Connection::parse_failed(http_errno err) {
  if (reject_) {
    Response r = std::move(*reject_);
    reject_.reset();
    respond(std::move(r), After::Linger);
    return;
  }
  if (err == HPE_HEADER_OVERFLOW) {
    respond(header_too_large(server_.limits_.max_header_bytes), After::Linger);
    return;
  }
  respond(error_response(400, "BadRequest", std::string("malformed HTTP request: ") + http_errno_description(err)),
          After::Linger);
}

// --- answering ----------------------------------------------------------------

void Connection::answer(std::uint64_t request, Response r) {
  if (!waiting_for(request)) return;
  abandoned_ = nullptr;
  respond(std::move(r), keep_alive_ && !server_.stopping_ ? After::KeepAlive : After::Close);
}

// The status line and headers, up to the blank line left out: the caller
// adds its length or transfer encoding.
std::string Connection::status_head(int status, const std::string& content_type, const std::vector<Header>& headers,
                                    After after) const {
  const char* reason = http_status_str(static_cast<http_status>(status));
  std::string head = "HTTP/1.1 " + std::to_string(status) + " " + reason + "\r\n";
  if (!content_type.empty()) head += "Content-Type: " + content_type + "\r\n";
  head += after == After::KeepAlive ? "Connection: keep-alive\r\n" : "Connection: close\r\n";
  for (const Header& h : headers) head += h.name + ": " + h.value + "\r\n";
  return head;
}

void Connection::respond(Response r, After after) {
  ++server_.stats_.responses[r.status];
  std::string head = status_head(r.status, r.content_type, r.headers, after);
  head += "Content-Length: " + std::to_string(r.body.size()) + "\r\n\r\n";
  if (head_) r.body.clear();  // a HEAD answer has the headers of a GET, no body
  last_delivered_ = delivered();
  if (after != After::KeepAlive) {
    // Before the write: from here on input is discarded, and the write's
    // end closes (or lingers).
    final_ = true;
    after_ = after;
  }
  write(std::move(head), std::move(r.body));
  answered(after);
}

// The answer's last bytes were queued: what the connection does next.
void Connection::answered(After after) {
  if (closing_) return;
  if (after == After::KeepAlive) {
    state_ = State::Idle;
    arm(server_.limits_.idle_timeout_ms);  // re-armed when the write is done
    feed();
    update_reading();
    return;
  }
  final_ = true;
  after_ = after;
  state_ = State::Lingering;  // from here on, input is discarded
  arm(server_.limits_.idle_timeout_ms);  // bounds the write to a peer that stopped reading
  update_reading();
  if (writes_pending_ == 0) last_written();  // a streamed answer whose last piece was written already
}

void Connection::answer_streamed(std::uint64_t request, StreamedResponse r) {
  if (!waiting_for(request)) return;
  abandoned_ = nullptr;
  ++server_.stats_.responses[r.status];
  // HTTP/1.0 has no chunks: a body of unknown length ends with the connection.
  const bool close_delimited = !r.content_length && http10_;
  const After after = keep_alive_ && !server_.stopping_ && !close_delimited ? After::KeepAlive : After::Close;
  std::string head = status_head(r.status, r.content_type, r.headers, after);
  chunked_ = !r.content_length && !close_delimited;
  if (r.content_length) head += "Content-Length: " + std::to_string(*r.content_length) + "\r\n";
  else if (chunked_) head += "Transfer-Encoding: chunked\r\n";
  head += "\r\n";
  last_delivered_ = delivered();
  write(std::move(head), {});
  if (head_ || !r.body) {  // a HEAD answer: headers only
    answered(after);
    return;
  }
  stream_ = std::move(r.body);
  state_ = State::Streaming;
  if (after == After::Close) keep_alive_ = false;
  arm(server_.limits_.idle_timeout_ms);  // bounds each piece's write to a peer that stopped reading
  pump();
}

// Writes the stream's next piece, unless one is still being written: one
// piece per write completion, so at most one per loop iteration, and none
// while a slow reader has not taken the last.
void Connection::pump() {
  if (closing_ || !stream_ || piece_in_flight_) return;
  const std::string_view piece = stream_->next();
  if (piece.empty()) {
    end_stream();
    return;
  }
  auto* w = new WriteReq;
  w->piece = true;
  if (chunked_) {
    char size[24];
    std::snprintf(size, sizeof size, "%zx\r\n", piece.size());
    w->head = size;
    w->tail = "\r\n";
  }
  if (write_bufs(w, piece)) piece_in_flight_ = true;
}

void Connection::end_stream() {
  stream_.reset();  // no piece in flight: nothing points into it
  if (chunked_) write("0\r\n\r\n", {});
  answered(keep_alive_ && !server_.stopping_ ? After::KeepAlive : After::Close);
}

void Connection::write(std::string head, std::string body) {
  auto* w = new WriteReq;
  w->head = std::move(head);
  w->body = std::move(body);
  write_bufs(w, w->body);
}

// Writes w's head, `middle` and w's tail; takes w. False if the write could
// not start (the connection is closing then).
bool Connection::write_bufs(WriteReq* w, std::string_view middle) {
  if (closing_) {
    delete w;
    return false;
  }
  w->conn = this;
  w->req.data = w;
  uv_buf_t bufs[3];
  unsigned nbufs = 0;
  for (std::string_view part : {std::string_view(w->head), middle, std::string_view(w->tail)}) {
    if (part.empty()) continue;
    bufs[nbufs++] = uv_buf_init(const_cast<char*>(part.data()), static_cast<unsigned>(part.size()));
    bytes_queued_ += part.size();
  }
  if (uv_write(&w->req, reinterpret_cast<uv_stream_t*>(&tcp_), bufs, nbufs, on_write) != 0) {
    delete w;
    close();
    return false;
  }
  ++writes_pending_;
  return true;
}

void Connection::on_write(uv_write_t* req, int status) {
  auto* w = static_cast<WriteReq*>(req->data);
  Connection* c = w->conn;
  const bool piece = w->piece;
  delete w;
  if (piece) c->piece_in_flight_ = false;
  c->written(status);  // c lives until its close callback, which runs after this
  if (piece && status >= 0) c->pump();
}

void Connection::written(int status) {
  --writes_pending_;
  if (closing_) return;
  if (status < 0) {
    close();
    return;
  }
  if (!final_) {
    if (writes_pending_ == 0 && state_ == State::Idle) arm(server_.limits_.idle_timeout_ms);
    if (!write_blocked()) {
      feed();
      update_reading();
    }
    return;
  }
  if (writes_pending_ == 0) last_written();
}

// The final answer was written: close, or linger.
void Connection::last_written() {
  if (after_ == After::Close || read_eof_) {
    close();
    return;
  }
  // Linger: half-close, read and discard what the peer still sends.
  arm(server_.limits_.linger_ms);
  if (uv_shutdown(&shutdown_req_, reinterpret_cast<uv_stream_t*>(&tcp_), on_shutdown) != 0) close();
}

void Connection::on_shutdown(uv_shutdown_t* req, int status) {
  if (status == UV_ECANCELED) return;  // closing already
  if (status < 0) static_cast<Connection*>(req->handle->data)->close();
}

// --- Responder ------------------------------------------------------------------

void Responder::send(Response response) const {
  if (auto c = conn_.lock()) c->answer(request_, std::move(response));
}

void Responder::stream(StreamedResponse response) const {
  if (auto c = conn_.lock()) c->answer_streamed(request_, std::move(response));
}

bool Responder::connected() const {
  auto c = conn_.lock();
  return c && c->waiting_for(request_);
}

void Responder::on_abandoned(std::function<void()> callback) const {
  if (auto c = conn_.lock()) c->set_abandoned(request_, std::move(callback));
}

// --- Server -----------------------------------------------------------------------

Server::Server(uv_loop_t* loop, const Limits& limits, Handler handler)
    : loop_(loop), limits_(limits), handler_(std::move(handler)), read_buffer_(kReadBufferBytes) {
  // http_parser's own count includes the line ends; ours (in the callbacks)
  // does not. Either way the answer is 431.
  const std::size_t raw = limits_.max_header_bytes + 4 * kMaxHeaders + 64;
  http_parser_set_max_header_size(static_cast<std::uint32_t>(std::min<std::size_t>(raw, 0x7fffffff)));
}

Server::~Server() { assert(!listener_open_ && connections_.empty()); }

void Server::set_token(std::string token) { token_ = std::move(token); }

Result<void> Server::listen(const std::string& host, int port) {
  sockaddr_storage addr{};
  const bool v6 = host.find(':') != std::string::npos;
  int rc = v6 ? uv_ip6_addr(host.c_str(), port, reinterpret_cast<sockaddr_in6*>(&addr))
              : uv_ip4_addr(host.c_str(), port, reinterpret_cast<sockaddr_in*>(&addr));
  if (rc != 0) return Error{Status::InvalidArgument, "--listen: '" + host + "' is not a numeric IP address"};
  if ((rc = uv_tcp_init(loop_, &listener_)) != 0)
    return Error{Status::Initialization, std::string("uv_tcp_init: ") + uv_strerror(rc)};
  listener_open_ = true;
  listener_.data = this;
  std::string what;
  if ((rc = uv_tcp_bind(&listener_, reinterpret_cast<const sockaddr*>(&addr), 0)) != 0) what = "bind";
  else if ((rc = uv_listen(reinterpret_cast<uv_stream_t*>(&listener_), 511, on_connection)) != 0) what = "listen";
  if (rc != 0) {
    uv_close(reinterpret_cast<uv_handle_t*>(&listener_), on_listener_closed);
    return Error{Status::Io, "cannot " + what + " " + (v6 ? "[" + host + "]" : host) + ":" + std::to_string(port) +
                                 ": " + uv_strerror(rc)};
  }
  listening_ = true;
  return {};
}

std::string Server::address() const {
  sockaddr_storage addr{};
  int len = sizeof addr;
  if (!listening_ || uv_tcp_getsockname(&listener_, reinterpret_cast<sockaddr*>(&addr), &len) != 0) return "?";
  char name[64] = {};
  if (addr.ss_family == AF_INET6) {
    const auto* a = reinterpret_cast<const sockaddr_in6*>(&addr);
    uv_ip6_name(a, name, sizeof name);
    return std::string("[") + name + "]:" + std::to_string(ntohs(a->sin6_port));
  }
  const auto* a = reinterpret_cast<const sockaddr_in*>(&addr);
  uv_ip4_name(a, name, sizeof name);
  return std::string(name) + ":" + std::to_string(ntohs(a->sin_port));
}

void Server::on_connection(uv_stream_t* listener, int status) {
  Server& s = *static_cast<Server*>(listener->data);
  if (status < 0) return;
  auto c = std::make_shared<Connection>(s);  // held until this returns, whatever happens to it
  Connection* raw = c.get();
  s.connections_.emplace(raw, c);
  s.stats_.connections_active = s.connections_.size();
  if (!raw->accept(listener)) return;  // closing; removed in its close callback
  if (s.stopping_ || s.connections_.size() > s.limits_.max_connections) {
    ++s.stats_.connections_rejected;
    raw->close();
    return;
  }
  if (const std::size_t cap = s.limits_.max_connections_per_client; cap > 0) {
    std::string key = client_key(raw->tcp());
    std::size_t& open = s.per_client_[key];
    if (open >= cap) {
      ++s.stats_.connections_rejected;
      raw->close();
      return;
    }
    ++open;
    raw->client = std::move(key);
    raw->counted = true;
  }
  ++s.stats_.connections_total;
  raw->start();
}

void Server::remove(Connection* c) {
  if (c->counted) {
    auto it = per_client_.find(c->client);
    if (it != per_client_.end() && --it->second == 0) per_client_.erase(it);
  }
  connections_.erase(c);  // may free c
  stats_.connections_active = connections_.size();
  check_closed();
}

void Server::on_listener_closed(uv_handle_t* h) {
  Server& s = *static_cast<Server*>(h->data);
  s.listener_open_ = false;
  s.check_closed();
}

void Server::check_closed() {
  if (!stopping_ || listener_open_ || !connections_.empty() || !on_closed_) return;
  auto cb = std::move(on_closed_);
  on_closed_ = nullptr;
  cb();
}

void Server::shutdown(std::function<void()> on_closed) {
  const bool first = !stopping_;
  stopping_ = true;
  if (on_closed) on_closed_ = std::move(on_closed);
  if (first && listener_open_ && listening_) uv_close(reinterpret_cast<uv_handle_t*>(&listener_), on_listener_closed);
  listening_ = false;
  std::vector<std::shared_ptr<Connection>> all;
  for (auto& [raw, c] : connections_) all.push_back(c);
  for (auto& c : all) c->stop();
  check_closed();
}

void Server::force() {
  shutdown(nullptr);
  std::vector<std::shared_ptr<Connection>> all;
  for (auto& [raw, c] : connections_) all.push_back(c);
  for (auto& c : all) c->close();
}

}  // namespace uvcl::http
