#include "tests/crawl/hook_scripts.hpp"

namespace orch::test {

std::string succeeded_record(const std::string& output_str)
{
    return "echo '{\"type\":\"ArchiveResult\",\"status\":\"succeeded\",\"output_str\":\"" + output_str + "\"}'\n";
}

std::string count_snapshot_workers_function(const std::filesystem::path& data_dir)
{
    // Pure bash (no fork per process); a zombie has an empty cmdline and is not counted,
    // nor is a worker's own child between fork and exec (it still shows the worker's cmdline).
    return R"(count() {
  local n=0 f a x s pa
  for f in /proc/[0-9]*/cmdline; do
    { mapfile -d '' -t a < "$f"; } 2>/dev/null || continue
    [[ ${#a[@]} -gt 0 && ${a[0]} == */snapshot_worker ]] || continue
    { s=$(< "${f%/cmdline}/stat"); } 2>/dev/null || continue
    s=${s##*) }; s=${s#* }; s=${s%% *}
    { mapfile -d '' -t pa < "/proc/$s/cmdline"; } 2>/dev/null
    [[ ${#pa[@]} -gt 0 && ${pa[0]} == */snapshot_worker ]] && continue
    for x in "${a[@]}"; do
      if [[ $x == ')" + data_dir.string() + R"(' ]]; then n=$((n + 1)); break; fi
    done
  done
  echo "$n"
}
)";
}

std::string browser_hook()
{
    return R"(pids=()
for i in 1 2 3 4 5 6 7 8 9 10; do
  if (( i % 2 )); then ( trap '' TERM; exec sleep 300 ) & else sleep 300 & fi
  pids+=("$!")
done
echo "$$ ${pids[*]}" > pids.tmp && mv pids.tmp pids
trap 'rm -f ready; exit 0' TERM
echo ready > ready.tmp && mv ready.tmp ready
while true; do wait; done
)";
}

std::string check_browser_hook(const std::filesystem::path& seen)
{
    return R"(b="$CRAWL_DIR/browser"
for i in $(seq 1 200); do [ -f "$b/ready" ] && break; sleep 0.05; done
up=up
[ -f "$b/ready" ] || up=down
n=0
for p in $(cat "$b/pids" 2>/dev/null); do kill -0 "$p" 2>/dev/null || up=down; n=$((n + 1)); done
[ "$n" = 11 ] || up=down
echo "$snap $up" >> ')" + seen.string() + "'\n";
}

std::string slow_hook(const std::filesystem::path& started, const std::filesystem::path& terms)
{
    return "trap 'echo \"$snap $(date +%s.%N)\" >> \"" + terms.string() + "\"; exit 1' TERM\n" + "echo \"$snap\" >> \"" +
           started.string() + "\"\nsleep 60 &\nwait\n";
}

std::string gated_hook(const std::filesystem::path& started, const std::filesystem::path& go)
{
    return "echo \"$snap\" >> '" + started.string() + "'\n" + "for i in $(seq 1 600); do [ -e '" + go.string() +
           "' ] && break; sleep 0.05; done\n" + succeeded_record("done");
}

} // namespace orch::test
