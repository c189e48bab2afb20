# utf8proc (Debian libutf8proc-dev), the Unicode data behind fusedsl::text's tokenizers. Debian 12
# ships it with a pkg-config file but no CMake package, so an imported target is made from its
# header and library when no package config provides utf8proc::utf8proc. Included by fusedsl's
# CMakeLists.txt and by the installed fusedslConfig.cmake.
if(NOT TARGET utf8proc::utf8proc)
  find_package(utf8proc CONFIG QUIET)
endif()
if(NOT TARGET utf8proc::utf8proc)
  find_path(FUSEDSL_UTF8PROC_INCLUDE_DIR utf8proc.h)
  find_library(FUSEDSL_UTF8PROC_LIBRARY NAMES utf8proc)
  if(FUSEDSL_UTF8PROC_INCLUDE_DIR AND FUSEDSL_UTF8PROC_LIBRARY)
    add_library(utf8proc::utf8proc UNKNOWN IMPORTED)
    set_target_properties(utf8proc::utf8proc PROPERTIES
      IMPORTED_LOCATION "${FUSEDSL_UTF8PROC_LIBRARY}"
      INTERFACE_INCLUDE_DIRECTORIES "${FUSEDSL_UTF8PROC_INCLUDE_DIR}")
  endif()
endif()
