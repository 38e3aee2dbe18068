#===- CompileCheckTargets.cmake - targets compile-checked, not checked in -===#
#
#   cmake -DDELTAC=<deltac> -DPTXAS=<ptxas> -DSOURCE=<repo> -DDEST=<dir> -P ...
#
# A library of generated/LIBRARIES.txt may name, in a fourth column, targets
# that are compile-checked but not checked in (no GPU lent here runs them:
# gdn's sm_100a). This generates each
# such library for those targets into DEST/<name> and runs CheckPtxas.cmake
# over it: the same no-stack, no-spill, no-serialized-wgmma rule as the
# checked-in kernels.
#===--------------------------------------------------------------------===#
file(STRINGS ${SOURCE}/generated/LIBRARIES.txt lines REGEX "^[^#]")
set(checked 0)
foreach(line IN LISTS lines)
  separate_arguments(fields UNIX_COMMAND "${line}")
  list(LENGTH fields n)
  if(n LESS 4)
    continue()
  endif()
  list(GET fields 0 name)
  list(GET fields 1 spec)
  list(GET fields 3 targets)
  file(REMOVE_RECURSE ${DEST}/${name})
  execute_process(
    COMMAND ${DELTAC} ${SOURCE}/${spec} --target=${targets} -o ${DEST}/${name}
            --name=${name}
    RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "deltac failed on ${spec} for ${targets}:\n${out}${err}")
  endif()
  execute_process(
    COMMAND ${CMAKE_COMMAND} -DPTXAS=${PTXAS} -DDIR=${DEST}/${name}
            -P ${SOURCE}/cmake/CheckPtxas.cmake
    RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  message(STATUS "${name} (${targets}):\n${out}${err}")
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "${name} for ${targets} fails the ptxas check")
  endif()
  math(EXPR checked "${checked} + 1")
endforeach()
if(checked EQUAL 0)
  message(FATAL_ERROR "no library of LIBRARIES.txt names compile-checked targets")
endif()
