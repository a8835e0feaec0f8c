#include "snapshot_worker/result_write_behind.hpp"

#include "common/base/json_text.hpp"
#include "common/base/utf8.hpp"

#include <algorithm>

namespace orch {
namespace {

double seconds_before(ResultWriteBehind::Clock::time_point now, ResultWriteBehind::Clock::time_point then)
{
    return std::max(0.0, std::chrono::duration<double>(now - then).count());
}

// PostgreSQL's text and jsonb cannot hold U+0000, which a hook may print as
// valid JSON ("\u0000"): it is dropped, so that one such string cannot fail
// the statement that carries the other results.
nlohmann::json json_without_nul(const nlohmann::json& j)
{
    if (j.is_string()) {
        return orch::without_nul(j.get<std::string>());
    }
    if (j.is_array()) {
        auto out = nlohmann::json::array();
        for (const auto& e : j) {
            out.push_back(json_without_nul(e));
        }
        return out;
    }
    if (j.is_object()) {
        auto out = nlohmann::json::object();
        for (const auto& [k, v] : j.items()) {
            out[orch::without_nul(k)] = json_without_nul(v);
        }
        return out;
    }
    return j;
}

void append_text_or_null(std::string& out, const std::optional<std::string>& s)
{
    if (s) {
        json_text::append_string(out, orch::without_nul(*s));
    } else {
        out += "null";
    }
}

void append_json(std::string& out, const nlohmann::json& j)
{
    if (j.is_null()) {
        out += "null";
        return;
    }
    out += json_without_nul(j).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

} // namespace

void ResultWriteBehind::started(const std::string& result_id, const std::string& process_id, Clock::time_point at)
{
    auto& p = m_pending[result_id];
    p.due = at + k_delay;
    p.process_id = process_id;
    p.started_at = at;
    p.end.reset();
}

void ResultWriteBehind::finished(const std::string& result_id, const HookResult& result, const OutputFiles& files,
                                 Clock::time_point at)
{
    auto [it, fresh] = m_pending.try_emplace(result_id);
    auto& p = it->second;
    // An end keeps the due time of a start still held: the start is not delayed
    // further by the hook having ended.
    if (fresh) {
        p.due = at + k_delay;
    }
    p.ended_at = at;
    // Rendered once, as the members of the result's JSON object: the write
    // that carries it only adds its envelope (take()).
    std::string end = "\"status\":";
    json_text::append_string(end, to_string(result.status));
    end += ",\"output_str\":";
    append_text_or_null(end, result.output_str);
    end += ",\"output_json\":";
    append_json(end, result.output_json);
    end += ",\"error\":";
    append_text_or_null(end, result.error);
    end += ",\"output_files\":";
    if (files.files.empty()) {
        end += "[]";
    } else {
        append_json(end, files.to_json());
    }
    end += ",\"output_size\":";
    end += std::to_string(files.total_size);
    p.end = std::move(end);
}

std::optional<ResultWriteBehind::Clock::time_point> ResultWriteBehind::next_due() const
{
    std::optional<Clock::time_point> out;
    for (const auto& [id, p] : m_pending) {
        if (!out || p.due < *out) {
            out = p.due;
        }
    }
    return out;
}

std::string ResultWriteBehind::take(Clock::time_point now)
{
    const auto written_at = Clock::now();
    std::string out = "[";
    for (auto it = m_pending.begin(); it != m_pending.end();) {
        const auto& p = it->second;
        if (p.due > now) {
            ++it;
            continue;
        }
        if (out.size() > 1) {
            out += ',';
        }
        out += "{\"id\":";
        json_text::append_string(out, it->first);
        out += ",\"started\":";
        out += p.process_id ? "true" : "false";
        if (p.process_id) {
            out += ",\"process_id\":";
            json_text::append_string(out, *p.process_id);
            out += ",\"started_ago\":";
            json_text::append_number(out, seconds_before(written_at, p.started_at));
        }
        out += ",\"ended\":";
        out += p.end ? "true" : "false";
        if (p.end) {
            out += ",\"ended_ago\":";
            json_text::append_number(out, seconds_before(written_at, p.ended_at));
            out += ',';
            out += *p.end;
        } else {
            out += ",\"status\":\"started\"";
        }
        out += '}';
        it = m_pending.erase(it);
    }
    out += ']';
    return out;
}

} // namespace orch
