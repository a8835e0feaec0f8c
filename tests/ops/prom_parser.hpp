#pragma once

#include <map>
#include <string>
#include <vector>

namespace orch::test {

// A strict parser of the Prometheus text format 0.0.4, for tests: every sample's
// family has one HELP and one TYPE line before its samples, names and label names
// are valid, label values are properly escaped (returned unescaped), values parse,
// histograms have increasing le buckets ending in +Inf equal to _count, and no
// series appears twice. Throws std::runtime_error naming the line otherwise.
struct PromSample {
    std::string name;
    std::map<std::string, std::string> labels;
    double value = 0;
};
struct PromFamily {
    std::string type;
    std::string help;
    std::vector<PromSample> samples;
};
std::map<std::string, PromFamily> parse_prometheus(const std::string& text);

} // namespace orch::test
