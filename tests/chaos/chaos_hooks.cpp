#include "tests/chaos/chaos_hooks.hpp"

#include <fstream>
#include <sstream>

namespace orch::chaos {

const char* const k_chaos_plugin = "chaos";

namespace {

namespace fs = std::filesystem;

// $1 = hook label; sets url/snap/idx, takes the per-(snapshot, hook) lock and records the start.
std::string preamble(const fs::path& records, const std::string& label)
{
    return R"SH(#!/usr/bin/env bash
set -u
url=""; snap=""
for arg in "$@"; do
  case "$arg" in
    --url=*) url="${arg#--url=}" ;;
    --snapshot-id=*) snap="${arg#--snapshot-id=}" ;;
  esac
done
idx="${url##*/}"
rec=")SH" + records.string() + "/${snap}." +
           label + R"SH("
exec 9>>"$rec.lock"
if ! flock -n 9; then echo "overlap $$ $(date +%s%N)" >> "$rec"; fi
echo "start $$ $(date +%s%N) $url" >> "$rec"
finish() {
  echo "end $$ $(date +%s%N) ok" >> "$rec"
  echo '{"type":"ArchiveResult","status":"succeeded","output_str":"ok"}'
  exit 0
}
)SH";
}

std::string hostile_body(FaultKind kind, const std::string& marker)
{
    switch (kind) {
    case FaultKind::hook_flood:
        // One 8 MB line without a newline, then 100,000 short lines, on stdout; 1 MB on stderr.
        return "if (( idx % 5 == 0 )); then\n"
               "  head -c 8000000 /dev/zero | tr '\\0' x\n"
               "  echo\n"
               "  yes '{\"type\":\"Log\",\"n\":1}' | head -n 100000\n"
               "  head -c 1000000 /dev/zero | tr '\\0' y >&2\n"
               "fi\n";
    case FaultKind::hook_fork:
        // 1,000 children that outlive the hook (which exits 0 at once).
        return "if [[ $idx == 5 ]]; then\n"
               "  exec 9>&-\n"
               "  for i in $(seq 1 1000); do sleep 300 & done\n"
               "  finish\n"
               "fi\n";
    case FaultKind::hook_ignore_term:
        return "if (( idx % 5 == 0 )); then\n"
               "  trap '' TERM\n"
               "  while :; do sleep 0.5; done\n"
               "fi\n";
    case FaultKind::hook_setsid:
        // Double fork + setsid; the second one also with the environment cleared
        // (no cookie). Both name the trial root so the OS scan can find them.
        return "if (( idx % 5 == 0 )); then\n"
               "  ( setsid bash -c 'exec 9>&-; while :; do sleep 1; done; : " +
               marker +
               "' </dev/null >/dev/null 2>&1 & )\n"
               "  ( exec 9>&-; setsid env -i /bin/bash -c 'while :; do sleep 1; done; : " +
               marker +
               "' </dev/null >/dev/null 2>&1 & )\n"
               "fi\n";
    case FaultKind::hook_hang:
        return "if (( idx % 5 == 0 )); then\n"
               "  sleep 100000 &\n"
               "  wait\n"
               "fi\n";
    default:
        return "";
    }
}

void write_file(const fs::path& path, const std::string& text)
{
    std::ofstream(path) << text;
    fs::permissions(path, fs::perms::owner_all | fs::perms::group_read | fs::perms::others_read);
}

} // namespace

void write_chaos_plugin(const fs::path& plugins_dir, const fs::path& records_dir, FaultKind kind,
                        const std::string& marker)
{
    auto dir = plugins_dir / k_chaos_plugin;
    fs::create_directories(dir);
    fs::create_directories(records_dir);
    std::ofstream(dir / "config.json") << "{\"timeout\": 3}\n";
    write_file(dir / "on_Snapshot__10_fetch.sh",
               preamble(records_dir, "fetch") + "sleep 0.$(( RANDOM % 3 + 1 ))\nfinish\n");
    write_file(dir / "on_Snapshot__20_extract.sh", preamble(records_dir, "extract") + "sleep 0.1\nfinish\n");
    if (is_hostile_hook(kind)) {
        write_file(dir / "on_Snapshot__15_hostile.sh",
                   preamble(records_dir, "hostile") + hostile_body(kind, marker) + "finish\n");
    }
}

int hostile_runs(const fs::path& records_dir, FaultKind kind)
{
    int runs = 0;
    std::error_code ec;
    for (const auto& entry : fs::directory_iterator(records_dir, ec)) {
        if (entry.path().extension() != ".hostile") {
            continue;
        }
        std::ifstream in(entry.path());
        for (std::string line; std::getline(in, line);) {
            std::istringstream ls(line);
            std::string what, pid, t, url;
            ls >> what >> pid >> t >> url;
            const auto last = url.substr(url.rfind('/') + 1);
            if (what != "start" || last.empty() || last.find_first_not_of("0123456789") != std::string::npos) {
                continue;
            }
            const auto idx = std::stol(last);
            runs += (kind == FaultKind::hook_fork ? idx == 5 : idx % 5 == 0) ? 1 : 0;
        }
    }
    return runs;
}

void write_noop_plugin(const fs::path& plugins_dir)
{
    auto dir = plugins_dir / "noop";
    fs::create_directories(dir);
    std::ofstream(dir / "config.json") << "{\"timeout\": 30}\n";
    write_file(dir / "on_Snapshot__10_noop.sh",
               "#!/usr/bin/env bash\necho '{\"type\":\"ArchiveResult\",\"status\":\"succeeded\"}'\n");
}

} // namespace orch::chaos
