#include "core/http_server.h"

#include <arpa/inet.h>
#include <gnutls/gnutls.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <cstring>
#include <exception>
#include <vector>

#include "core/errors.h"

namespace gpufleet::core {

struct HttpServer::Impl {
  HttpServerOptions options;
  MHD_Daemon* daemon = nullptr;
  std::uint16_t port = 0;
  bool ipv6 = false;
  bool tls = false;
  bool client_auth = false;
};

namespace {

constexpr std::string_view kTextPlain = "text/plain; charset=utf-8";

MHD_Result respond(MHD_Connection* connection, int status, std::string_view content_type,
                   std::string_view body, const char* allow = nullptr) {
  MHD_Response* response = MHD_create_response_from_buffer(
      body.size(), const_cast<char*>(body.data()), MHD_RESPMEM_MUST_COPY);
  if (response == nullptr) return MHD_NO;
  MHD_add_response_header(response, MHD_HTTP_HEADER_CONTENT_TYPE,
                          std::string(content_type).c_str());
  if (allow != nullptr) MHD_add_response_header(response, MHD_HTTP_HEADER_ALLOW, allow);
  const MHD_Result result = MHD_queue_response(connection, static_cast<unsigned>(status), response);
  MHD_destroy_response(response);
  return result;
}

MHD_Result send_check(MHD_Connection* connection, const HealthCheck& check, std::string_view what) {
  HealthStatus status;
  if (check) {
    try {
      status = check();
    } catch (const std::exception& e) {
      status = HealthStatus::unhealthy(std::string(what) + " check failed: " + e.what());
    } catch (...) {
      status = HealthStatus::unhealthy(std::string(what) + " check failed");
    }
  }
  if (status.ok) return respond(connection, 200, kTextPlain, "ok");
  return respond(connection, 503, kTextPlain,
                 status.reason.empty() ? std::string(what) + " failed" : status.reason);
}

// A POST body being received: MHD hands it over in pieces across calls of handle().
struct Upload {
  std::string body;
  bool too_large = false;
};

MHD_Result handle_post(const HttpServerOptions& options, const HttpPostHandler& handler,
                       MHD_Connection* connection, const char* upload_data,
                       std::size_t* upload_data_size, void** request_state) {
  auto* upload = static_cast<Upload*>(*request_state);
  if (upload == nullptr) {  // headers only so far
    *request_state = new Upload;
    return MHD_YES;
  }
  if (*upload_data_size > 0) {
    if (!upload->too_large && upload->body.size() + *upload_data_size <= options.max_body_bytes) {
      upload->body.append(upload_data, *upload_data_size);
    } else {
      upload->too_large = true;
      upload->body.clear();
    }
    *upload_data_size = 0;
    return MHD_YES;
  }
  if (upload->too_large) {
    return respond(connection, 413, kTextPlain,
                   "request body over " + std::to_string(options.max_body_bytes) + " bytes\n");
  }
  try {
    const HttpResponse r = handler(upload->body);
    return respond(connection, r.status, r.content_type, r.body);
  } catch (const std::exception& e) {
    return respond(connection, 500, kTextPlain, std::string("internal error: ") + e.what() + "\n");
  } catch (...) {
    return respond(connection, 500, kTextPlain, "internal error\n");
  }
}

void request_completed(void* /*cls*/, MHD_Connection* /*connection*/, void** request_state,
                       MHD_RequestTerminationCode /*code*/) {
  delete static_cast<Upload*>(*request_state);
  *request_state = nullptr;
}

// True when the TLS peer presented a certificate that the client CA signed (and that is
// valid now). MHD only asks for it; checking it is ours.
bool client_verified(MHD_Connection* connection) {
  const MHD_ConnectionInfo* info =
      MHD_get_connection_info(connection, MHD_CONNECTION_INFO_GNUTLS_SESSION);
  if (info == nullptr || info->tls_session == nullptr) return false;
  auto session = static_cast<gnutls_session_t>(info->tls_session);
  unsigned status = 0;
  if (gnutls_certificate_verify_peers2(session, &status) != GNUTLS_E_SUCCESS) return false;
  return status == 0;
}

MHD_Result collect_query(void* cls, MHD_ValueKind /*kind*/, const char* key, const char* value) {
  auto* query = static_cast<std::map<std::string, std::string, std::less<>>*>(cls);
  if (key != nullptr) query->emplace(key, value != nullptr ? value : "");
  return MHD_YES;
}

MHD_Result handle(void* cls, MHD_Connection* connection, const char* url, const char* method,
                  const char* /*version*/, const char* upload_data, std::size_t* upload_data_size,
                  void** request_state) {
  const auto* impl = static_cast<HttpServer::Impl*>(cls);
  const auto& options = impl->options;
  const std::string_view m = method;
  const std::string_view path = url;
  if (impl->client_auth && !client_verified(connection)) {
    return respond(connection, 401, kTextPlain,
                   "Unauthorized: a client certificate signed by the trusted CA is required\n");
  }
  if (m == MHD_HTTP_METHOD_POST) {
    if (auto it = options.post_handlers.find(std::string(path)); it != options.post_handlers.end())
      return handle_post(options, it->second, connection, upload_data, upload_data_size,
                         request_state);
  }
  if (m != MHD_HTTP_METHOD_GET && m != MHD_HTTP_METHOD_HEAD) {
    return respond(connection, 405, kTextPlain, "method not allowed: use GET\n", "GET, HEAD");
  }
  try {
    if (path == "/metrics" && options.registry != nullptr) {
      return respond(connection, 200, metrics::kExpositionContentType, options.registry->render());
    }
    if (path == "/healthz") return send_check(connection, options.healthz, "healthz");
    if (path == "/readyz") return send_check(connection, options.readyz, "readyz");
    if (auto it = options.handlers.find(std::string(path)); it != options.handlers.end()) {
      const HttpResponse r = it->second();
      return respond(connection, r.status, r.content_type, r.body);
    }
    // Longest prefix first: the map is ordered, so walk it backwards.
    for (auto it = options.prefix_handlers.rbegin(); it != options.prefix_handlers.rend(); ++it) {
      if (!path.starts_with(it->first)) continue;
      HttpRequest request;
      request.path = std::string(path);
      MHD_get_connection_values(connection, MHD_GET_ARGUMENT_KIND, &collect_query, &request.query);
      const HttpResponse r = it->second(request);
      return respond(connection, r.status, r.content_type, r.body);
    }
  } catch (const std::exception& e) {
    return respond(connection, 500, kTextPlain, std::string("internal error: ") + e.what() + "\n");
  } catch (...) {
    return respond(connection, 500, kTextPlain, "internal error\n");
  }
  return respond(connection, 404, kTextPlain, "not found\n");
}

std::string errno_text(int err) {
  char buf[256];
  // GNU strerror_r returns the message, possibly not in buf.
  return strerror_r(err, buf, sizeof buf);
}

// A bound, listening socket for the address; throws InvalidInput naming what failed.
int listen_on(const std::string& address, std::uint16_t port, bool& ipv6, std::uint16_t& bound) {
  sockaddr_storage storage{};
  socklen_t length = 0;
  const std::string host = address == "localhost" ? "127.0.0.1" : address;
  auto* v4 = reinterpret_cast<sockaddr_in*>(&storage);
  auto* v6 = reinterpret_cast<sockaddr_in6*>(&storage);
  if (inet_pton(AF_INET, host.c_str(), &v4->sin_addr) == 1) {
    v4->sin_family = AF_INET;
    v4->sin_port = htons(port);
    length = sizeof(sockaddr_in);
    ipv6 = false;
  } else if (inet_pton(AF_INET6, host.c_str(), &v6->sin6_addr) == 1) {
    v6->sin6_family = AF_INET6;
    v6->sin6_port = htons(port);
    length = sizeof(sockaddr_in6);
    ipv6 = true;
  } else {
    throw InvalidInput("invalid listen address \"" + address +
                       "\": expected an IPv4 or IPv6 address such as 127.0.0.1, 0.0.0.0 or ::1, "
                       "or localhost");
  }
  const std::string where = (ipv6 ? "[" + host + "]" : host) + ":" + std::to_string(port);
  const int fd = ::socket(storage.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) throw InvalidInput("cannot listen on " + where + ": " + errno_text(errno));
  const int one = 1;
  ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  if (ipv6) ::setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof one);
  if (::bind(fd, reinterpret_cast<sockaddr*>(&storage), length) != 0 || ::listen(fd, 64) != 0) {
    const int err = errno;
    ::close(fd);
    throw InvalidInput("cannot listen on " + where + ": " + errno_text(err) +
                       (err == EADDRINUSE ? "; choose another port, or 0 for a free one" : ""));
  }
  if (::getsockname(fd, reinterpret_cast<sockaddr*>(&storage), &length) != 0) {
    const int err = errno;
    ::close(fd);
    throw InvalidInput("cannot listen on " + where + ": " + errno_text(err));
  }
  bound = ntohs(ipv6 ? v6->sin6_port : v4->sin_port);
  return fd;
}

}  // namespace

