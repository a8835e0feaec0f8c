#include "snapshot_worker/seal_statements.hpp"

#include "common/base/json_text.hpp"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

namespace orch::seal_sql {

// A data-modifying CTE body: one queued archive_result for snapshot `snapshot`
// per hook in the JSON array parameter `hooks` (hooks_json), with `from` ("t, ")
// joined in and `where` ("WHERE ...") applied; returns the rows it made
// (hook_name, id, status, snapshot_id). Results that exist already are kept as
// they are.
std::string create_results(const std::string& snapshot, const std::string& from, const std::string& hooks,
                           const std::string& where)
{
    return fmt::format("INSERT INTO archive_result (snapshot_id, plugin, hook_name) "
                       "SELECT {}, e->>'plugin', e->>'hook' FROM {}jsonb_array_elements({}::jsonb) e {} "
                       "ON CONFLICT (snapshot_id, hook_name) DO NOTHING RETURNING hook_name, id, status, snapshot_id",
                       snapshot, from, hooks, where);
}

// The hooks whose results a snapshot gets, as [{"plugin", "hook"}, ...].
std::string hooks_json(const std::vector<Hook>& hooks)
{
    std::string out = "[";
    for (const auto& h : hooks) {
        if (out.size() > 1) {
            out += ',';
        }
        out += '{';
        json_text::append_key(out, "plugin");
        json_text::append_string(out, h.plugin);
        out += ',';
        json_text::append_key(out, "hook");
        json_text::append_string(out, h.id());
        out += '}';
    }
    return out + ']';
}

// The held writes (result_write_behind.cpp) in the JSON array parameter `param`,
// as rows `w`: one per result.
std::string held_writes(const std::string& param)
{
    return fmt::format("jsonb_to_recordset({}::jsonb) AS w(id uuid, status text, started boolean, "
                       "  process_id uuid, started_ago double precision, ended boolean, "
                       "  ended_ago double precision, output_str text, output_json jsonb, error text, "
                       "  output_files jsonb, output_size bigint)",
                       param);
}


// The result side of the seal of `snapshot` (work_states::SnapshotSeal, which
// owns the sealing itself): `held` and `counts`, the outcome's input, derived
// from the stored results and those still held (`writes`, a JSON array
// parameter; the CTEs all see the rows as they were before the statement, and
// we hold the lease: nobody else writes them meanwhile), then `recorded`. The
// held results are written only if the seal happened, which is their fence:
// the snapshot row, updated by `sealed` in this very statement, cannot be
// locked again by it.
// With `held_none`, for a seal with no held results (`writes` is '[]': every
// result was written before, as when the seal comes more than the write-behind
// window after the last one, behind a background hook's teardown say, or when
// no hook ran): no `held` and no `recorded`, the outcome counted from the table
// alone (seal 60 us instead of 73, `scripts/bench` row 3). Such a statement
// seals nothing unless `writes` is empty indeed: a caller's mistake can cost a
// lease, not a result.
work_states::SnapshotSeal result_seal(const std::string& snapshot, const std::string& writes, bool held_none,
                                      const std::string& suffix)
{
    work_states::SnapshotSeal seal;
    seal.snapshot = snapshot;
    seal.suffix = suffix;
    seal.before =
        held_none ? fmt::format("counts{1} AS (SELECT count(*) FILTER (WHERE a.status = 'failed') AS failed, "
                                "           count(*) AS total FROM archive_result a WHERE a.snapshot_id = {0}), ",
                                snapshot, suffix)
                  : fmt::format("held{2} AS (SELECT * FROM {1}), "
                                "counts{2} AS (SELECT count(*) FILTER (WHERE coalesce(w.status, a.status) = 'failed') "
                                "           AS failed, count(*) AS total "
                                "           FROM archive_result a LEFT JOIN held{2} w ON w.id = a.id "
                                "           WHERE a.snapshot_id = {0}), ",
                                snapshot, held_writes(writes), suffix);
    seal.condition = held_none ? fmt::format(" AND {}::jsonb = '[]'::jsonb", writes) : "";
    seal.after = held_none ? ""
                           : fmt::format(", recorded{2} AS ({0} FROM held{2} w WHERE a.id = w.id AND a.snapshot_id = {1} "
                                         "  AND EXISTS (SELECT 1 FROM sealed{2}))",
                                         k_write_held, snapshot, suffix);
    return seal;
}

// The parameters of a seal statement: the fixed ones, then those of `exits`.
std::vector<std::optional<std::string>> seal_parameters(std::vector<std::optional<std::string>> fixed,
                                                        const std::vector<process_table::HeldExit>& exits)
{
    const auto more = process_table::exits_parameters(exits);
    fixed.insert(fixed.end(), more.begin(), more.end());
    return fixed;
}

std::map<std::string, ResultState> results_of(const pqxx::field& field)
{
    std::map<std::string, ResultState> out;
    if (field.is_null()) {
        return out;
    }
    const auto results = nlohmann::json::parse(field.c_str());
    for (const auto& [hook, state] : results.items()) {
        out[hook] = ResultState{state.at(0).get<std::string>(), state.at(1).get<std::string>()};
    }
    return out;
}

} // namespace orch::seal_sql
