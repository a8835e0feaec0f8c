#pragma once

#include <fmt/format.h>

#include <string>
#include <string_view>
#include <utility>
#include <vector>

// One line per event on stderr. Text by default:
//   2026-11-22T04:50:01.123Z INFO  crawl_worker[1234] spawned snapshot_worker process=… snapshot=…
// or one JSON object per line with --log-format json. Thread-safe.
namespace orch::log {

enum class Level { debug, info, warn, error };
enum class Format { text, json };

// Process-wide settings; call once from main() before logging.
void configure(std::string program, Format format, Level min_level = Level::info);
// Context fields added to every line of this process (process id, crawl id, ...).
void set_context(std::string key, std::string value);

using Fields = std::vector<std::pair<std::string, std::string>>;

void write(Level level, std::string_view message, const Fields& fields = {});
// Whether a line at `level` would be written: lets a caller skip building the
// fields of a line nobody reads (debug lines on the per-hook path).
bool enabled(Level level);

inline void debug(std::string_view m, const Fields& f = {}) { write(Level::debug, m, f); }
inline void info(std::string_view m, const Fields& f = {}) { write(Level::info, m, f); }
inline void warn(std::string_view m, const Fields& f = {}) { write(Level::warn, m, f); }
inline void error(std::string_view m, const Fields& f = {}) { write(Level::error, m, f); }

} // namespace orch::log