BindAddress parse_bind_address(std::string_view text) {
  const auto fail = [&](const std::string& why) {
    return InvalidInput("invalid bind address \"" + std::string(text) + "\": " + why +
                        "; expected host:port such as 127.0.0.1:8080, [::1]:8080, "
                        "localhost:0 or :8080 (every interface)");
  };
  const std::size_t colon = text.rfind(':');
  if (colon == std::string_view::npos) throw fail("the port is missing");
  std::string_view host = text.substr(0, colon);
  const std::string_view port_text = text.substr(colon + 1);
  unsigned port = 0;
  const auto [end, ec] =
      std::from_chars(port_text.data(), port_text.data() + port_text.size(), port);
  if (port_text.empty() || ec != std::errc() || end != port_text.data() + port_text.size() ||
      port > 65535) {
    throw fail("the port must be a number from 0 to 65535");
  }
  BindAddress out;
  out.port = static_cast<std::uint16_t>(port);
  if (host.empty()) {
    out.address = "0.0.0.0";
    return out;
  }
  if (host.front() == '[') {
    if (host.size() < 3 || host.back() != ']') throw fail("an IPv6 address needs [ and ]");
    host = host.substr(1, host.size() - 2);
    in6_addr a6{};
    if (inet_pton(AF_INET6, std::string(host).c_str(), &a6) != 1) {
      throw fail("'" + std::string(host) + "' is not an IPv6 address");
    }
  } else if (host != "localhost") {
    in_addr a4{};
    if (inet_pton(AF_INET, std::string(host).c_str(), &a4) != 1) {
      throw fail("'" + std::string(host) + "' is not an IPv4 address (write IPv6 as [::1])");
    }
  }
  out.address = std::string(host);
  return out;
}

