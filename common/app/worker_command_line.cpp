#include "common/app/worker_command_line.hpp"

#include "common/app/entry_point.hpp"

namespace orch {

WorkerCommandLine::WorkerCommandLine(const std::string& kind, const std::string& description, std::string& id,
                                     WorkerArguments& arguments)
    : m_program(kind + "_worker"), m_app(description, m_program), m_arguments(arguments)
{
    add_common_options(m_app, m_common);
    m_app.add_option("--" + kind + "-id", id, "the " + kind + " to run")->required();
    m_app.add_option("--process-id", m_arguments.process_id, "process row prepared by the parent (internal)");
}

void WorkerCommandLine::add_plugins_dir()
{
    m_app.add_option("--plugins-dir", m_arguments.plugins_dir, "extra plugins directory")->envname("PLUGINS_DIR");
}

int WorkerCommandLine::run(int argc, char** argv, const std::function<ExitCode(const CommonOptions&)>& body)
{
    return guarded_main(m_app, argc, argv, [&] {
        configure_logging(m_program, m_common);
        return to_int(body(m_common));
    });
}

} // namespace orch
