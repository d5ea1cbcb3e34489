# The large test data lives in the repository as tests/data/packed.tar.xz
# (scripts/pack-test-data.sh): unpacked here, beside it, at configure time, and
# again whenever the archive changes or unpacked files went missing (a
# git-ignored stamp keeps the archive's hash and how many files it gave; a
# removed stamp, as `git clean -X` leaves it, makes the build configure again).
# Edit an unpacked file, then repack: unpacking again overwrites edits.
set(_data ${PROJECT_SOURCE_DIR}/tests/data)
set(_packed ${_data}/packed.tar.xz)
set(_stamp ${_data}/.unpacked)
if(EXISTS ${_packed})
  set_property(DIRECTORY APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS ${_packed} ${_stamp})
  # The packed files, as scripts/pack-test-data.sh and .gitignore name them.
  set(_globs ${_data}/golden/*.json ${_data}/golden/random/*.gguf ${_data}/golden/random/*.json
             ${_data}/golden/arch/*.gguf ${_data}/golden/arch/*.json
             ${_data}/tokenizer-vectors/*.gguf)
  # One configure at a time unpacks (build folders configured side by side).
  file(LOCK ${_data}/.unpack.lock GUARD FILE)
  file(SHA256 ${_packed} _hash)
  file(GLOB _present ${_globs})
  list(LENGTH _present _count)
  set(_have "")
  if(EXISTS ${_stamp})
    file(READ ${_stamp} _have)
  endif()
  if(NOT _have STREQUAL "${_hash} ${_count}")
    message(STATUS "Unpacking tests/data/packed.tar.xz")
    file(REMOVE ${_stamp})
    file(ARCHIVE_EXTRACT INPUT ${_packed} DESTINATION ${_data})
    file(GLOB _present ${_globs})
    list(LENGTH _present _count)
    file(WRITE ${_stamp} "${_hash} ${_count}")
  endif()
  file(LOCK ${_data}/.unpack.lock RELEASE)
endif()
