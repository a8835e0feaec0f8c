#include "common/base/log.hpp"

#include "common/base/json_text.hpp"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <ctime>
#include <mutex>

#include <pthread.h>
#include <unistd.h>

namespace orch::log {
namespace {

struct State {
    std::mutex mutex;
    std::string program = "orch";
    Format format = Format::text;
    Level min_level = Level::info;
    Fields context;
    // getpid() is a system call each time (glibc 2.36 does not cache it): it
    // is read once, and again in a child of fork().
    pid_t pid = ::getpid();
    // The text of the current second ("2026-11-22T04:50:01"), made by strftime
    // once per second rather than on every line.
    std::time_t second = -1;
    char second_text[32] = {};
};

State& state()
{
    static State s;
    static const int forked = ::pthread_atfork(nullptr, nullptr, [] { state().pid = ::getpid(); });
    (void)forked;
    return s;
}

const char* level_name(Level level)
{
    switch (level) {
    case Level::debug: return "debug";
    case Level::info: return "info";
    case Level::warn: return "warn";
    case Level::error: return "error";
    }
    return "info";
}

// Called with the state's mutex held.
std::string timestamp(State& s)
{
    auto now = std::chrono::system_clock::now();
    auto secs = std::chrono::system_clock::to_time_t(now);
    auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(now.time_since_epoch()).count() % 1000;
    if (secs != s.second) {
        std::tm tm{};
        gmtime_r(&secs, &tm);
        std::strftime(s.second_text, sizeof s.second_text, "%Y-%m-%dT%H:%M:%S", &tm);
        s.second = secs;
    }
    return fmt::format("{}.{:03d}Z", s.second_text, static_cast<int>(ms));
}

bool needs_quotes(const std::string& v)
{
    return v.empty() || v.find_first_of(" \"=\n\t") != std::string::npos;
}

} // namespace

void configure(std::string program, Format format, Level min_level)
{
    auto& s = state();
    std::lock_guard lock(s.mutex);
    s.program = std::move(program);
    s.format = format;
    s.min_level = min_level;
}

void set_context(std::string key, std::string value)
{
    auto& s = state();
    std::lock_guard lock(s.mutex);
    for (auto& kv : s.context) {
        if (kv.first == key) {
            kv.second = std::move(value);
            return;
        }
    }
    s.context.emplace_back(std::move(key), std::move(value));
}

bool enabled(Level level)
{
    auto& s = state();
    std::lock_guard lock(s.mutex);
    return level >= s.min_level;
}

void write(Level level, std::string_view message, const Fields& fields)
{
    auto& s = state();
    std::lock_guard lock(s.mutex);
    if (level < s.min_level) {
        return;
    }
    std::string line;
    if (s.format == Format::json) {
        nlohmann::json j;
        j["ts"] = timestamp(s);
        j["level"] = level_name(level);
        j["program"] = s.program;
        j["pid"] = s.pid;
        j["msg"] = std::string(message);
        for (const auto& [k, v] : s.context) {
            j[k] = v;
        }
        for (const auto& [k, v] : fields) {
            j[k] = v;
        }
        line = j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
    } else {
        line = fmt::format("{} {:5} {}[{}] {}", timestamp(s), level_name(level), s.program, s.pid, message);
        auto append = [&line](const std::string& k, const std::string& v) {
            line.append(" ").append(k).append("=");
            if (needs_quotes(v)) {
                json_text::append_string(line, v);
            } else {
                line.append(v);
            }
        };
        // As in JSON, a field given with the message replaces a context field of that name.
        for (const auto& [k, v] : s.context) {
            const auto given = std::find_if(fields.begin(), fields.end(), [&k](const auto& f) { return f.first == k; });
            if (given == fields.end()) {
                append(k, v);
            }
        }
        for (const auto& [k, v] : fields) {
            append(k, v);
        }
    }
    line += '\n';
    // One write() per line so lines from concurrent processes sharing stderr do not interleave.
    ssize_t ignored = ::write(STDERR_FILENO, line.data(), line.size());
    (void)ignored;
}

} // namespace orch::log