HttpServer::HttpServer(HttpServerOptions options) : impl_(std::make_unique<Impl>()) {
  const auto check_path = [](const std::string& path, bool has_handler) {
    if (path == "/metrics" || path == "/healthz" || path == "/readyz" || path.empty() ||
        path[0] != '/' || !has_handler) {
      throw InvalidInput("invalid extra HTTP handler \"" + path +
                         "\": it needs a path starting with '/', other than /metrics, /healthz "
                         "and /readyz, and a function");
    }
  };
  for (const auto& [path, handler] : options.handlers) check_path(path, bool(handler));
  for (const auto& [path, handler] : options.post_handlers) check_path(path, bool(handler));
  for (const auto& [path, handler] : options.prefix_handlers) check_path(path, bool(handler));
  const bool tls = !options.tls_cert_pem.empty() || !options.tls_key_pem.empty();
  if (tls && (options.tls_cert_pem.empty() || options.tls_key_pem.empty())) {
    throw InvalidInput(std::string("HTTPS needs both a certificate and a private key; the ") +
                       (options.tls_cert_pem.empty() ? "certificate" : "key") +
                       " is empty (give both PEM files, or neither for plain HTTP)");
  }
  if (tls && MHD_is_feature_supported(MHD_FEATURE_TLS) != MHD_YES) {
    throw InvalidInput(
        "HTTPS asked for, but this libmicrohttpd was built without TLS support "
        "(install Debian's libmicrohttpd12, which uses GnuTLS)");
  }
  if (!options.tls_client_ca_pem.empty() && !tls) {
    throw InvalidInput(
        "a client CA needs HTTPS: give a certificate and key too, or no client CA for plain HTTP");
  }
  impl_->options = std::move(options);
  impl_->tls = tls;
  impl_->client_auth = !impl_->options.tls_client_ca_pem.empty();
  const int fd = listen_on(impl_->options.address, impl_->options.port, impl_->ipv6, impl_->port);
  unsigned flags = MHD_USE_AUTO_INTERNAL_THREAD;
  if (impl_->ipv6) flags |= MHD_USE_IPv6;
  if (tls) flags |= MHD_USE_TLS;
  const auto& o = impl_->options;
  // Options as an array, so the TLS ones are there only with TLS. The PEM strings live in
  // impl_->options as long as the daemon does.
  std::vector<MHD_OptionItem> items = {
      {MHD_OPTION_LISTEN_SOCKET, fd, nullptr},
      {MHD_OPTION_CONNECTION_TIMEOUT, static_cast<intptr_t>(o.connection_timeout.count()), nullptr},
      {MHD_OPTION_CONNECTION_LIMIT, static_cast<intptr_t>(o.connection_limit), nullptr},
      {MHD_OPTION_NOTIFY_COMPLETED, reinterpret_cast<intptr_t>(&request_completed), nullptr},
  };
  if (tls) {
    items.push_back({MHD_OPTION_HTTPS_MEM_KEY, 0, const_cast<char*>(o.tls_key_pem.c_str())});
    items.push_back({MHD_OPTION_HTTPS_MEM_CERT, 0, const_cast<char*>(o.tls_cert_pem.c_str())});
  }
  if (impl_->client_auth) {
    items.push_back(
        {MHD_OPTION_HTTPS_MEM_TRUST, 0, const_cast<char*>(o.tls_client_ca_pem.c_str())});
  }
  items.push_back({MHD_OPTION_END, 0, nullptr});
  impl_->daemon = MHD_start_daemon(flags, 0, nullptr, nullptr, &handle, impl_.get(),
                                   MHD_OPTION_ARRAY, items.data(), MHD_OPTION_END);
  if (impl_->daemon == nullptr) {
    ::close(fd);
    throw InvalidInput(
        "cannot start the HTTP server on " + url() + ": libmicrohttpd refused to " +
        (tls ? "start (is the certificate or key malformed, or do they not match?)" : "start"));
  }
}

HttpServer::~HttpServer() { stop(); }

std::uint16_t HttpServer::port() const noexcept { return impl_->port; }

std::string HttpServer::url() const {
  std::string host = impl_->options.address == "localhost" ? "127.0.0.1" : impl_->options.address;
  if (impl_->ipv6) host = "[" + host + "]";
  return (impl_->tls ? "https://" : "http://") + host + ":" + std::to_string(impl_->port);
}

void HttpServer::stop() noexcept {
  if (impl_ && impl_->daemon != nullptr) {
    MHD_stop_daemon(impl_->daemon);  // also closes the listening socket
    impl_->daemon = nullptr;
  }
}

}  // namespace gpufleet::core
