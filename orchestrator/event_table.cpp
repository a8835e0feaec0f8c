#include "orchestrator/event_table.hpp"

#include "orchestrator/table_format.hpp"

namespace orch {

void print_event_table(std::ostream& out, const nlohmann::json& events, bool crawl_column)
{
    std::vector<std::string> header{"AT", "EVENT", "BY", "MESSAGE"};
    if (crawl_column) {
        header.insert(header.begin() + 3, "CRAWL");
    }
    TextTable table(header);
    for (const auto& e : events) {
        const auto at = short_timestamp(field_text(e, "at", ""));
        auto by = field_text(e, "actor", "");
        if (const auto user = field_text(e, "os_user", ""); !user.empty()) {
            by += " (" + user + ")";
        }
        std::vector<std::string> row{at, field_text(e, "kind", ""), by,
                                     one_line(field_text(e, "message", ""), 110)};
        if (crawl_column) {
            row.insert(row.begin() + 3, short_id(field_text(e, "crawl_id", "")));
        }
        table.add_row(std::move(row));
    }
    if (!table.empty()) {
        table.print(out);
    }
}

} // namespace orch
