#===- CheckPtxas.cmake - ptxas -v on every generated kernel --------------===#
#
#   cmake -DPTXAS=<ptxas> -DDIR=<generated> [-DUNPACK=<dir>] -P CheckPtxas.cmake
#
# Assembles every kernels/<kernel>.<target>.ptx under DIR (also those packed
# in a library's kernels.tar.xz, unpacked into UNPACK) for its target and
# fails unless ptxas reports a 0-byte stack frame and no spills, or where it
# had to inject a warpgroup.arrive / warpgroup.wait around wgmma (C7517,
# C7519: registers touched between a wgmma and its fence or wait, which
# serializes the products) or reports a potential performance loss. Prints
# the registers of each kernel.
#===--------------------------------------------------------------------===#
file(GLOB_RECURSE files ${DIR}/*.ptx)
file(GLOB_RECURSE archives RELATIVE ${DIR} ${DIR}/kernels.tar.xz)
foreach(archive IN LISTS archives)
  if(NOT UNPACK)
    message(FATAL_ERROR "${DIR}/${archive}: packed kernels need -DUNPACK=<dir>")
  endif()
  get_filename_component(lib ${archive} DIRECTORY)
  file(REMOVE_RECURSE ${UNPACK}/${lib})
  file(ARCHIVE_EXTRACT INPUT ${DIR}/${archive} DESTINATION ${UNPACK}/${lib})
  file(GLOB unpacked ${UNPACK}/${lib}/kernels/*.ptx)
  list(APPEND files ${unpacked})
endforeach()
set(failed "")
list(LENGTH files count)
if(count EQUAL 0)
  message(FATAL_ERROR "no .ptx files under ${DIR}")
endif()
foreach(file IN LISTS files)
  get_filename_component(name ${file} NAME)
  string(REGEX MATCH "\\.(sm_[0-9]+a?)\\.ptx$" _ ${name})
  set(target ${CMAKE_MATCH_1})
  execute_process(COMMAND ${PTXAS} -arch=${target} -O3 -v ${file} -o /dev/null
                  RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  set(report "${out}${err}")
  string(REGEX MATCH "Used ([0-9]+) registers" _ "${report}")
  set(regs ${CMAKE_MATCH_1})
  if(NOT rc EQUAL 0)
    list(APPEND failed "${name}: ptxas failed:\n${report}")
  elseif(NOT report MATCHES "0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads")
    list(APPEND failed "${name}: stack frame or spills:\n${report}")
  elseif(report MATCHES "is injected|Potential Performance Loss")
    list(APPEND failed "${name}: ptxas serializes wgmma:\n${report}")
  else()
    message(STATUS "${name}: ${regs} registers, 0 stack, 0 spills")
  endif()
endforeach()
if(failed)
  string(REPLACE ";" "\n" failed "${failed}")
  message(FATAL_ERROR "${failed}")
endif()
message(STATUS "${count} kernels: 0 stack frame, 0 spills")
