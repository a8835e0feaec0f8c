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
