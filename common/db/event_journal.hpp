#pragma once

#include <nlohmann/json.hpp>
#include <pqxx/pqxx>

#include <optional>
#include <string>
#include <vector>

// The event journal (migration 0012, `ops.events`): operator actions and the
// decisions a process takes on its own that an operator asks about afterwards.
// Rare by construction: never written per snapshot or per hook.
namespace orch {

// Every kind the programs write, "<noun>.<verb>". The metrics export each from
// the start, and `orchestrator events --kind` refuses a kind or noun not here
// (a typo would silently match nothing).
inline constexpr const char* k_event_kinds[] = {
    "crawl.added",        "crawl.started",      "crawl.sealed",         "crawl.released",  "crawl.backed_off",
    "crawl.cancel_requested", "crawl.cancelled", "crawl.retried",       "crawl.paused",    "crawl.resumed",
    "snapshot.retried",   "snapshot.gave_up",   "recovery.cleaned",     "orchestrator.started",
    "orchestrator.stopped", "process.pruned",   "schedule.added",       "schedule.enabled",
    "schedule.disabled",  "ops.reader_role",    "database.outage",      "crawl.wacz_failed"};

struct Event {
    std::string kind;    // "<noun>.<verb>", e.g. "crawl.cancel_requested"
    std::string message; // one line for a person
    std::optional<std::string> crawl_id;
    std::optional<std::string> snapshot_id;
    std::optional<std::string> process_id; // the acting process's row
    nlohmann::json detail = nlohmann::json::object();
};

// The machine this process acts on (as detected, or --machine-id), recorded with
// each of its events, so that each machine's events can be told apart (the
// orchestrator's metrics count its own). Call once, after parsing options.
void set_event_machine_id(std::string machine_id);

// Who acts: "cli", "orchestrator", "crawl_worker" or "snapshot_worker". The OS
// user is this process's effective user.
// Inside `tx`, so that the event commits with the change it describes; throws
// what pqxx throws.
void record_event(pqxx::transaction_base& tx, const std::string& actor, const Event& event);

// A change and its event in one statement, in autocommit (one round trip,
// committed durably together): `change` is a data-modifying statement with
// RETURNING, its parameters $1..$n in `params` (nullopt = NULL), and the event
// is written once per row it returns: none when it changed nothing. Prepared
// on `conn` as `name` (one definition per name). Returns the events written.
// Must not be called while a transaction is open on `conn`; throws what
// libpqxx throws.
std::size_t record_event_with_change(pqxx::connection& conn, const std::string& name, const std::string& change,
                                     std::vector<std::optional<std::string>> params, const std::string& actor,
                                     const Event& event);

// The same statement, for an event that says what the change found: the
// message and detail may be SQL over the change's RETURNING columns
// (`change.<column>`), so that what the change read (counts, say) is read in
// its own snapshot, not in a round trip before it.
struct ChangeStatement {
    std::string name;    // prepared on the connection as this (one definition per name)
    std::string ctes;    // CTEs (reads or data-modifying) placed before `change`, each followed by ", "; or ""
    std::string change;  // the data-modifying statement, with RETURNING
    std::string message; // SQL of type text; Event::message where it is NULL, or when ""
    std::string detail;  // SQL of type jsonb, merged over Event::detail; "" = none
    std::string returning = "1"; // over the event row: what the call returns
};
// Returns one row of `returning` per event written. Same contract as above.
pqxx::result record_event_with_change(pqxx::connection& conn, const ChangeStatement& statement,
                                      std::vector<std::optional<std::string>> params, const std::string& actor,
                                      const Event& event);
// Prepares `statement`, whose change takes `parameters` parameters, on `conn`
// now: one round trip, off the path of its first execution, which then skips
// the parse and the round trip of the lazy prepare (libpqxx prepares a
// statement when it first runs). Blocks; throws what libpqxx throws.
void prepare_event_with_change(pqxx::connection& conn, const ChangeStatement& statement, std::size_t parameters);

// In a transaction of its own, for a decision with no transaction to join.
// Failures are logged, never thrown: the journal must not stop the work it
// describes.
void record_event(pqxx::connection& conn, const std::string& actor, const Event& event) noexcept;

} // namespace orch
