#include "orchestrator/listing_output.hpp"

#include "orchestrator/table_format.hpp"

namespace orch {

void add_listing_format_flags(CLI::App& cmd, bool& json, bool& text)
{
    auto* json_flag = cmd.add_flag("--json", json, "JSON lines");
    cmd.add_flag("--text", text, "the table even when stdout is not a terminal")->excludes(json_flag);
}

bool json_lines_wanted(bool json, bool text)
{
    return json || (!text && !stdout_is_terminal());
}

void print_json_lines(std::ostream& out, const pqxx::result& rows)
{
    for (const auto& row : rows) {
        out << row[0].c_str() << '\n';
    }
}

std::vector<nlohmann::json> parsed_json_rows(const pqxx::result& rows)
{
    std::vector<nlohmann::json> list;
    for (const auto& row : rows) {
        list.push_back(nlohmann::json::parse(row[0].c_str()));
    }
    return list;
}

} // namespace orch
