#===- RegenerateLibraries.cmake - generated/ from the current tools ------===#
#
#   cmake -DDELTAC=<deltac> -DSOURCE=<repo> -DSCRATCH=<dir> [-DCHECK=ON] -P ...
#
# Runs deltac for every library of generated/LIBRARIES.txt into SCRATCH, all
# of them sharing one copy of the runtime in SCRATCH/runtime (--runtime-dir),
# so the repository holds the runtime once. Without CHECK the result
# replaces generated/; with CHECK=ON it is compared with generated/: any
# difference fails, and when the LLVM/MLIR version in the headers differs
# the message says to regenerate rather than showing a bare diff.
#
# generated/<lib> holds its kernels packed, kernels.tar.xz in place of
# deltac's kernels/ folder (the library's CMakeLists takes either): the
# checked-in PTX is about 60 MB and packs into about 3 MB, and every GPU run
# carries the repository within a 64 MiB limit. The archive's bytes depend
# on the packing machine (owners, the xz library), so kernels are compared
# by content, and an archive whose content did not change is kept as it is.
#===--------------------------------------------------------------------===#
file(STRINGS ${SOURCE}/generated/LIBRARIES.txt lines REGEX "^[^#]")
set(failed "")
file(REMOVE_RECURSE ${SCRATCH})
file(MAKE_DIRECTORY ${SCRATCH}/old)
foreach(line IN LISTS lines)
  separate_arguments(fields UNIX_COMMAND "${line}")
  list(GET fields 0 name)
  list(GET fields 1 spec)
  list(GET fields 2 targets)
  set(fresh ${SCRATCH}/${name})
  set(kept ${SOURCE}/generated/${name})
  execute_process(
    COMMAND ${DELTAC} ${SOURCE}/${spec} --target=${targets} -o ${fresh}
            --name=${name} --runtime-dir=../runtime
    RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "deltac failed on ${spec}:\n${out}${err}")
  endif()

  # The checked-in kernels, unpacked (or a kernels/ folder, as deltac writes).
  set(old_kernels ${kept}/kernels)
  if(EXISTS ${kept}/kernels.tar.xz)
    file(ARCHIVE_EXTRACT INPUT ${kept}/kernels.tar.xz
         DESTINATION ${SCRATCH}/old/${name})
    set(old_kernels ${SCRATCH}/old/${name}/kernels)
  endif()
  set(diff "")
  set(kernels_same OFF)
  if(IS_DIRECTORY ${old_kernels})
    execute_process(COMMAND diff -r ${old_kernels} ${fresh}/kernels
                    RESULT_VARIABLE rc OUTPUT_VARIABLE diff)
    if(rc EQUAL 0)
      set(kernels_same ON)
    endif()
  else()
    set(diff "generated/${name} has no kernels.tar.xz\n")
  endif()
  execute_process(
    COMMAND diff -r -x __pycache__ -x kernels -x kernels.tar.xz ${kept} ${fresh}
    RESULT_VARIABLE rc OUTPUT_VARIABLE rest)
  string(APPEND diff "${rest}")

  if(NOT CHECK)
    if(kernels_same AND EXISTS ${kept}/kernels.tar.xz)
      file(COPY ${kept}/kernels.tar.xz DESTINATION ${fresh})
    else()
      # Sorted member names and one fixed time: the archive depends on the
      # kernels alone, up to owners and the xz library.
      file(GLOB ptx RELATIVE ${fresh} ${fresh}/kernels/*)
      list(SORT ptx)
      execute_process(
        COMMAND ${CMAKE_COMMAND} -E tar cJf kernels.tar.xz --format=pax
                --mtime=1970-01-01 -- ${ptx}
        WORKING_DIRECTORY ${fresh} RESULT_VARIABLE rc ERROR_VARIABLE err)
      if(NOT rc EQUAL 0)
        message(FATAL_ERROR "packing ${name}'s kernels failed:\n${err}")
      endif()
    endif()
    file(REMOVE_RECURSE ${fresh}/kernels ${kept})
    file(COPY ${fresh}/ DESTINATION ${kept})
    message(STATUS "regenerated generated/${name} from ${spec}")
  elseif(NOT diff STREQUAL "" OR NOT kernels_same)
    file(STRINGS ${kept}/${name}.h old REGEX "LLVM/MLIR")
    file(STRINGS ${fresh}/${name}.h new REGEX "LLVM/MLIR")
    if(NOT "${old}" STREQUAL "${new}")
      string(APPEND failed "generated/${name} was made by other tools (${old} vs ${new}): regenerate it with `cmake --build build --target regenerate`\n")
    else()
      string(SUBSTRING "${diff}" 0 4000 diff)
      string(APPEND failed "generated/${name} is not what the current tools produce from ${spec}; regenerate it with `cmake --build build --target regenerate` and review the change:\n${diff}\n")
    endif()
  endif()
endforeach()
if(NOT CHECK)
  file(REMOVE_RECURSE ${SOURCE}/generated/runtime)
  file(COPY ${SCRATCH}/runtime/ DESTINATION ${SOURCE}/generated/runtime)
else()
  execute_process(
    COMMAND diff -r -x __pycache__ ${SOURCE}/generated/runtime ${SCRATCH}/runtime
    RESULT_VARIABLE rc OUTPUT_VARIABLE diff)
  if(NOT rc EQUAL 0)
    string(SUBSTRING "${diff}" 0 4000 diff)
    string(APPEND failed "generated/runtime is not templates/runtime of this tree; regenerate it with `cmake --build build --target regenerate`:\n${diff}\n")
  endif()
endif()
if(failed)
  message(FATAL_ERROR "${failed}")
endif()
if(CHECK)
  message(STATUS "generated/ is up to date")
endif()
