#include "tests/ops/prom_parser.hpp"

#include <fmt/format.h>

#include <cmath>
#include <set>
#include <sstream>
#include <stdexcept>

namespace orch::test {
namespace {

bool valid_name(const std::string& s, bool colon)
{
    if (s.empty()) {
        return false;
    }
    for (std::size_t i = 0; i < s.size(); ++i) {
        char c = s[i];
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || (colon && c == ':') ||
              (i > 0 && c >= '0' && c <= '9'))) {
            return false;
        }
    }
    return true;
}

double parse_value(const std::string& s)
{
    if (s == "+Inf") {
        return INFINITY;
    }
    if (s == "-Inf") {
        return -INFINITY;
    }
    if (s == "NaN") {
        return NAN;
    }
    std::size_t used = 0;
    double v = std::stod(s, &used);
    if (used != s.size()) {
        throw std::runtime_error("bad value " + s);
    }
    return v;
}

std::string family_of(const std::string& sample, const std::map<std::string, PromFamily>& families)
{
    for (const char* suffix : {"_bucket", "_sum", "_count"}) {
        std::string sfx = suffix;
        if (sample.size() > sfx.size() && sample.compare(sample.size() - sfx.size(), sfx.size(), sfx) == 0) {
            auto base = sample.substr(0, sample.size() - sfx.size());
            auto it = families.find(base);
            if (it != families.end() && it->second.type == "histogram") {
                return base;
            }
        }
    }
    return sample;
}

} // namespace

std::map<std::string, PromFamily> parse_prometheus(const std::string& text)
{
    std::map<std::string, PromFamily> families;
    std::set<std::string> seen_series;
    std::set<std::string> help_seen;
    std::istringstream in(text);
    std::string line;
    int n = 0;
    if (!text.empty() && text.back() != '\n') {
        throw std::runtime_error("the exposition must end with a newline");
    }
    while (std::getline(in, line)) {
        ++n;
        auto fail = [&](const std::string& why) {
            throw std::runtime_error(fmt::format("line {}: {}: {}", n, why, line));
        };
        if (line.empty()) {
            fail("empty line");
        }
        if (line[0] == '#') {
            std::istringstream words(line);
            std::string hash, kind, name;
            words >> hash >> kind >> name;
            if (hash != "#" || (kind != "HELP" && kind != "TYPE") || !valid_name(name, true)) {
                fail("bad comment");
            }
            std::string rest;
            std::getline(words, rest);
            rest = rest.empty() ? rest : rest.substr(1);
            if (kind == "HELP") {
                if (!help_seen.insert(name).second) {
                    fail("second HELP");
                }
                families[name].help = rest;
            } else {
                if (!families[name].type.empty()) {
                    fail("second TYPE");
                }
                if (rest != "counter" && rest != "gauge" && rest != "histogram" && rest != "summary" &&
                    rest != "untyped") {
                    fail("bad type");
                }
                if (!families[name].samples.empty()) {
                    fail("TYPE after samples");
                }
                families[name].type = rest;
            }
            continue;
        }
        PromSample s;
        std::size_t i = 0;
        while (i < line.size() && line[i] != '{' && line[i] != ' ') {
            ++i;
        }
        s.name = line.substr(0, i);
        if (!valid_name(s.name, true)) {
            fail("bad metric name");
        }
        if (i < line.size() && line[i] == '{') {
            ++i;
            while (i < line.size() && line[i] != '}') {
                auto eq = line.find('=', i);
                if (eq == std::string::npos) {
                    fail("label without =");
                }
                auto lname = line.substr(i, eq - i);
                if (!valid_name(lname, false) || eq + 1 >= line.size() || line[eq + 1] != '"') {
                    fail("bad label name");
                }
                std::string value;
                std::size_t j = eq + 2;
                for (;; ++j) {
                    if (j >= line.size()) {
                        fail("unterminated label value");
                    }
                    if (line[j] == '"') {
                        break;
                    }
                    if (line[j] == '\\') {
                        ++j;
                        if (j >= line.size()) {
                            fail("dangling escape");
                        }
                        if (line[j] == 'n') {
                            value += '\n';
                        } else if (line[j] == '\\' || line[j] == '"') {
                            value += line[j];
                        } else {
                            fail("bad escape");
                        }
                    } else {
                        value += line[j];
                    }
                }
                if (!s.labels.emplace(lname, value).second) {
                    fail("duplicate label");
                }
                i = j + 1;
                if (i < line.size() && line[i] == ',') {
                    ++i;
                }
            }
            if (i >= line.size()) {
                fail("unterminated label set");
            }
            ++i;
        }
        if (i >= line.size() || line[i] != ' ') {
            fail("no value");
        }
        auto value_text = line.substr(i + 1);
        if (value_text.find(' ') != std::string::npos) {
            fail("timestamps are not expected here");
        }
        try {
            s.value = parse_value(value_text);
        } catch (const std::exception&) {
            fail("bad value");
        }
        auto family = family_of(s.name, families);
        auto it = families.find(family);
        if (it == families.end() || it->second.type.empty() || !help_seen.count(family)) {
            fail("sample before its HELP and TYPE");
        }
        if (!seen_series.insert(line.substr(0, i)).second) {
            fail("duplicate series");
        }
        if (it->second.type == "counter" && !(s.value >= 0)) {
            fail("negative counter");
        }
        it->second.samples.push_back(s);
    }
    // Histograms: per label set, buckets increasing in le and cumulative, +Inf == _count.
    for (const auto& [name, f] : families) {
        if (f.type != "histogram") {
            continue;
        }
        std::map<std::map<std::string, std::string>, std::vector<std::pair<double, double>>> buckets;
        std::map<std::map<std::string, std::string>, double> counts;
        for (const auto& s : f.samples) {
            auto labels = s.labels;
            if (s.name == name + "_bucket") {
                if (!labels.count("le")) {
                    throw std::runtime_error(name + ": bucket without le");
                }
                double le = parse_value(labels["le"]);
                labels.erase("le");
                buckets[labels].emplace_back(le, s.value);
            } else if (s.name == name + "_count") {
                counts[labels] = s.value;
            } else if (s.name != name + "_sum") {
                throw std::runtime_error(name + ": unexpected sample " + s.name);
            }
        }
        for (const auto& [labels, list] : buckets) {
            for (std::size_t k = 1; k < list.size(); ++k) {
                if (!(list[k].first > list[k - 1].first) || list[k].second < list[k - 1].second) {
                    throw std::runtime_error(name + ": buckets not increasing/cumulative");
                }
            }
            if (list.empty() || !std::isinf(list.back().first) || !counts.count(labels) ||
                counts[labels] != list.back().second) {
                throw std::runtime_error(name + ": +Inf bucket missing or not equal to _count");
            }
        }
    }
    return families;
}

} // namespace orch::test
