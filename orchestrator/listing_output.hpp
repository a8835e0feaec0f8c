#pragma once

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>
#include <pqxx/pqxx>

#include <ostream>
#include <vector>

namespace orch {

// The listings of the ops commands (ps, crawls, events): JSON lines or a table.
// Crawls and events query one JSON object's text per row, in column 0, so that
// their JSON lines are what the server built.

// Adds a listing's --json (JSON lines) and --text (the table even when stdout
// is not a terminal) flags to `cmd`; they exclude each other.
void add_listing_format_flags(CLI::App& cmd, bool& json, bool& text);

// Whether a listing prints JSON lines: with --json, or without --text when
// stdout is not a terminal.
bool json_lines_wanted(bool json, bool text);

// Writes each row's text as one line on `out` (JSON lines), as it came.
void print_json_lines(std::ostream& out, const pqxx::result& rows);

// Each row's text parsed, for a table. Throws nlohmann::json::parse_error for
// a row that is not JSON.
std::vector<nlohmann::json> parsed_json_rows(const pqxx::result& rows);

} // namespace orch
