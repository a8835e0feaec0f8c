# INTERFACE targets linked PRIVATE by every target of the project.
add_library(project_settings INTERFACE)
target_compile_features(project_settings INTERFACE cxx_std_17)
target_include_directories(project_settings INTERFACE ${PROJECT_SOURCE_DIR} ${PROJECT_BINARY_DIR})
target_compile_definitions(project_settings INTERFACE
  PROJECT_VERSION_STRING="${PROJECT_VERSION}"
  ORCH_DEFAULT_PLUGINS_DIR="${PROJECT_SOURCE_DIR}/plugins"
  BOOST_PROCESS_V2_HEADER_ONLY=1
  BOOST_PROCESS_USE_STD_FS=1
  BOOST_ASIO_NO_DEPRECATED=1)

add_library(project_warnings INTERFACE)
target_compile_options(project_warnings INTERFACE -Wall -Wextra -Wpedantic -Wno-missing-field-initializers)

# Debug information in the default, optimised build (RelWithDebInfo): line
# tables only (-g1, placed after CMake's -g, so it wins). Backtraces, perf and
# sanitizer reports keep function names and source lines; what goes is the
# debugger's view of types and local variables, which cost a third of every
# compile here and 3.7 times the object size (ARCHITECTURE.md, "Dependencies
# and why"). ORCH_DEBUG_INFO=full gives back CMake's plain -g.
set(ORCH_DEBUG_INFO lines CACHE STRING "Debug information in RelWithDebInfo builds: lines (-g1) or full (-g)")
set_property(CACHE ORCH_DEBUG_INFO PROPERTY STRINGS lines full)
if(NOT ORCH_DEBUG_INFO MATCHES "^(lines|full)$")
  message(FATAL_ERROR "ORCH_DEBUG_INFO must be lines or full, not '${ORCH_DEBUG_INFO}'")
endif()
if(ORCH_DEBUG_INFO STREQUAL "lines")
  target_compile_options(project_settings INTERFACE $<$<CONFIG:RelWithDebInfo>:-g1>)
endif()
