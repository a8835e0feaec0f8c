#include "snapshot_worker/result_write_behind.hpp"

#include "common/utf8.hpp"

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

nlohmann::json text_or_null(const std::optional<std::string>& s)
{
    return s ? nlohmann::json(orch::without_nul(*s)) : nlohmann::json();
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
    p.end = nlohmann::json{{"status", std::string(to_string(result.status))},
                           {"output_str", text_or_null(result.output_str)},
                           {"output_json", json_without_nul(result.output_json)},
                           {"error", text_or_null(result.error)},
                           {"output_files", json_without_nul(files.to_json())},
                           {"output_size", files.total_size}};
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

nlohmann::json ResultWriteBehind::take(Clock::time_point now)
{
    const auto written_at = Clock::now();
    auto out = nlohmann::json::array();
    for (auto it = m_pending.begin(); it != m_pending.end();) {
        const auto& p = it->second;
        if (p.due > now) {
            ++it;
            continue;
        }
        nlohmann::json w = p.end ? *p.end : nlohmann::json{{"status", "started"}};
        w["id"] = it->first;
        w["started"] = p.process_id.has_value();
        if (p.process_id) {
            w["process_id"] = *p.process_id;
            w["started_ago"] = seconds_before(written_at, p.started_at);
        }
        w["ended"] = p.end.has_value();
        if (p.end) {
            w["ended_ago"] = seconds_before(written_at, p.ended_at);
        }
        out.push_back(std::move(w));
        it = m_pending.erase(it);
    }
    return out;
}

} // namespace orch
