#include "orchestrator/event_table.hpp"

#include "orchestrator/table_format.hpp"

namespace orch {
namespace {

std::string text(const nlohmann::json& e, const char* key)
{
    const auto& v = e.at(key);
    return v.is_null() ? std::string() : v.get<std::string>();
}

} // namespace

void print_event_table(std::ostream& out, const nlohmann::json& events, bool crawl_column)
{
    std::vector<std::string> header{"AT", "EVENT", "BY", "MESSAGE"};
    if (crawl_column) {
        header.insert(header.begin() + 3, "CRAWL");
    }
    TextTable table(header);
    for (const auto& e : events) {
        // "2026-11-25T06:40:12.345678+00:00" -> "2026-11-25 06:40:12"
        auto at = text(e, "at");
        if (at.size() >= 19) {
            at = at.substr(0, 10) + " " + at.substr(11, 8);
        }
        auto by = text(e, "actor");
        if (const auto user = text(e, "os_user"); !user.empty()) {
            by += " (" + user + ")";
        }
        std::vector<std::string> row{at, text(e, "kind"), by, one_line(text(e, "message"), 110)};
        if (crawl_column) {
            row.insert(row.begin() + 3, short_id(text(e, "crawl_id")));
        }
        table.add_row(std::move(row));
    }
    if (!table.empty()) {
        table.print(out);
    }
}

} // namespace orch
