# SPDX-License-Identifier: MIT
# Every "docs/<page>.md" named in a public header, an example or a page of
# docs/ must exist (issue 9: frame.h pointed at a docs/benchmarks-uv.md that
# never was).  Run by CTest: cmake -DROOT=<source dir> -P doc_links.cmake
file(GLOB_RECURSE files
     ${ROOT}/include/*.h ${ROOT}/adapters/*.h ${ROOT}/adapters/*.c ${ROOT}/examples/*.c
     ${ROOT}/docs/*.md ${ROOT}/README.md)
set(missing "")
set(count 0)
foreach(f IN LISTS files)
  file(STRINGS ${f} lines REGEX "docs/[A-Za-z0-9_.-]+\\.md")
  foreach(line IN LISTS lines)
    string(REGEX MATCHALL "docs/[A-Za-z0-9_.-]+\\.md" refs "${line}")
    foreach(ref IN LISTS refs)
      math(EXPR count "${count} + 1")
      if(NOT EXISTS ${ROOT}/${ref})
        file(RELATIVE_PATH rel ${ROOT} ${f})
        list(APPEND missing "${rel}: ${ref}")
      endif()
    endforeach()
  endforeach()
endforeach()
if(missing)
  list(JOIN missing "\n  " text)
  message(FATAL_ERROR "references to missing pages:\n  ${text}")
endif()
message(STATUS "${count} references to docs/*.md, all present")
