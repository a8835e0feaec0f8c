#include "tests/chaos/chaos_report.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <map>

namespace orch::chaos {

namespace {

struct Row {
    int trials = 0;
    int injected = 0;
    int violations = 0;
    std::vector<double> recover;
};

std::string median_max(std::vector<double> v)
{
    if (v.empty()) {
        return fmt::format("{:>8} {:>8}", "-", "-");
    }
    std::sort(v.begin(), v.end());
    double median = v.size() % 2 ? v[v.size() / 2] : (v[v.size() / 2 - 1] + v[v.size() / 2]) / 2;
    return fmt::format("{:>8.1f} {:>8.1f}", median, v.back());
}

int injections_needed(int trials, InjectionRule rule)
{
    return rule == InjectionRule::once_per_kind ? 1 : (trials + 1) / 2;
}

} // namespace

std::vector<std::string> kinds_short_of_injections(const std::vector<TrialResult>& trials, InjectionRule rule)
{
    std::map<FaultKind, std::pair<int, int>> by_kind;  // injected, trials
    for (const auto& t : trials) {
        by_kind[t.kind].first += t.injected ? 1 : 0;
        by_kind[t.kind].second += 1;
    }
    std::vector<std::string> out;
    for (const auto& [kind, n] : by_kind) {
        if (n.first < injections_needed(n.second, rule)) {
            out.push_back(fmt::format("{} {}/{}", to_string(kind), n.first, n.second));
        }
    }
    return out;
}

ChaosVerdict print_report(std::ostream& out, const std::vector<TrialResult>& trials,
                          const std::vector<LoadResult>& loads, double wall_s, InjectionRule rule)
{
    std::map<FaultKind, Row> rows;
    Row total;
    int unsealed = 0;
    for (const auto& t : trials) {
        for (Row* r : {&rows[t.kind], &total}) {
            r->trials += 1;
            r->injected += t.injected ? 1 : 0;
            r->violations += static_cast<int>(t.violations.size());
            if (t.recover_s >= 0) {
                r->recover.push_back(t.recover_s);
            }
        }
        unsealed += t.recover_s < 0 ? 1 : 0;
    }
    out << "\n== chaos: " << trials.size() << " trials, " << fmt::format("{:.0f}", wall_s) << " s ==\n";
    out << fmt::format("{:<22} {:>6} {:>15} {:>10} {:>8} {:>8}\n", "fault", "trials", "injected/trials",
                       "violations", "rec.med", "rec.max");
    for (const auto& [kind, r] : rows) {
        const bool short_of = r.injected < injections_needed(r.trials, rule);
        out << fmt::format("{:<22} {:>6} {:>15} {:>10} {}{}\n", to_string(kind), r.trials,
                           fmt::format("{}/{}", r.injected, r.trials), r.violations, median_max(r.recover),
                           short_of ? "  TOO FEW INJECTED" : "");
    }
    out << fmt::format("{:<22} {:>6} {:>15} {:>10} {}\n", "TOTAL", total.trials,
                       fmt::format("{}/{}", total.injected, total.trials), total.violations,
                       median_max(total.recover));
    out << "(time to recover = seconds from the fault to the crawl sealed; a fault is not injected when its target "
           "never showed up, e.g. the crawl finished first; "
        << (rule == InjectionRule::once_per_kind ? "every kind must be injected at least once"
                                                 : "at least half of each kind's trials must be injected")
        << ")\n";
    ChaosVerdict verdict;
    verdict.violations = static_cast<std::size_t>(total.violations);
    verdict.short_kinds = kinds_short_of_injections(trials, rule);
    for (const auto& t : trials) {
        if (!t.violations.empty() || !t.notes.empty() || !t.injected) {
            out << fmt::format("\ntrial {} {} ({} URLs, {}){}: {}\n", t.index, to_string(t.kind), t.urls,
                               t.daemon ? "daemon" : "one-shot", t.injected ? "" : " NOT INJECTED", t.detail);
            for (const auto& v : t.violations) {
                out << "  VIOLATION " << v << "\n";
            }
            for (const auto& n : t.notes) {
                out << "  note " << n << "\n";
            }
        }
    }
    if (!loads.empty()) {
        out << "\n== load ==\n";
        out << fmt::format("{:<28} {:>6} {:>6} {:>8} {:>16} {:>5} {:>10} {:>10} {:>10} {:>10}\n", "run", "crawls",
                           "URLs", "seconds", "process kind", "procs", "RSS first", "RSS last", "RSS max", "HWM max");
        for (const auto& l : loads) {
            bool first = true;
            for (const auto& m : l.memory) {
                out << fmt::format("{:<28} {:>6} {:>6} {:>8} {:>16} {:>5} {:>7} kB {:>7} kB {:>7} kB {:>7} kB\n",
                                   first ? l.name : "", first ? std::to_string(l.crawls) : "",
                                   first ? std::to_string(l.urls) : "",
                                   first ? fmt::format("{:.0f}", l.seconds) : "", m.kind, m.processes,
                                   m.first_rss_kb, m.last_rss_kb, m.max_rss_kb, m.max_hwm_kb);
                first = false;
            }
            for (const auto& v : l.violations) {
                out << "  VIOLATION " << l.name << ": " << v << "\n";
            }
            verdict.violations += l.violations.size();
        }
    }
    out << "\ninvariant violations: " << verdict.violations << "\n";
    if (!verdict.short_kinds.empty()) {
        out << "fault kinds injected too few times:";
        for (const auto& k : verdict.short_kinds) {
            out << " " << k;
        }
        out << "\n";
    }
    return verdict;
}

} // namespace orch::chaos
