#include "common/app/worker_command_line.hpp"

#include "common/app/entry_point.hpp"

namespace orch {

WorkerCommandLine::WorkerCommandLine(const std::string& kind, const std::string& description, std::string& id,
                                     std::string& process_id)
    : m_program(kind + "_worker"), m_app(description, m_program)
{
    add_common_options(m_app, m_common);
    m_app.add_option("--" + kind + "-id", id, "the " + kind + " to run")->required();
    m_app.add_option("--process-id", process_id, "process row prepared by the parent (internal)");
}

int WorkerCommandLine::run(int argc, char** argv, const std::function<ExitCode(const CommonOptions&)>& body)
{
    return guarded_main(m_app, argc, argv, [&] {
        configure_logging(m_program, m_common);
        return to_int(body(m_common));
    });
}

} // namespace orch
