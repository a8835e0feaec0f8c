# Hook contract: discovery, plugin config, hook env/argv/launch request, output parsing, output files,
# and the JSON text written for the statements that record them.
target_sources(common PRIVATE
  ${CMAKE_CURRENT_LIST_DIR}/utf8.cpp
  ${CMAKE_CURRENT_LIST_DIR}/bounded_json.cpp
  ${CMAKE_CURRENT_LIST_DIR}/json_text.cpp
  ${CMAKE_CURRENT_LIST_DIR}/env_map.cpp
  ${CMAKE_CURRENT_LIST_DIR}/hook_discovery.cpp
  ${CMAKE_CURRENT_LIST_DIR}/plugin_config.cpp
  ${CMAKE_CURRENT_LIST_DIR}/hook_env.cpp
  ${CMAKE_CURRENT_LIST_DIR}/hook_argv.cpp
  ${CMAKE_CURRENT_LIST_DIR}/hook_launch_request.cpp
  ${CMAKE_CURRENT_LIST_DIR}/hook_output.cpp
  ${CMAKE_CURRENT_LIST_DIR}/hook_result.cpp
  ${CMAKE_CURRENT_LIST_DIR}/output_files.cpp)
