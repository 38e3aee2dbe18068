#===- DeltacKernels.cmake - deltac_generate_kernels() ---------------------===#
#
#   deltac_generate_kernels(<name> SPEC <file.mlir>
#                           [TARGETS sm_80 sm_90a ...] [OUTPUT_DIR <dir>])
#
# Runs deltac at build time on SPEC and adds a static library <name> with
# the generated API header <name>.h on its include path. The library is
# regenerated when the spec or deltac changes. Kernels are embedded as PTX
# for every target (the driver compiles them at first use; ship sm_90a for
# Hopper: sm_80 PTX also runs there, compiled by the driver). TARGETS
# defaults to sm_80 sm_90a, OUTPUT_DIR to <build dir>/<name>. Needs the
# target deltac::deltac (find_package(deltac) or the deltac source tree).
#===--------------------------------------------------------------------===#
function(deltac_generate_kernels name)
  cmake_parse_arguments(ARG "" "SPEC;OUTPUT_DIR" "TARGETS" ${ARGN})
  if(NOT ARG_SPEC)
    message(FATAL_ERROR "deltac_generate_kernels(${name}): SPEC is required")
  endif()
  if(ARG_UNPARSED_ARGUMENTS)
    message(FATAL_ERROR "deltac_generate_kernels(${name}): unknown arguments "
                        "${ARG_UNPARSED_ARGUMENTS}")
  endif()
  if(NOT TARGET deltac::deltac)
    message(FATAL_ERROR "deltac_generate_kernels(${name}): no deltac::deltac "
                        "target; call find_package(deltac CONFIG REQUIRED)")
  endif()
  if(NOT ARG_TARGETS)
    set(ARG_TARGETS sm_80 sm_90a)
  endif()
  if(NOT ARG_OUTPUT_DIR)
    set(ARG_OUTPUT_DIR ${CMAKE_CURRENT_BINARY_DIR}/${name})
  endif()
  get_filename_component(spec ${ARG_SPEC} ABSOLUTE)
  set(dir ${ARG_OUTPUT_DIR})
  string(REPLACE ";" "," targets "${ARG_TARGETS}")
  set(sources ${dir}/${name}.cpp ${dir}/${name}_images.cpp
              ${dir}/deltac_runtime.cpp ${dir}/deltac_decode.cpp
              ${dir}/deltac_prefill.cpp)
  set(headers ${dir}/${name}.h ${dir}/deltac_abi.h ${dir}/deltac_api.h ${dir}/deltac_runtime.h
              ${dir}/deltac_decode.h ${dir}/deltac_prefill.h
              ${dir}/deltac_checks.h)
  add_custom_command(
    OUTPUT ${sources} ${headers}
    COMMAND deltac::deltac ${spec} --target=${targets} -o ${dir}
            --name=${name} --embed-images
    DEPENDS ${spec} deltac::deltac $<TARGET_FILE:deltac::deltac>
    COMMENT "deltac: generating ${name} from ${ARG_SPEC} (${targets})"
    VERBATIM)
  add_library(${name} STATIC ${sources} ${headers})
  target_include_directories(${name} PUBLIC ${dir})
  target_compile_features(${name} PUBLIC cxx_std_17)
  set_target_properties(${name} PROPERTIES POSITION_INDEPENDENT_CODE ON)
  target_link_libraries(${name} PRIVATE ${CMAKE_DL_LIBS})
endfunction()
