#pragma once

#include <cstdint>
#include <string>

namespace orch::test {

// Sends `request` to 127.0.0.1:port and returns everything the server answers
// until it closes ("" when nothing listens there). A server that closes before
// the whole request is sent (one refusing a large request) still has its
// answer read. Blocks until the server closes the connection.
std::string http_exchange(std::uint16_t port, const std::string& request);

// http_exchange of a plain GET /metrics: the whole response, status line first.
std::string scrape_metrics(std::uint16_t port);

// The port of the metrics server from an orchestrator's JSON log (its
// "metrics listening" line); 0 while there is no such line.
int metrics_port_in_log(const std::string& json_log);

} // namespace orch::test
