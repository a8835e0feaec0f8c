#pragma once

#include <nlohmann/json.hpp>

#include <optional>
#include <ostream>
#include <string>
#include <vector>

// Plain-text output of the ops commands: aligned columns, durations, ids.
namespace orch {

// Columns padded to their widest cell, two spaces apart; the last column is not
// padded. Cells are printed as given (no escaping).
class TextTable {
public:
    explicit TextTable(std::vector<std::string> header) : m_rows{std::move(header)} {}
    void add_row(std::vector<std::string> row) { m_rows.push_back(std::move(row)); }
    bool empty() const { return m_rows.size() <= 1; }
    void print(std::ostream& out) const;

private:
    std::vector<std::vector<std::string>> m_rows; // [0] = header
};

// "850ms", "42s", "3m05s", "2h04m", "3d02h"; "-" for nullopt.
std::string format_duration(std::optional<double> seconds);
// CPU seconds, finer than a duration below a minute: "0.4ms", "12.3ms",
// "1.75s"; a longer one as format_duration. "-" for none.
std::string format_cpu(std::optional<double> seconds);

// "0", "1 (exit)", "SIGKILL" style: exit code, or the signal name for a signal death; "-" if neither.
std::string format_exit(std::optional<int> exit_code, std::optional<int> term_signal);

// A JSON object's field as cell text: a string as it is, another value as JSON,
// `absent` for a missing or null field.
std::string field_text(const nlohmann::json& object, const char* key, const std::string& absent = "-");

// A timestamp as PostgreSQL's JSON gives it ("2026-11-25T06:40:12.345+00:00"),
// cut to the second: "2026-11-25 06:40:12". Other text is returned unchanged.
std::string short_timestamp(const std::string& iso);

// The first 8 characters of a UUID ("-" for an empty one).
std::string short_id(const std::string& id);

// True when stdout is a terminal (ps defaults to JSON lines otherwise).
bool stdout_is_terminal();

// The line of text cut to `width` characters with "…" and newlines folded to spaces.
std::string one_line(const std::string& text, std::size_t width);

// The last non-empty line of `text`, cut like one_line() (for stderr tails).
std::string last_line(const std::string& text, std::size_t width);

} // namespace orch
