#===- RegenerateLibraries.cmake - generated/ from the current tools ------===#
#
#   cmake -DDELTAC=<deltac> -DSOURCE=<repo> -DDEST=<dir> [-DCHECK=ON] -P ...
#
# Runs deltac for every library of generated/LIBRARIES.txt into DEST, all of
# them sharing one copy of the runtime in DEST/runtime (--runtime-dir), so
# the repository holds the runtime once. With CHECK=ON, DEST is a scratch
# folder and the result is compared with the checked-in generated/: any
# difference fails, and when the LLVM/MLIR version in the headers differs
# the message says to regenerate rather than showing a bare diff.
#===--------------------------------------------------------------------===#
file(STRINGS ${SOURCE}/generated/LIBRARIES.txt lines REGEX "^[^#]")
set(failed "")
file(REMOVE_RECURSE ${DEST}/runtime)
foreach(line IN LISTS lines)
  separate_arguments(fields UNIX_COMMAND "${line}")
  list(GET fields 0 name)
  list(GET fields 1 spec)
  list(GET fields 2 targets)
  file(REMOVE_RECURSE ${DEST}/${name})
  execute_process(
    COMMAND ${DELTAC} ${SOURCE}/${spec} --target=${targets} -o ${DEST}/${name}
            --name=${name} --runtime-dir=../runtime
    RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "deltac failed on ${spec}:\n${out}${err}")
  endif()
  if(NOT CHECK)
    message(STATUS "regenerated generated/${name} from ${spec}")
    continue()
  endif()
  execute_process(
    COMMAND diff -r -x __pycache__ ${SOURCE}/generated/${name} ${DEST}/${name}
    RESULT_VARIABLE rc OUTPUT_VARIABLE diff)
  if(NOT rc EQUAL 0)
    file(STRINGS ${SOURCE}/generated/${name}/${name}.h old REGEX "LLVM/MLIR")
    file(STRINGS ${DEST}/${name}/${name}.h new REGEX "LLVM/MLIR")
    if(NOT "${old}" STREQUAL "${new}")
      string(APPEND failed "generated/${name} was made by other tools (${old} vs ${new}): regenerate it with `cmake --build build --target regenerate`\n")
    else()
      string(SUBSTRING "${diff}" 0 4000 diff)
      string(APPEND failed "generated/${name} is not what the current tools produce from ${spec}; regenerate it with `cmake --build build --target regenerate` and review the change:\n${diff}\n")
    endif()
  endif()
endforeach()
if(CHECK)
  execute_process(
    COMMAND diff -r -x __pycache__ ${SOURCE}/generated/runtime ${DEST}/runtime
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
