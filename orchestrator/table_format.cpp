#include "orchestrator/table_format.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <csignal>
#include <cmath>
#include <cstring>
#include <unistd.h>

namespace orch {

std::string field_text(const nlohmann::json& object, const char* key, const std::string& absent)
{
    auto it = object.find(key);
    if (it == object.end() || it->is_null()) {
        return absent;
    }
    return it->is_string() ? it->get<std::string>() : it->dump();
}

std::string short_timestamp(const std::string& iso)
{
    if (iso.size() >= 19 && iso[10] == 'T') {
        return iso.substr(0, 10) + " " + iso.substr(11, 8);
    }
    return iso;
}

void TextTable::print(std::ostream& out) const
{
    std::vector<std::size_t> widths;
    for (const auto& row : m_rows) {
        widths.resize(std::max(widths.size(), row.size()), 0);
        for (std::size_t i = 0; i < row.size(); ++i) {
            widths[i] = std::max(widths[i], row[i].size());
        }
    }
    for (const auto& row : m_rows) {
        std::string line;
        for (std::size_t i = 0; i < row.size(); ++i) {
            line += row[i];
            if (i + 1 < row.size()) {
                line.append(widths[i] - row[i].size() + 2, ' ');
            }
        }
        while (!line.empty() && line.back() == ' ') {
            line.pop_back();
        }
        out << line << '\n';
    }
}

std::string format_duration(std::optional<double> seconds)
{
    if (!seconds || std::isnan(*seconds)) {
        return "-";
    }
    double s = std::max(0.0, *seconds);
    if (s < 1.0) {
        return fmt::format("{}ms", static_cast<long>(s * 1000));
    }
    auto total = static_cast<long>(s);
    if (total < 60) {
        return fmt::format("{}s", total);
    }
    if (total < 3600) {
        return fmt::format("{}m{:02}s", total / 60, total % 60);
    }
    if (total < 86400) {
        return fmt::format("{}h{:02}m", total / 3600, (total % 3600) / 60);
    }
    return fmt::format("{}d{:02}h", total / 86400, (total % 86400) / 3600);
}

std::string format_cpu(std::optional<double> seconds)
{
    if (!seconds || std::isnan(*seconds)) {
        return "-";
    }
    const double s = std::max(0.0, *seconds);
    if (s < 1.0) {
        return fmt::format("{:.1f}ms", s * 1000);
    }
    if (s < 60.0) {
        return fmt::format("{:.2f}s", s);
    }
    return format_duration(s);
}

std::string format_exit(std::optional<int> exit_code, std::optional<int> term_signal)
{
    if (term_signal) {
        const char* abbrev = ::sigabbrev_np(*term_signal);
        return abbrev != nullptr ? fmt::format("SIG{}", abbrev) : fmt::format("SIG{}", *term_signal);
    }
    if (exit_code) {
        return std::to_string(*exit_code);
    }
    return "-";
}

std::string short_id(const std::string& id)
{
    return id.empty() ? "-" : id.substr(0, 8);
}

bool stdout_is_terminal()
{
    return ::isatty(STDOUT_FILENO) == 1;
}

std::string one_line(const std::string& text, std::size_t width)
{
    std::string out;
    for (char c : text) {
        out += (c == '\n' || c == '\r' || c == '\t') ? ' ' : c;
    }
    while (!out.empty() && out.back() == ' ') {
        out.pop_back();
    }
    if (out.size() > width) {
        out.resize(width > 3 ? width - 3 : width);
        out += "...";
    }
    return out;
}

std::string last_line(const std::string& text, std::size_t width)
{
    auto end = text.find_last_not_of(" \t\r\n");
    if (end == std::string::npos) {
        return "";
    }
    auto start = text.rfind('\n', end);
    start = start == std::string::npos ? 0 : start + 1;
    return one_line(text.substr(start, end + 1 - start), width);
}

} // namespace orch
