#pragma once

// Internal to process_table.cpp and process_exit_writes.cpp: how process-row
// values become statement parameters and back. Not a public interface.

#include "common/base/utf8.hpp"
#include "common/supervision/resource_usage.hpp"

#include <pqxx/pqxx>

#include <algorithm>
#include <chrono>
#include <optional>
#include <string>

namespace orch::process_table {

// Text parameter: nullptr is sent as SQL NULL.
inline const char* param(const std::optional<std::string>& value)
{
    return value ? value->c_str() : nullptr;
}

template <typename T>
inline std::optional<std::string> text(const std::optional<T>& value)
{
    if (!value) {
        return std::nullopt;
    }
    return std::to_string(*value);
}

// One field of `usage` as a parameter; NULL without a usage.
inline std::optional<std::string> usage_text(const std::optional<ResourceUsage>& usage, double ResourceUsage::*field)
{
    if (!usage) {
        return std::nullopt;
    }
    return pqxx::to_string((*usage).*field);
}

template <typename T>
inline std::optional<T> get(const pqxx::field& field)
{
    if (field.is_null()) {
        return std::nullopt;
    }
    return field.as<T>();
}

inline double seconds_ago(std::chrono::steady_clock::time_point now, std::chrono::steady_clock::time_point then)
{
    return std::max(0.0, std::chrono::duration<double>(now - then).count());
}

// A tail as the database can store it.
inline std::optional<std::string> storable(const std::optional<std::string>& tail)
{
    return tail ? std::optional<std::string>(without_nul(*tail)) : std::nullopt;
}

} // namespace orch::process_table
